import { afterAll, describe, expect, test } from "bun:test";
import net from "node:net";
import { classifyFetchError, classifyStatus, type Outcome } from "../../src/worker/classify.ts";

describe("classifyStatus", () => {
  const table: [number, Outcome][] = [
    [200, "success"],
    [201, "success"],
    [204, "success"],
    [299, "success"],
    [429, "throttled"],
    [503, "throttled"],
    [408, "transient"],
    [500, "transient"],
    [502, "transient"],
    [504, "transient"],
    [501, "transient"],
    [505, "transient"],
    [599, "transient"],
    [100, "transient"],
    [101, "transient"],
    [199, "transient"],
    [300, "permanent"],
    [301, "permanent"],
    [302, "permanent"],
    [304, "permanent"],
    [308, "permanent"],
    [400, "permanent"],
    [401, "permanent"],
    [403, "permanent"],
    [404, "permanent"],
    [409, "permanent"],
    [410, "permanent"],
    [422, "permanent"],
    [499, "permanent"],
  ];
  for (const [status, outcome] of table) {
    test(`${status} → ${outcome}`, () => expect(classifyStatus(status)).toBe(outcome));
  }
});

async function thrown(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error("expected the fetch to fail");
}

function listen(server: net.Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as net.AddressInfo).port)));
}

describe("classifyFetchError with real loopback failures", () => {
  const cleanups: (() => void)[] = [];
  afterAll(() => {
    for (const c of cleanups) c();
  });

  test("refused connection is transient and not delivered", async () => {
    const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("x") });
    const port = s.port;
    s.stop(true);
    const err = await thrown(fetch(`http://127.0.0.1:${port}/`));
    const c = classifyFetchError(err, true);
    expect(c).toEqual({ outcome: "transient", message: "connection refused", possiblyDelivered: false });
  });

  test("per-attempt timeout is unknown and possibly delivered", async () => {
    const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
    cleanups.push(() => s.stop(true));
    const started = Date.now();
    const err = await thrown(fetch(`http://127.0.0.1:${s.port}/`, { signal: AbortSignal.timeout(100) }));
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    expect((err as Error).name).toBe("TimeoutError");
    const c = classifyFetchError(err, true);
    expect(c.outcome).toBe("unknown");
    expect(c.possiblyDelivered).toBe(true);
    expect(c.message).toBe("timed out after the per-attempt timeout");
  });

  test("explicit abort is unknown unless the caller knows nothing was sent", async () => {
    const s = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Promise<Response>(() => {}) });
    cleanups.push(() => s.stop(true));
    const ac = new AbortController();
    setTimeout(() => ac.abort(), 30);
    const err = await thrown(fetch(`http://127.0.0.1:${s.port}/`, { signal: ac.signal }));
    expect((err as Error).name).toBe("AbortError");
    expect(classifyFetchError(err, true)).toMatchObject({ outcome: "unknown", possiblyDelivered: true });
    expect(classifyFetchError(err)).toMatchObject({ outcome: "unknown", possiblyDelivered: true });
    expect(classifyFetchError(err, false)).toMatchObject({ outcome: "transient", possiblyDelivered: false });
  });

  test("connection dropped after the request was read is unknown", async () => {
    let received = "";
    const server = net.createServer((sock) => {
      sock.once("data", (d) => {
        received += d.toString();
        sock.destroy();
      });
    });
    cleanups.push(() => server.close());
    const port = await listen(server);
    const err = await thrown(fetch(`http://127.0.0.1:${port}/hook`, { method: "POST", body: "payload" }));
    expect(received).toStartWith("POST /hook HTTP/1.1");
    const c = classifyFetchError(err, true);
    expect(c.outcome).toBe("unknown");
    expect(c.possiblyDelivered).toBe(true);
    expect(c.message).toStartWith("connection lost after the request was sent: ");
    expect(c.message).not.toContain("verbose");
  });

  test("connection dropped mid-body is unknown", async () => {
    const server = net.createServer((sock) => {
      sock.once("data", () => {
        sock.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc");
        setTimeout(() => sock.destroy(), 20);
      });
    });
    cleanups.push(() => server.close());
    const port = await listen(server);
    const res = await fetch(`http://127.0.0.1:${port}/`);
    const err = await thrown(res.text());
    expect(classifyFetchError(err, true)).toMatchObject({ outcome: "unknown", possiblyDelivered: true });
  });

  test("a reset is transient when the caller knows the request was not sent", async () => {
    const server = net.createServer((sock) => sock.destroy());
    cleanups.push(() => server.close());
    const port = await listen(server);
    const err = await thrown(fetch(`http://127.0.0.1:${port}/`));
    const c = classifyFetchError(err, false);
    expect(c.outcome).toBe("transient");
    expect(c.possiblyDelivered).toBe(false);
    expect(c.message).toStartWith("connection lost before the request was sent");
  });

  test("DNS failure is transient and not delivered", async () => {
    // .invalid never resolves (RFC 2606), so no network is needed to get the failure.
    const err = await thrown(fetch("http://no-such-host.invalid/", { signal: AbortSignal.timeout(5000) }));
    const c = classifyFetchError(err, true);
    expect(c.outcome).toBe("transient");
    expect(c.possiblyDelivered).toBe(false);
    expect(c.message).toStartWith("could not resolve host");
  });

  test("TLS handshake failure is transient and not delivered", async () => {
    const plain = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("x") });
    cleanups.push(() => plain.stop(true));
    const err = await thrown(fetch(`https://127.0.0.1:${plain.port}/`, { signal: AbortSignal.timeout(2000) }));
    const c = classifyFetchError(err, true);
    expect(c).toMatchObject({ outcome: "transient", possiblyDelivered: false });
    expect(c.message).toStartWith("TLS handshake failed");
  });
});

describe("classifyFetchError with synthetic errors", () => {
  test("older Bun's ConnectionRefused code", () => {
    const e = Object.assign(new Error("Unable to connect"), { code: "ConnectionRefused" });
    expect(classifyFetchError(e, true).outcome).toBe("transient");
  });

  test("non-Error values and unknown errors default to possibly delivered", () => {
    expect(classifyFetchError("boom", true)).toMatchObject({ outcome: "unknown", possiblyDelivered: true });
    expect(classifyFetchError(undefined, true).message).toStartWith("request failed");
    expect(classifyFetchError(new Error("weird"), false)).toMatchObject({ outcome: "transient", possiblyDelivered: false });
  });

  test("long messages are cut short", () => {
    const c = classifyFetchError(Object.assign(new Error("x".repeat(1000)), { code: "ECONNRESET" }), true);
    expect(c.message.length).toBeLessThan(260);
  });
});
