// Start-up rules for secrets: tokens of at least 32 characters, signing keys of at least 24
// bytes, a client-IP header only with the proxies that set it, and errors that never echo a
// password or a secret.
import { describe, expect, test } from "bun:test";
import { ConfigError, loadConfig } from "../../src/config.ts";

const load = (env: Record<string, string>) => loadConfig(env);
const errorOf = (env: Record<string, string>): string => {
  try {
    load(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error("expected a ConfigError");
};

describe("start-up rules for secrets", () => {
  test("bearer tokens: 31 characters refused (naming the entry), 32 accepted", () => {
    const t31 = "a".repeat(31);
    const t32 = "b".repeat(32);
    const msg = errorOf({ SCHEDULER_TOKENS: `${t32}:acme:jobs:read;${t31}:beta:admin` });
    expect(msg).toContain("SCHEDULER_TOKENS entry 2");
    expect(msg).toContain("at least 32 characters");
    expect(msg).not.toContain(t31);
    expect(load({ SCHEDULER_TOKENS: `${t32}:acme:jobs:read` }).tokens).toHaveLength(1);
  });

  test("whsec_ signing secrets: 23 bytes refused, 24 accepted; the secret is never echoed", () => {
    const s23 = `whsec_${Buffer.alloc(23, 7).toString("base64")}`;
    const s24 = `whsec_${Buffer.alloc(24, 7).toString("base64")}`;
    const msg = errorOf({ SCHEDULER_SIGNING_SECRET: s23 });
    expect(msg).toContain("at least 24 bytes");
    expect(msg).not.toContain(s23.slice(6));
    expect(load({ SCHEDULER_SIGNING_SECRET: s24 }).signingKey).toHaveLength(24);
    expect(errorOf({ SCHEDULER_SIGNING_SECRET: "whsec_AAECAw==" })).toContain("(it holds 4)");
  });

  test("SCHEDULER_CLIENT_IP_HEADER needs SCHEDULER_TRUSTED_PROXIES; bad entries are named", () => {
    expect(errorOf({ SCHEDULER_CLIENT_IP_HEADER: "fly-client-ip" })).toContain("SCHEDULER_TRUSTED_PROXIES");
    expect(errorOf({ SCHEDULER_TRUSTED_PROXIES: "10.0.0.0/8,not-an-ip" })).toContain("SCHEDULER_TRUSTED_PROXIES must be");
    const c = load({ SCHEDULER_CLIENT_IP_HEADER: "Fly-Client-IP", SCHEDULER_TRUSTED_PROXIES: "172.16.0.0/12, fdaa::/16" });
    expect(c.authFailures).toMatchObject({ clientIpHeader: "fly-client-ip", trustedProxies: ["172.16.0.0/12", "fdaa::/16"] });
  });

  test("URL settings are echoed without their password; secret settings not at all", () => {
    const msg = errorOf({ DATABASE_URL: "mysql://app:hunter2@db:3306/x" });
    expect(msg).toContain("DATABASE_URL");
    expect(msg).toContain("mysql://app:***@db:3306/x");
    expect(msg).not.toContain("hunter2");
    expect(errorOf({ REDIS_URL: "http://:hunter2@cache" })).not.toContain("hunter2");
    expect(errorOf({ UPSTASH_REDIS_REST_URL: "https://u:hunter2@ bad host", UPSTASH_REDIS_REST_TOKEN: "t" })).not.toContain("hunter2");
    expect(errorOf({ DATABASE_URL: "mysql://db/x?password=hunter2" })).not.toContain("hunter2");
    expect(errorOf({ DATABASE_URL: "db:hunter2@host" })).not.toContain("hunter2");
  });
});
