/**
 * int8 (bigint) as a JS number, for both drivers: every int8 the schema holds or the queries
 * return fits in a double exactly (durations in ms, fencing tokens and epochs, counters, audit
 * ids, counts). One that does not is refused, never rounded: a rounded fencing token or id
 * would be a silent error.
 */
export function parseInt8(text: string): number {
  const n = Number(text);
  if (!Number.isSafeInteger(n)) throw new RangeError(`the database returned int8 ${text}, beyond the integers a JavaScript number holds exactly`);
  return n;
}
