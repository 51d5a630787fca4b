export type Outcome = "success" | "throttled" | "transient" | "unknown" | "permanent";

export function classifyStatus(status: number): Outcome {
  if (status >= 200 && status <= 299) return "success";
  if (status === 429 || status === 503) return "throttled";
  // Redirects are never followed, so a 3xx cannot become a success by retrying.
  if (status >= 300 && status <= 399) return "permanent";
  if (status === 408) return "transient";
  if (status >= 400 && status <= 499) return "permanent";
  if (status >= 500 && status <= 599) return "transient";
  // 1xx and out-of-range codes mean a confused target or proxy; retrying is the safe bet.
  return "transient";
}

export interface FetchErrorClass {
  outcome: "transient" | "unknown";
  message: string;
  possiblyDelivered: boolean;
}

// Bun 1.4 reports ECONNREFUSED; older Bun used "ConnectionRefused". Both mean nothing was sent.
const REFUSED_CODES = new Set(["ECONNREFUSED", "ConnectionRefused"]);
const DNS_CODES = new Set(["ENOTFOUND", "EAI_AGAIN", "EAI_NONAME", "EAI_FAIL", "DNSException"]);
// TLS fails during the handshake, before any request byte is written.
const TLS_CODES = new Set([
  "EPROTO",
  "DEPTH_ZERO_SELF_SIGNED_CERT",
  "SELF_SIGNED_CERT_IN_CHAIN",
  "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
  "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
  "CERT_HAS_EXPIRED",
  "CERT_NOT_YET_VALID",
  "ERR_TLS_CERT_ALTNAME_INVALID",
  "CERT_REVOKED",
]);
// Bun reports FIN, RST, a garbage answer and a drop mid-body all as ECONNRESET, and
// it uses the same code when the peer drops the connection before reading the request.
const RESET_CODES = new Set(["ECONNRESET", "ConnectionClosed", "EPIPE", "UND_ERR_SOCKET"]);

const MAX_DETAIL = 200;

function shorten(s: string): string {
  // Bun appends advice meant for developers ("pass `verbose: true` …") that means nothing to a job owner.
  const firstSentence = s.split(/(?<=\.)\s/)[0] ?? s;
  return firstSentence.length > MAX_DETAIL ? `${firstSentence.slice(0, MAX_DETAIL - 1)}…` : firstSentence;
}

function fields(err: unknown): { name: string; code: string; message: string } {
  if (err && typeof err === "object") {
    const e = err as { name?: unknown; code?: unknown; message?: unknown };
    return {
      name: typeof e.name === "string" ? e.name : "",
      // DOMException carries a numeric legacy code (23 for TimeoutError); only string codes identify causes.
      code: typeof e.code === "string" ? e.code : "",
      message: typeof e.message === "string" ? e.message : String(err),
    };
  }
  return { name: "", code: "", message: String(err) };
}

/**
 * requestSent: pass false only when it is known that no request byte left this process.
 * fetch never tells, so the default is to assume it may have been sent.
 */
export function classifyFetchError(err: unknown, requestSent: boolean = true): FetchErrorClass {
  const { name, code, message } = fields(err);
  const notSent = (msg: string): FetchErrorClass => ({ outcome: "transient", message: msg, possiblyDelivered: false });
  const maybeSent = (msg: string): FetchErrorClass => (requestSent ? { outcome: "unknown", message: msg, possiblyDelivered: true } : notSent(msg));

  if (REFUSED_CODES.has(code) || message.includes("ECONNREFUSED")) return notSent("connection refused");
  if (DNS_CODES.has(code) || message.includes("ENOTFOUND") || /\bDNS\b/.test(message)) {
    return notSent(`could not resolve host: ${shorten(message)}`);
  }
  if (TLS_CODES.has(code)) return notSent(`TLS handshake failed: ${shorten(message)}`);

  if (name === "TimeoutError") return maybeSent("timed out after the per-attempt timeout");
  if (name === "AbortError") return maybeSent("request aborted before an answer arrived");

  if (RESET_CODES.has(code) || /ECONNRESET|socket (connection )?(was )?closed/i.test(message)) {
    return requestSent
      ? maybeSent(`connection lost after the request was sent: ${shorten(message)}`)
      : notSent(`connection lost before the request was sent: ${shorten(message)}`);
  }

  // An unrecognised failure could have happened at any point of the exchange.
  return maybeSent(`request failed: ${shorten(message) || name || "unknown error"}`);
}
