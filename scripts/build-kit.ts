#!/usr/bin/env bun
// `npm run build:kit`: scheduler/client and scheduler/receiver for Node >= 20 (and any other
// runtime without TypeScript): ES modules in dist/kit/{client,receiver}/index.js, their
// dependencies (openapi-fetch, postgres, hono) left as imports, the SQL they carry inlined,
// and .d.ts files beside them. Bun imports the sources directly (the "bun" export condition).
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "..");
const out = join(root, "dist/kit");
await rm(out, { recursive: true, force: true });

const built = await Bun.build({
  entrypoints: [join(root, "src/kit/client/index.ts"), join(root, "src/kit/receiver/index.ts")],
  root: join(root, "src/kit"),
  outdir: out,
  target: "node",
  format: "esm",
  packages: "external",
});
if (!built.success) {
  for (const m of built.logs) console.error(m);
  process.exit(1);
}

const tsc = Bun.spawnSync([join(root, "node_modules/.bin/tsc"), "-p", join(root, "scripts/tsconfig.kit.json")], { stdout: "inherit", stderr: "inherit" });
if (tsc.exitCode !== 0) process.exit(tsc.exitCode ?? 1);

// The declarations keep the sources' "./x.ts" specifiers; consumers resolve "./x.js".
async function fixSpecifiers(dir: string): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) await fixSpecifiers(p);
    else if (p.endsWith(".d.ts")) await writeFile(p, (await readFile(p, "utf8")).replace(/(from\s+["']\.{1,2}\/[^"']+)\.ts(["'])/g, "$1.js$2"));
  }
}
await fixSpecifiers(out);
process.stdout.write(`build-kit: wrote ${out}\n`);
