// Imported as files so that `bun build --compile` embeds them: PGlite otherwise looks for
// them next to its own module, which inside the compiled binary does not exist on disk.
import pgliteWasmPath from "@electric-sql/pglite/pglite.wasm" with { type: "file" };
import initdbWasmPath from "@electric-sql/pglite/initdb.wasm" with { type: "file" };
import fsBundlePath from "@electric-sql/pglite/pglite.data" with { type: "file" };

let cached: Promise<{ pgliteWasmModule: WebAssembly.Module; initdbWasmModule: WebAssembly.Module; fsBundle: Blob }> | undefined;

export function loadPgliteAssets() {
  cached ??= (async () => {
    const [pgliteWasmModule, initdbWasmModule] = await Promise.all([
      WebAssembly.compile(await Bun.file(pgliteWasmPath).arrayBuffer()),
      WebAssembly.compile(await Bun.file(initdbWasmPath).arrayBuffer()),
    ]);
    return { pgliteWasmModule, initdbWasmModule, fsBundle: Bun.file(fsBundlePath) };
  })();
  return cached;
}
