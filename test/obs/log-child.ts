// Child of log-format.test.ts: the logger as src/main.ts makes it, with the format from argv[2]
// and stdout's own terminal check, then a job event and an error with a two-line message.
import { createLogger, type LogFormat } from "../../src/obs/log.ts";

const log = createLogger({ level: "info", format: process.argv[2] as LogFormat, tty: process.stdout.isTTY, base: { region: "local", mode: "all" } });
log.child({ job_id: "0193e0a4-0000-7000-8000-000000000001", attempt: 1 }).info({ outcome: "success", http_status: 200, ms: 12 }, "delivered");
const err = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:5432\n    while opening the pool"), { code: "ECONNREFUSED" });
log.error({ err }, "the database is unreachable");
log.warn("done");
