// bench:peers' design floor (bench/README.md "peers"): the design's minimal loop in its own
// process, on the real PostgreSQL and a loopback target. Its column is only worth showing if
// it keeps the rules the bench checks every system against: every job called once, none
// before its due time, both for jobs due when it starts and for jobs that fall due later.
import { afterAll, expect, test } from "bun:test";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RecordingTarget } from "../../bench/lib/target.ts";
import { DesignFloorSystem } from "../../bench/peers/systems.ts";
import { eventually } from "../helpers/target.ts";

const target = new RecordingTarget();
afterAll(() => target.stop());

test("the design floor calls every job once, none early: a backlog due at its start, then jobs due later", async () => {
  const sys = new DesignFloorSystem({ targetUrl: target.url, concurrency: 8, logFile: join(tmpdir(), `design-floor-${process.pid}.log`) });
  await sys.setup("test");
  try {
    const backlog = await sys.create(new Array(300).fill(Date.now()), "backlog");
    target.expect(0, backlog.due.keys());
    await sys.start();
    await eventually(() => target.delivered(0) === 300, 20_000, "the backlog's 300 calls");
    expect(target.delivered(0)).toBe(300);

    const at = Date.now() + 400;
    const later = await sys.create(
      Array.from({ length: 100 }, (_, i) => at + i * 3),
      "later",
    );
    target.expect(1, later.due.keys());
    await eventually(() => target.delivered(1) === 100, 20_000, "the later jobs' 100 calls");
    await Bun.sleep(200); // a repeated call would come now
    expect(await sys.stop()).toBe(0);

    for (const [k, due] of [...backlog.due, ...later.due]) {
      const calls = target.arrivals.get(k) ?? [];
      expect({ k, calls: calls.length }).toEqual({ k, calls: 1 });
      expect(calls[0]!).toBeGreaterThanOrEqual(due);
    }
    expect(target.unexpected).toBe(0);
  } finally {
    await sys.teardown();
  }
}, 60_000);
