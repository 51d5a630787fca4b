#!/usr/bin/env bun
// `npm run gen:config-docs`: the README's Configuration section from the table of variables
// (src/config/variables.ts). `--check` writes nothing and exits 1 when the README differs
// (test/unit/config-table.test.ts checks the same).
import { readFile, writeFile } from "node:fs/promises";
import { resolve } from "node:path";
import { withReadmeConfiguration } from "../src/config/docs.ts";

export const README_PATH = resolve(import.meta.dir, "../README.md");

if (import.meta.main) {
  const current = await readFile(README_PATH, "utf8");
  const text = withReadmeConfiguration(current);
  if (process.argv.includes("--check")) {
    if (current !== text) {
      process.stderr.write("gen-config-docs: README.md's Configuration section is stale: run `npm run gen:config-docs`\n");
      process.exit(1);
    }
    process.stdout.write("gen-config-docs: README.md's Configuration section matches src/config/variables.ts\n");
  } else {
    await writeFile(README_PATH, text);
    process.stdout.write(`gen-config-docs: wrote ${README_PATH}\n`);
  }
}
