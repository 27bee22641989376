// Bounded concurrency, written once: a list worked through by a fixed number of lanes.

/**
 * `fn` over `items` with at most `limit` in flight; the answers in the order of the items. The first failure
 * stops the lanes (none takes another item) and rejects the whole once the items in flight are done, so a caller
 * that tries again after the rejection finds nothing of this call still going. Once `signal` aborts, no new item
 * starts; the ones in flight finish, then it throws the signal's reason (unless every item had started).
 */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
  signal?: AbortSignal,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed: { error: unknown } | undefined;
  const lane = async (): Promise<void> => {
    while (next < items.length && !failed && !signal?.aborted) {
      const i = next++;
      try {
        results[i] = await fn(items[i]);
      } catch (error) {
        failed ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  if (failed) throw failed.error;
  // Stopped with items left unstarted; every item done, the results stand.
  if (next < items.length) signal?.throwIfAborted();
  return results;
}
