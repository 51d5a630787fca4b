// DNS rebinding against the private-address check: a name the attacker controls answers a
// public address when checked and a loopback one when the call connects. The scheduler's
// resolver is pointed at a DNS server in this test (SCHEDULER_DNS_SERVERS); the name is this
// machine's own host name, which the system resolver (/etc/hosts) maps to a local address,
// so a call that resolved the name again, on its own, would reach the loopback target.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { hostname } from "node:os";
import { createDatabase, dropDatabase } from "../helpers/db.ts";
import { startTestDns, type TestDns } from "../helpers/dns-server.ts";
import { kill, spawnScheduler, type Proc } from "../helpers/process.ts";
import { api } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

describe("DNS rebinding (real DNS server on loopback, real process, postgres)", () => {
  let url: string;
  let dns: TestDns;
  let proc: Proc | undefined;
  const target = new Target();
  // Hostile DNS, every answer with TTL 0: public while the jobs are created, then public and
  // loopback by turns while they are called.
  const PUBLIC = "1.1.1.1";
  let calling = false;
  let k = 0;

  beforeAll(async () => {
    url = await createDatabase();
    dns = await startTestDns(() => (!calling || k++ % 2 === 0 ? PUBLIC : "127.0.0.1"));
  });
  afterAll(async () => {
    kill(proc);
    await proc?.exited;
    dns.stop();
    target.stop();
    await dropDatabase(url);
  });

  test("every call connects to an address that was checked: the loopback target is never reached", async () => {
    proc = await spawnScheduler([], {
      DATABASE_URL: url,
      SCHEDULER_ALLOW_PRIVATE_TARGETS: "0",
      SCHEDULER_DNS_SERVERS: dns.server,
    });
    const port = new URL(target.url).port;
    const name = hostname();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const r = await api(proc.url, "POST", "/v1/jobs", {
        target: { url: `http://${name}:${port}/rebind-${i}`, method: "POST", body: "secret-bearing call" },
        run_at: new Date(Date.now() + 1500).toISOString(),
        timeout: "2s",
        // Retries past the pinned address's shortest life (1 s), so each attempt resolves
        // again: where a connection to the public address is refused at once (this sandbox),
        // 100 ms retries all ran on the first answer and the hostile DNS was asked only once.
        retry: { max_attempts: 3, base: "1200ms", max: "1200ms" },
      });
      expect(r.status).toBe(201);
      ids.push(r.body.id);
    }
    calling = true;
    const finals = await eventually(
      async () => {
        const js = await Promise.all(ids.map(async (id) => (await api(proc!.url, "GET", `/v1/jobs/${id}`)).body));
        return js.every((j) => ["dead", "succeeded"].includes(j.status)) ? js : undefined;
      },
      60_000,
      "all jobs finished",
    );
    // The scheduler did get loopback answers while calling, and never reached loopback.
    expect(target.calls.map((c) => c.path)).toEqual([]);
    expect(dns.answered.filter((a) => a.address === "127.0.0.1").length).toBeGreaterThan(0);
    for (const j of finals) expect(j.status).toBe("dead");
    // Refusals name no address (an internal DNS oracle otherwise).
    const errors = finals.flatMap((j) => j.attempt_log.map((a: any) => String(a.error ?? "")));
    expect(errors.some((e) => e.includes("private address"))).toBe(true);
    for (const e of errors) expect(e).not.toContain("127.0.0.1");
    // The operator's log has it.
    expect(proc.logs().some((l) => l.msg === "delivery failed" && l.refused_address === "127.0.0.1")).toBe(true);
  }, 90_000);
});
