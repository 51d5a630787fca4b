import { describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { Webhook } from "standardwebhooks";
import { decodeSigningSecret, signatureHeader, signWebhook } from "../../src/worker/signature.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

describe("signWebhook", () => {
  test("matches the published Standard Webhooks vector", () => {
    const key = decodeSigningSecret(SECRET);
    expect(signWebhook(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, '{"test": 2432232314}')).toBe("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
  });

  test("the standardwebhooks library verifies our signature", () => {
    const key = decodeSigningSecret(SECRET);
    const id = "019300aa-0000-7000-8000-000000000001";
    const ts = Math.floor(Date.now() / 1000);
    const body = JSON.stringify({ invoice: 42, note: "héllo ✓" });
    const headers = { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": signWebhook(key, id, ts, body) };
    expect(new Webhook(SECRET).verify(body, headers)).toEqual({ invoice: 42, note: "héllo ✓" });
  });

  test("the library rejects a signature over a different body", () => {
    const key = decodeSigningSecret(SECRET);
    const ts = Math.floor(Date.now() / 1000);
    const headers = { "webhook-id": "a", "webhook-timestamp": String(ts), "webhook-signature": signWebhook(key, "a", ts, '{"x":1}') };
    expect(() => new Webhook(SECRET).verify('{"x":2}', headers)).toThrow();
  });

  test("the same bytes as node:crypto's HMAC, for a key of any bytes and a body beyond ASCII", () => {
    // Key bytes 0x00–0xff (not text), a body with 2-, 3- and 4-byte UTF-8 characters.
    // 24 bytes (the shortest secret allowed), 64 (SHA-256's block) and 100 (hashed first by HMAC).
    for (const length of [24, 64, 100]) {
      const key = new Uint8Array(Array.from({ length }, (_, i) => (i * 37 + 128) % 256));
      // A lone surrogate is not UTF-8: both replace it the same way.
      for (const body of ["", "plain", '{"note":"héllo ✓ 𝄞"}', "\u0000nul", "half \ud800 a pair"]) {
        const expected = createHmac("sha256", key).update(`id-1.1700000000.${body}`, "utf8").digest("base64");
        expect(signWebhook(key, "id-1", 1700000000, body)).toBe(`v1,${expected}`);
      }
    }
  });

  test("id, timestamp and body all change the signature", () => {
    const key = decodeSigningSecret(SECRET);
    const base = signWebhook(key, "a", 1, "b");
    expect(signWebhook(key, "a2", 1, "b")).not.toBe(base);
    expect(signWebhook(key, "a", 2, "b")).not.toBe(base);
    expect(signWebhook(key, "a", 1, "b2")).not.toBe(base);
  });
});

describe("signatureHeader", () => {
  test("one v1 signature per key, space separated; the library verifies with either secret", () => {
    const other = `whsec_${Buffer.alloc(32, 7).toString("base64")}`;
    const keys = [decodeSigningSecret(SECRET), decodeSigningSecret(other)];
    const ts = Math.floor(Date.now() / 1000);
    const body = '{"a":1}';
    const header = signatureHeader(keys, "id1", ts, body)!;
    expect(header.split(" ")).toEqual([signWebhook(keys[0]!, "id1", ts, body), signWebhook(keys[1]!, "id1", ts, body)]);
    const headers = { "webhook-id": "id1", "webhook-timestamp": String(ts), "webhook-signature": header };
    expect(new Webhook(SECRET).verify(body, headers)).toEqual({ a: 1 });
    expect(new Webhook(other).verify(body, headers)).toEqual({ a: 1 });
    expect(() => new Webhook(`whsec_${Buffer.alloc(32, 9).toString("base64")}`).verify(body, headers)).toThrow();
  });

  test("no keys: no header", () => {
    expect(signatureHeader([], "a", 1, "")).toBeUndefined();
  });
});

describe("decodeSigningSecret", () => {
  test("decodes the key bytes", () => {
    expect(Buffer.from(decodeSigningSecret("whsec_AAECAw==")).toString("hex")).toBe("00010203");
    expect(decodeSigningSecret(SECRET).length).toBe(24);
  });

  test("rejects malformed secrets with a clear message", () => {
    expect(() => decodeSigningSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")).toThrow(/must start with "whsec_"/);
    expect(() => decodeSigningSecret("whsec_")).toThrow(/no key/);
    expect(() => decodeSigningSecret("whsec_not base64!")).toThrow(/not valid base64/);
    expect(() => decodeSigningSecret("whsec_abcde")).toThrow(/not valid base64/);
    expect(() => decodeSigningSecret("whsec_====")).toThrow(/not valid base64/);
  });
});
