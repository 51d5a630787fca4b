const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  kb: 1000,
  mb: 1000 ** 2,
  gb: 1000 ** 3,
  kib: 1024,
  mib: 1024 ** 2,
  gib: 1024 ** 3,
};
const FORM = /^(\d+(?:\.\d+)?)\s*([a-z]*)$/i;

/** "10MiB", "64KiB", "1.5MB", "65536" (bytes) → bytes. KiB/MiB are powers of 1024, kB/MB of 1000. */
export function parseByteSize(input: string): number {
  const m = FORM.exec(input.trim());
  const unit = m ? UNITS[m[2].toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error('must be a size like "10MiB", "64KiB", "1MB" or a whole number of bytes');
  const n = Math.floor(Number(m[1]) * unit);
  if (!Number.isSafeInteger(n)) throw new Error("is too large");
  return n;
}
