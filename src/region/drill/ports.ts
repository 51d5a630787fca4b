import { createServer } from "node:net";

/**
 * A TCP port on 127.0.0.1 free right now (the kernel's pick for port 0). Another process
 * could take it before ours binds; the callers that can retry on "address in use" do.
 */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => (port ? resolve(port) : reject(new Error("no port from the kernel"))));
    });
  });
}
