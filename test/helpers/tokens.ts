/**
 * Test tokens by short names: SCHEDULER_TOKENS requires at least 32 characters, so "tokA"
 * becomes "tokA-000…" (32 characters). Distinct names stay distinct tokens.
 */
export const tok = (name: string): string => (name.length >= 32 ? name : `${name}-${"0".repeat(31 - name.length)}`);

/** "tokA:acme:jobs:read;tokAll:*:admin" with every token padded by tok(). */
export const tokenSpec = (spec: string): string =>
  spec
    .split(";")
    .map((e) => {
      const i = e.indexOf(":");
      return i < 0 ? e : tok(e.slice(0, i)) + e.slice(i);
    })
    .join(";");
