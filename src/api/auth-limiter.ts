export interface AuthLimiterOptions {
  /** Failed attempts allowed per client within windowMs; 0 turns the limiter off. */
  maxFailures: number;
  windowMs: number;
  /** How long a client that used up its failures is refused. */
  blockMs: number;
  /** Clients tracked at most: the least recently seen are forgotten first. */
  maxClients: number;
}

interface Client {
  failures: number;
  windowStart: number;
  blockedUntil: number;
}

/**
 * Counts failed bearer-token attempts per client and refuses a client that failed too often,
 * for a while, whatever token it sends then (letting a right token through would tell a
 * guesser that it guessed right). Memory is bounded: at most maxClients entries.
 */
export class AuthFailureLimiter {
  private readonly clients = new Map<string, Client>();

  constructor(private readonly o: AuthLimiterOptions) {}

  get enabled(): boolean {
    return this.o.maxFailures > 0;
  }

  get tracked(): number {
    return this.clients.size;
  }

  /** Milliseconds this client is still refused for; 0: not refused. */
  blockedFor(client: string, now = Date.now()): number {
    const c = this.clients.get(client);
    return c ? Math.max(0, c.blockedUntil - now) : 0;
  }

  /** Records a failed attempt; the client is refused from the attempt after its last allowed one. */
  fail(client: string, now = Date.now()): void {
    if (!this.enabled) return;
    let c = this.clients.get(client);
    if (c) this.clients.delete(client); // re-inserted below: the map's order is least recently seen first
    if (!c || now - c.windowStart >= this.o.windowMs) c = { failures: 0, windowStart: now, blockedUntil: c?.blockedUntil ?? 0 };
    c.failures++;
    if (c.failures >= this.o.maxFailures) {
      c.blockedUntil = now + this.o.blockMs;
      c.failures = 0;
      c.windowStart = now;
    }
    this.clients.set(client, c);
    for (const k of this.clients.keys()) {
      if (this.clients.size <= this.o.maxClients) break;
      this.clients.delete(k);
    }
  }
}
