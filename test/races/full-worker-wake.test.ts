/**
 * A dispatcher whose in-process worker is full sleeps until the worker has room again. The
 * worker tells it (onRoom) at the points where it knows its room grew, but the room also grows
 * where no event fires (its prefetch target moving with the call rate, a check that started
 * nothing): a missed wake there held due jobs for a whole poll interval (the lag bench saw one
 * second of jobs called ~1 s late, p99 920 ms). Forced here: the worker answers "full" for a
 * while and then has room without telling anyone, with a 5 s poll interval. The job must be
 * called soon after the worker has room, not at the next poll.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { DRIVERS, freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually, Target } from "../helpers/target.ts";

for (const driver of DRIVERS) {
  describe(`a full local worker that gets room without a wake (${driver})`, () => {
    let t: TestDb | undefined;
    let rt: Runtime | undefined;
    let target: Target | undefined;

    afterEach(async () => {
      await rt?.stop();
      await t?.close();
      target?.stop();
      rt = t = target = undefined;
    });

    test("the due job is claimed within tens of ms of the room, not a poll interval later", async () => {
      target = new Target(() => new Response("ok"));
      t = await freshDb(driver);
      rt = await startScheduler(t.db, { SCHEDULER_POLL_INTERVAL: "5s" });
      const worker = rt.worker!;
      const wantsMore = worker.wantsMore.bind(worker);
      let fullUntil = Infinity;
      let asked = 0;
      worker.wantsMore = () => {
        asked++;
        return Date.now() >= fullUntil && wantsMore();
      };
      const res = await api(rt, "POST", "/v1/jobs", { target: { url: `${target.url}/x` } });
      expect(res.status).toBe(201);
      // The dispatcher has seen the job and found the worker full.
      await eventually(() => asked > 0, 3000, "the dispatcher asked the worker for room");
      await Bun.sleep(100);
      expect(target.calls.length).toBe(0);
      fullUntil = Date.now();
      await eventually(() => target!.calls.length > 0, 4000, "the job called");
      const late = target.calls[0]!.at - fullUntil;
      // Before the fix: ~5,000 ms (the poll interval). Generous for a loaded 2-core box.
      expect(late).toBeLessThan(1000);
    }, 20_000);
  });
}
