import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { failureDigest } from "../../scripts/failure-digest.ts";

// The digest reads the JUnit report of a real `bun test` run (the bun this project pins),
// so a change in bun's report shape fails here rather than leaving CI's tail silent.

const dir = mkdtempSync(join(tmpdir(), "digest-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("each failed case with its suite, place and error; passed ones left out", async () => {
  writeFileSync(
    join(dir, "probe.test.ts"),
    [
      'import { describe, expect, test } from "bun:test";',
      'for (const d of ["x", "y"]) describe("suite (" + d + ")", () => {',
      '  test("late <&> by", () => { expect(d === "x" ? 1 : 301).toBeLessThan(300); });',
      '  test("passes", () => { expect(1).toBe(1); });',
      "});",
      'test("top level throws", () => { throw new Error("boom\\nsecond line"); });',
      "",
    ].join("\n"),
  );
  const report = join(dir, "report.xml");
  const run = Bun.spawnSync([process.execPath, "test", "--reporter=junit", `--reporter-outfile=${report}`, "probe.test.ts"], {
    cwd: dir,
    stdout: "ignore",
    stderr: "ignore",
  });
  expect(run.exitCode).toBe(1);
  const lines = failureDigest(await Bun.file(report).text());
  const text = lines.join("\n");
  expect(lines[0]).toBe("  probe.test.ts:3  suite (y) > late <&> by");
  expect(text).toContain("Expected: < 300");
  expect(text).toContain("Received: 301");
  expect(text).toContain("top level throws");
  expect(text).toContain("boom");
  expect(text).not.toContain("suite (x)");
  expect(text).not.toContain("passes");
});

test("long errors are cut with a count; a report without failures gives nothing", () => {
  const body = Array.from({ length: 20 }, (_, i) => `line ${i}`).join("&#10;");
  const xml = `<testsuites><testsuite name="f"><testcase name="ok" classname="" file="f.ts" line="1" /><testcase name="bad" classname="s" file="f.ts" line="2"><failure type="Error" message="m">${body}</failure></testcase></testsuite></testsuites>`;
  const lines = failureDigest(xml);
  expect(lines[0]).toBe("  f.ts:2  s > bad");
  expect(lines).toHaveLength(1 + 12 + 1);
  expect(lines.at(-1)).toBe("    … 8 more lines");
  expect(failureDigest('<testsuites><testcase name="a" file="f.ts" line="1" /></testsuites>')).toEqual([]);
  // A failure whose body is empty or absent shows its message attribute.
  for (const f of ['<failure message="only here"></failure>', '<failure message="only here" />'])
    expect(failureDigest(`<testsuites><testcase name="c" classname="" file="g.ts" line="3">${f}</testcase></testsuites>`)).toEqual([
      "  g.ts:3  c",
      "    only here",
    ]);
});

// npm test runs bun with --parallel, whose report the coordinator merges from its workers.
test("the merged report of a parallel run names each failure's file and line", async () => {
  const sub = mkdtempSync(join(dir, "parallel-"));
  for (const name of ["a", "b"])
    writeFileSync(
      join(sub, `${name}.test.ts`),
      ['import { expect, test } from "bun:test";', `test("${name} fails", () => { expect("${name}").toBe("z"); });`, 'test("ok", () => {});', ""].join("\n"),
    );
  const report = join(sub, "report.xml");
  const run = Bun.spawnSync([process.execPath, "test", "--parallel=2", "--reporter=junit", `--reporter-outfile=${report}`], {
    cwd: sub,
    stdout: "ignore",
    stderr: "ignore",
  });
  expect(run.exitCode).toBe(1);
  const heads = failureDigest(await Bun.file(report).text()).filter((l) => !l.startsWith("    "));
  expect(heads.sort()).toEqual(["  a.test.ts:2  a fails", "  b.test.ts:2  b fails"]);
});
