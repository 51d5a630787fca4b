import { BlockList, isIP } from "node:net";

/**
 * The peers allowed to name the client in SCHEDULER_CLIENT_IP_HEADER (the proxies in front of
 * the scheduler). Anyone else could pick a fresh name per request and never be limited.
 */
export class TrustedProxies {
  private readonly list = new BlockList();

  /** Entries "ip" or "ip/prefix", IPv4 or IPv6; throws Error naming a bad entry. */
  constructor(entries: string[]) {
    for (const raw of entries) {
      const [ip, prefix, extra] = raw.split("/");
      const family = isIP(ip ?? "");
      const max = family === 4 ? 32 : 128;
      if (family === 0 || extra !== undefined || (prefix !== undefined && !/^\d{1,3}$/.test(prefix)) || Number(prefix ?? max) > max) {
        throw new Error(`entry ${JSON.stringify(raw)} is not an IP address or CIDR like 10.0.0.0/8 or fdaa::/16`);
      }
      const type = family === 4 ? "ipv4" : "ipv6";
      if (prefix === undefined) this.list.addAddress(ip!, type);
      else this.list.addSubnet(ip!, Number(prefix), type);
    }
  }

  has(address: string | undefined): boolean {
    if (!address) return false;
    const family = isIP(address);
    return family !== 0 && this.list.check(address, family === 4 ? "ipv4" : "ipv6");
  }
}
