// Events outside a transition (run_started, progress), and run health observing every event the service writes.
import type { Run } from '../domain/run';
import type { EventItem, RunsContext } from './context';

/** Appends events outside a transition, then lets run health observe them. */
export async function recordEvents(ctx: RunsContext, run: Run, items: EventItem[], at: Date) {
  const written = await ctx.events.append(run, items, at);
  await observe(ctx, run, items, at);
  return written;
}

/**
 * The run's health workflow sees the events, with when they were written (told again later, they are no newer
 * progress); failing to tell it never fails the operation. False when it failed (a transition's row is then left
 * open, so the sweep tells it again).
 */
export async function observe(
  ctx: RunsContext,
  run: Run,
  items: EventItem[],
  at: Date,
  revision?: number,
): Promise<boolean> {
  try {
    await ctx.health?.observe(
      run,
      items.map((item) => ({
        ...item,
        writtenAt: at.getTime(),
        ...(revision !== undefined ? { revision } : {}),
      })),
    );
    return true;
  } catch (err) {
    ctx.onEmitError?.(run._id, err);
    return false;
  }
}
