// pinTarget answers a pin it already knows as a value, not a promise: the common call then
// makes no promise and awaits nothing there (deliver). A refusal it already knows is thrown
// at once, and deliver turns it into the same refused result as the first one.
import { describe, expect, test } from "bun:test";
import { deliver } from "../../src/worker/deliver.ts";
import { pinTarget } from "../../src/worker/pinned-target.ts";
import { TargetRefusedError } from "../../src/worker/target-guard.ts";
import type { ClaimedJob } from "../../src/store/types.ts";

describe("pinTarget", () => {
  test("private targets allowed: the URL itself, not a promise", () => {
    const p = pinTarget("http://127.0.0.1:9/allowed", true);
    expect(p).not.toBeInstanceOf(Promise);
    expect(p).toEqual({ url: "http://127.0.0.1:9/allowed" });
  });

  test("a public address: checked once (a promise), then known (the value itself)", async () => {
    const url = "http://93.184.215.14:9/known-pin";
    const first = pinTarget(url, false);
    expect(first).toBeInstanceOf(Promise);
    const checked = await first;
    expect(checked.url).toBe(url);
    const again = pinTarget(url, false);
    expect(again).not.toBeInstanceOf(Promise);
    expect(again).toEqual(checked);
  });

  test("a private address: refused once (a rejection), then refused at once (thrown)", async () => {
    const url = "http://127.0.0.1:9/refused-pin";
    await expect(pinTarget(url, false) as Promise<unknown>).rejects.toBeInstanceOf(TargetRefusedError);
    let returned: unknown;
    let thrown: unknown;
    try {
      returned = pinTarget(url, false);
    } catch (err) {
      thrown = err;
    }
    if (returned instanceof Promise) returned.catch(() => {});
    expect(returned).toBeUndefined();
    expect(thrown).toBeInstanceOf(TargetRefusedError);
  });

  test("deliver: a refusal known already gives the same refused result as the first", async () => {
    const url = "http://10.0.0.1:9/refused-twice";
    const job = {
      id: "019300aa-0000-7000-8000-0000000000aa",
      target: { url, method: "POST", headers: {}, body: "{}", json: true },
      timeout_ms: 1000,
      idempotency_key: null,
      schedule_id: null,
      nominal_time: null,
      scheduled_for: new Date(),
      epoch: 1,
      checkpoint: null,
    } as unknown as ClaimedJob;
    const ctx = { attemptId: "019300aa-0000-7000-8000-0000000000ab", attemptNumber: 1, allowPrivateTargets: false };
    const first = await deliver(job, ctx);
    const second = await deliver(job, ctx);
    for (const r of [first, second]) {
      expect(r.outcome).toBe("permanent");
      expect(r.refused).toBe(true);
      expect(r.httpStatus).toBeNull();
      expect(r.error).toContain("private address");
      expect(r.finishedAt.getTime()).toBeGreaterThanOrEqual(r.startedAt.getTime());
    }
    expect(first.refusedAddress).toBe("10.0.0.1");
    expect(second.refusedAddress).toBe("10.0.0.1");
  });
});
