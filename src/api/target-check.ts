import { assertTargetAllowed, TargetRefusedError } from "../worker/target-guard.ts";
import { ApiError } from "./errors.ts";

/**
 * Refuses a private target at creation (400 naming the field). `seen` caches verdicts per
 * host within one request (a batch often names one host many times).
 */
export async function checkTarget(url: string, path: string, seen: Map<string, Promise<string | null>>): Promise<void> {
  const host = new URL(url).host;
  let verdict = seen.get(host);
  if (!verdict) {
    verdict = assertTargetAllowed(url, { allowPrivate: false }).then(
      () => null,
      // A name that does not resolve yet is not refused: it may resolve by its due time,
      // and delivery checks again.
      (err) => (err instanceof TargetRefusedError ? err.message : null),
    );
    seen.set(host, verdict);
  }
  const refused = await verdict;
  if (refused) throw new ApiError(400, "target_refused", refused, path);
}
