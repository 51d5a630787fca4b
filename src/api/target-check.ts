import { assertTargetAllowed, TargetRefusedError } from "../worker/target-guard.ts";
import { ApiError } from "./errors.ts";

/**
 * Why a target would be refused, or null. `seen` caches verdicts per host within one request
 * (a batch often names one host many times). A name that does not resolve yet is not
 * refused: it may resolve by its due time, and delivery checks again.
 */
export async function targetRefusal(url: string, seen: Map<string, Promise<string | null>>, allowPrivate = false): Promise<string | null> {
  let host: string;
  try {
    host = new URL(url).host;
  } catch {
    return "target url is not a valid absolute URL";
  }
  const key = `${allowPrivate ? "any" : "public"} ${host}`;
  let verdict = seen.get(key);
  if (!verdict) {
    verdict = assertTargetAllowed(url, { allowPrivate }).then(
      () => null,
      (err) => (err instanceof TargetRefusedError ? err.message : null),
    );
    seen.set(key, verdict);
  }
  return verdict;
}

/** Refuses a private target at creation (400 naming the field). */
export async function checkTarget(url: string, path: string, seen: Map<string, Promise<string | null>>): Promise<void> {
  const refused = await targetRefusal(url, seen);
  if (refused) throw new ApiError(400, "target_refused", refused, path);
}
