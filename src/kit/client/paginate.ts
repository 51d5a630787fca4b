/** One page of a list: its items and the cursor of the next page (null on the last). */
export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** Every item of a cursor-paginated list, page after page, fetched as the caller iterates. */
export async function* paginate<T>(fetchPage: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T, void, undefined> {
  let cursor: string | undefined;
  do {
    const page = await fetchPage(cursor);
    yield* page.items;
    cursor = page.next_cursor ?? undefined;
  } while (cursor);
}

/** The first `max` items (all of them when max is omitted) of an async iterable, in an array. */
export async function collect<T>(items: AsyncIterable<T>, max = Infinity): Promise<T[]> {
  const out: T[] = [];
  if (max <= 0) return out;
  for await (const x of items) {
    out.push(x);
    if (out.length >= max) break;
  }
  return out;
}
