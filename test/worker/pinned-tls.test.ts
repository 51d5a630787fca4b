// A pinned call over real TLS: the connection goes to the checked address, while the Host
// header, the server name (SNI) and the certificate check use the name the job gave.
// Fixture: a test CA and a certificate for hooks.example.test (test/fixtures/tls, 100 years).
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pinnedCall } from "../../src/worker/pinned-target.ts";

const dir = join(import.meta.dir, "..", "fixtures", "tls");
const ca = readFileSync(join(dir, "ca.crt"), "utf8");

describe("pinned calls over TLS (loopback server with a certificate for a name)", () => {
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: readFileSync(join(dir, "hooks.crt"), "utf8"), key: readFileSync(join(dir, "hooks.key"), "utf8") },
    fetch: (req) => Response.json({ host: req.headers.get("host"), path: new URL(req.url).pathname }),
  });
  afterAll(() => server.stop(true));

  const call = (name: string) => {
    const c = pinnedCall(new URL(`https://${name}:${server.port}/hook?x=1`), "127.0.0.1");
    return fetch(c.url, { headers: c.host ? { host: c.host } : {}, tls: { ...c.tls, ca } } as RequestInit);
  };

  test("connects to the address, sends the name as Host and checks the certificate against the name", async () => {
    const c = pinnedCall(new URL(`https://hooks.example.test:${server.port}/hook?x=1`), "127.0.0.1");
    expect(c).toEqual({
      url: `https://127.0.0.1:${server.port}/hook?x=1`,
      host: `hooks.example.test:${server.port}`,
      tls: { serverName: "hooks.example.test" },
    });
    const res = await call("hooks.example.test");
    expect(await res.json()).toEqual({ host: `hooks.example.test:${server.port}`, path: "/hook" });
  });

  test("a certificate that is not the name's fails the call, even on a reused address", async () => {
    await (await call("hooks.example.test")).text();
    let err: any;
    try {
      await call("other.example.test");
    } catch (e) {
      err = e;
    }
    expect(err?.code).toBe("ERR_TLS_CERT_ALTNAME_INVALID");
  });

  test("http: Host header only; an IP literal is called as it is; IPv6 addresses get brackets", () => {
    expect(pinnedCall(new URL("http://hooks.example.test/a"), "93.184.216.34")).toEqual({ url: "http://93.184.216.34/a", host: "hooks.example.test" });
    expect(pinnedCall(new URL("http://93.184.216.34:81/a"), "93.184.216.34")).toEqual({ url: "http://93.184.216.34:81/a" });
    expect(pinnedCall(new URL("https://h.example.test/"), "2606:4700::1111")).toEqual({
      url: "https://[2606:4700::1111]/",
      host: "h.example.test",
      tls: { serverName: "h.example.test" },
    });
  });
});
