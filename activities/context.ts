// What the activities share: the Temporal activity context, when there is one (activity functions are also called
// directly: the API's push test route, benchmarks), and bounded-parallel work.
import { Context } from '@temporalio/activity';

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * Runs `each` over `items` with at most `lanes` in flight; the first failure fails the whole. Once `signal`
 * aborts (the activity is cancelled: the worker is shutting down), no new item starts; the ones in flight finish,
 * then it throws the signal's reason.
 */
export async function inLanes<T>(
  items: T[],
  lanes: number,
  each: (item: T) => Promise<void>,
  signal?: AbortSignal,
): Promise<void> {
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length && !signal?.aborted) await each(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(lanes, items.length) }, lane));
  signal?.throwIfAborted();
}
