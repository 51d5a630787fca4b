/**
 * Runs fn but gives up after ms, resolving to `onTimeout` (fn may still finish later,
 * harmlessly). For calls that must answer fast whatever the other side does.
 */
export async function withTimeout<T>(ms: number, fn: () => Promise<T>, onTimeout: T): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<T>((resolve) => {
    timer = setTimeout(() => resolve(onTimeout), ms);
  });
  try {
    return await Promise.race([fn(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
