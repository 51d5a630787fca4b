import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Runtime } from "../../src/runtime.ts";
import { runAsyncJob, webhookHandler, type AsyncJobEnd } from "../../src/kit/receiver/index.ts";
import { freshDb, type TestDb } from "../helpers/db.ts";
import { api, startScheduler } from "../helpers/scheduler.ts";
import { eventually } from "../helpers/target.ts";

const SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

describe("receiver: the async-job helper against a real scheduler", () => {
  let t: TestDb;
  let rt: Runtime;
  let server: ReturnType<typeof Bun.serve>;
  const ends: Record<string, AsyncJobEnd> = {};
  const seenCheckpoints: Record<string, unknown[]> = {};

  beforeAll(async () => {
    t = await freshDb("pglite");
    rt = await startScheduler(t.db, { SCHEDULER_SIGNING_SECRET: SECRET });
    const handler = webhookHandler({ secrets: SECRET }, (call) => {
      const { mode } = call.json<{ mode: string }>();
      (seenCheckpoints[mode] ??= []).push(call.checkpoint);
      // Answer 202 at once; the work runs after, heartbeating.
      void runAsyncJob<{ step: number }>({ schedulerUrl: rt.url!, call, heartbeatMs: 100 }, async (ctx) => {
        if (mode === "work") {
          for (let step = (ctx.checkpoint?.step ?? 0) + 1; step <= 3; step++) {
            await Bun.sleep(100);
            await ctx.saveCheckpoint({ step });
          }
          return;
        }
        if (mode === "cancel") {
          await new Promise<void>((resolve, reject) => {
            ctx.signal.addEventListener("abort", () => reject(new Error(String(ctx.signal.reason))));
            setTimeout(resolve, 20_000);
          });
        }
        if (mode === "fail") throw new Error("disk full");
      }).then((end) => (ends[mode] = end));
      return new Response(null, { status: 202 });
    });
    server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: handler });
  });
  afterAll(async () => {
    server?.stop(true);
    await rt?.stop();
    await t?.close();
  });

  const create = async (mode: string, retry = { max_attempts: 1 }) => {
    const r = await api(rt, "POST", "/v1/jobs", { target: { url: `http://127.0.0.1:${server.port}/hook`, body: { mode } }, async: true, timeout: "1m", retry });
    expect(r.status).toBe(201);
    return r.body.id as string;
  };
  const status = (id: string, want: string) =>
    eventually(
      async () => {
        const j = (await api(rt, "GET", `/v1/jobs/${id}`)).body;
        return j.status === want ? j : undefined;
      },
      20_000,
      `job ${id} ${want}`,
    );

  test("heartbeats with checkpoints, then completes: the job ends succeeded with the last checkpoint", async () => {
    const id = await create("work");
    const j = await status(id, "succeeded");
    expect(j.checkpoint).toEqual({ step: 3 });
    expect(ends.work).toBe("succeeded");
    expect(seenCheckpoints.work).toEqual([null]);
  });

  test("a cancel while it runs aborts the work (cancel_requested from a heartbeat) and the job ends cancelled", async () => {
    const id = await create("cancel");
    await eventually(async () => (await api(rt, "GET", `/v1/jobs/${id}`)).body.status === "running", 20_000, "running");
    await Bun.sleep(300);
    const c = await api(rt, "POST", `/v1/jobs/${id}/cancel`, {});
    expect(c.status).toBe(202);
    await status(id, "cancelled");
    await eventually(() => ends.cancel, 10_000, "the helper to end");
    expect(ends.cancel).toBe("cancelled");
  });

  test("work that throws completes as failed, with its message", async () => {
    const id = await create("fail");
    const j = await status(id, "dead");
    expect(j.last_error).toContain("disk full");
    expect(ends.fail).toBe("failed");
  });
});
