import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { jitCode, resolver } from "../../bench/js-thread-profile.ts";

/** A JITDump file as JavaScriptCore writes one: a 40-byte header, then records (perf's jitdump format, version 1). */
function dump(loads: { addr: number; size: number; name: string; at?: number }[], moveFirst = false): Buffer {
  const header = Buffer.alloc(40);
  header.writeUInt32LE(0x4a695444, 0);
  header.writeUInt32LE(1, 4);
  header.writeUInt32LE(40, 8);
  const records: Buffer[] = [header];
  if (moveFirst) {
    // A JIT_CODE_MOVE record (id 1, 56 bytes): skipped.
    const r = Buffer.alloc(16 + 40);
    r.writeUInt32LE(1, 0);
    r.writeUInt32LE(r.length, 4);
    records.push(r);
  }
  for (const l of loads) {
    const name = Buffer.from(`${l.name}\0`);
    const r = Buffer.alloc(16 + 40 + name.length + l.size);
    r.writeUInt32LE(0, 0);
    r.writeUInt32LE(r.length, 4);
    r.writeBigUInt64LE(BigInt(l.at ?? 0), 8); // when it was compiled
    r.writeBigUInt64LE(BigInt(l.addr), 16 + 8); // vma
    r.writeBigUInt64LE(BigInt(l.addr), 16 + 16); // code_addr
    r.writeBigUInt64LE(BigInt(l.size), 16 + 24);
    name.copy(r, 16 + 40);
    records.push(r);
  }
  return Buffer.concat(records);
}

describe("JS thread profile: JITDump", () => {
  test("code loads are read with their names and ranges, other records skipped, and addresses named", () => {
    const path = join(tmpdir(), `jitdump-test-${process.pid}.dump`);
    writeFileSync(
      path,
      dump(
        [
          { addr: 0x7000_0000_2000, size: 0x40, name: "JSC-FTL: deliver#Du9pwZ" },
          { addr: 0x7000_0000_1000, size: 0x100, name: "JSC-DFG: DataRow#Ecc6qz" },
        ],
        true,
      ),
    );
    const code = jitCode(path);
    expect(code.map((c) => c.name)).toEqual(["JSC-DFG: DataRow#Ecc6qz", "JSC-FTL: deliver#Du9pwZ"]);
    const name = (ip: number) => resolver(code)(ip, 1);
    expect(name(0x7000_0000_1000)).toBe("JSC-DFG: DataRow#Ecc6qz");
    expect(name(0x7000_0000_10ff)).toBe("JSC-DFG: DataRow#Ecc6qz");
    expect(name(0x7000_0000_1100)).toBeUndefined();
    expect(name(0x7000_0000_2020)).toBe("JSC-FTL: deliver#Du9pwZ");
    expect(name(0x10)).toBeUndefined();
  });

  test("memory the engine compiled into again: an address is named by what was there at the sample's instant", () => {
    const path = join(tmpdir(), `jitdump-reuse-${process.pid}.dump`);
    writeFileSync(
      path,
      dump([
        { addr: 0x5000, size: 0x1000, name: "JSC-Baseline: externalize#A", at: 100 },
        { addr: 0x5400, size: 0x100, name: "JSC-DFG: DataRow#B", at: 200 },
      ]),
    );
    const name = resolver(jitCode(path));
    expect(name(0x5450, 150)).toBe("JSC-Baseline: externalize#A");
    expect(name(0x5450, 250)).toBe("JSC-DFG: DataRow#B");
    // Beyond the newer code, the older is still there.
    expect(name(0x5600, 250)).toBe("JSC-Baseline: externalize#A");
    // Before anything was compiled there: unknown.
    expect(name(0x5450, 50)).toBeUndefined();
  });

  test("a file that is not a JITDump is refused", () => {
    const path = join(tmpdir(), `jitdump-bad-${process.pid}.dump`);
    writeFileSync(path, Buffer.alloc(64));
    expect(() => jitCode(path)).toThrow("not a JITDump file");
  });
});
