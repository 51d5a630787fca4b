// Child of process-guards.test.ts: the guards as src/main.ts installs them, then orphaned
// rejections: a lost connection (must be survived), then a plain error (must be fatal).
import { createLogger } from "../../src/obs/log.ts";
import { installProcessGuards } from "../../src/obs/process-guards.ts";

installProcessGuards(createLogger({ level: "info" }));
setTimeout(() => {
  void Promise.reject(Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET", errno: -104, syscall: "read" }));
}, 10);
setTimeout(() => {
  void Promise.reject(Object.assign(new Error("terminating connection due to administrator command"), { code: "57P01" }));
}, 50);
setTimeout(() => console.log(JSON.stringify({ msg: "still alive" })), 300);
setTimeout(() => {
  void Promise.reject(new TypeError("a bug"));
}, 400);
setTimeout(() => console.log(JSON.stringify({ msg: "should not get here" })), 2000);
