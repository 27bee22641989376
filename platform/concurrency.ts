// Bounded concurrency, written once: a list worked through by a fixed number of lanes.

/**
 * `fn` over `items` with at most `limit` in flight; the answers in the order of the items. The first failure
 * rejects the whole (the other lanes still finish the item they hold and take further ones). Once `signal`
 * aborts, no new item starts; the ones in flight finish, then it throws the signal's reason.
 */
export async function mapBounded<T, R>(
  items: readonly T[],
  limit: number,
  fn: (item: T) => Promise<R>,
  signal?: AbortSignal,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length && !signal?.aborted) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  signal?.throwIfAborted();
  return results;
}
