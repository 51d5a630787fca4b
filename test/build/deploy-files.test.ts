/**
 * fly.toml and the Dockerfile cannot be deployed from here (no Fly, no Docker), so what can
 * be checked locally is: they parse, and they say what the deployment relies on.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { JSC_RAM_SIZE } from "../../bench/lib/scheduler-process.ts";

const ROOT = join(import.meta.dir, "..", "..");

describe("deployment files", () => {
  test("fly.toml: home region, api/dispatcher/worker groups from one image, /healthz and /readyz checks for each, migrate on release", () => {
    const fly = Bun.TOML.parse(readFileSync(join(ROOT, "fly.toml"), "utf8")) as any;
    expect(fly.primary_region).toMatch(/^[a-z]{3}$/);
    expect(fly.build.dockerfile).toBe("Dockerfile");
    expect(fly.deploy.release_command).toBe("migrate");
    expect(fly.kill_signal).toBe("SIGTERM");
    expect(fly.processes).toEqual({ api: "--mode=api", dispatcher: "--mode=dispatcher", worker: "--mode=worker" });
    expect(fly.http_service.processes).toEqual(["api"]);
    expect(fly.http_service.checks.map((c: any) => c.path).sort()).toEqual(["/healthz", "/readyz"]);
    for (const group of ["dispatcher", "worker"]) {
      const paths = Object.values(fly.checks as Record<string, any>)
        .filter((c) => c.processes.includes(group))
        .map((c) => c.path)
        .sort();
      expect(paths).toEqual(["/healthz", "/readyz"]);
    }
    expect(fly.env.SCHEDULER_AUTHORITY_TTL).toBeDefined();
  });

  test("Dockerfile: multi-stage, builds the compiled binary, runs it as a non-root user on a slim image", () => {
    const text = readFileSync(join(ROOT, "Dockerfile"), "utf8");
    const froms = text.split("\n").filter((l) => l.startsWith("FROM "));
    expect(froms).toHaveLength(2);
    expect(froms[0]).toContain(" AS build");
    expect(froms[1]).toMatch(/slim/);
    expect(text).toContain("RUN npm run build");
    expect(text).toContain("COPY --from=build /src/dist/scheduler /usr/local/bin/scheduler");
    const user = /^USER (\S+)/m.exec(text)?.[1];
    expect(user).toBeDefined();
    expect(user!.startsWith("root") || user!.startsWith("0")).toBe(false);
    expect(text).toContain('ENTRYPOINT ["/usr/local/bin/scheduler"]');
  });

  test("every launcher tells the JS engine's GC the same RAM size: npm start, the Dockerfile, fly.toml, and the benches", () => {
    // Unset, the GC plans for the host's RAM and a burst of calls peaks ~70 MB higher (README "Memory").
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    expect(pkg.scripts.start).toBe(`BUN_JSC_forceRAMSize=\${BUN_JSC_forceRAMSize:-${JSC_RAM_SIZE}} exec bun src/main.ts`);
    expect(readFileSync(join(ROOT, "Dockerfile"), "utf8")).toContain(`\nENV BUN_JSC_forceRAMSize=${JSC_RAM_SIZE}\n`);
    const fly = Bun.TOML.parse(readFileSync(join(ROOT, "fly.toml"), "utf8")) as any;
    expect(fly.env.BUN_JSC_forceRAMSize).toBe(JSC_RAM_SIZE);
    expect(Number(JSC_RAM_SIZE)).toBe(2 ** 30);
  });

  test("patches/ (patch-package, the postinstall script) reach npm ci in the Dockerfile, fit the locked versions, and are applied here", () => {
    const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
    // Outside CI patch-package exits 0 when a patch fails to apply; these flags make a patch
    // that no longer fits (or a warning about one) fail the install instead.
    expect(pkg.scripts.postinstall).toBe("patch-package --error-on-fail --error-on-warn");
    const lines = readFileSync(join(ROOT, "Dockerfile"), "utf8").split("\n");
    const copy = lines.findIndex((l) => /^COPY patches\b/.test(l));
    const install = lines.findIndex((l) => /^RUN npm (ci|install)\b/.test(l));
    // patch-package with no patches/ exits 0 and says nothing: the binary would embed the
    // unpatched package.
    expect(copy).toBeGreaterThanOrEqual(0);
    expect(copy).toBeLessThan(install);
    const lock = JSON.parse(readFileSync(join(ROOT, "package-lock.json"), "utf8"));
    const patches = readdirSync(join(ROOT, "patches")).filter((f) => f.endsWith(".patch"));
    expect(patches.length).toBeGreaterThan(0);
    for (const file of patches) {
      const [, name, version] = /^(.+)\+(\d[^+]*)\.patch$/.exec(file)!;
      expect(lock.packages[`node_modules/${name!.replaceAll("+", "/")}`]?.version).toBe(version);
      expect(pkg.dependencies[name!.replaceAll("+", "/")]).toBe(version);
    }
    // What the driver tests run against (npm install applied it).
    expect(readFileSync(join(ROOT, "node_modules/postgres/src/connection.js"), "utf8")).toContain("patch-package (scheduler)");
  });
});
