// What the activities share: the Temporal activity context, when there is one (activity functions are also called
// directly: the API's push test route, benchmarks).
import { Context } from '@temporalio/activity';

export function activityContext(): Context | undefined {
  try {
    return Context.current();
  } catch {
    return undefined;
  }
}

/**
 * Whether `neededMs` (a request and what follows it) still fits in this attempt's start-to-close, counted from
 * `startedAt`. Past it Temporal has started the attempt again (or will), and a send made now, on a store read made
 * before that attempt settled anything, would be a second one. Outside an activity, always.
 */
export function fitsStartToClose(startedAt: number, neededMs: number): boolean {
  const left = startToCloseLeftMs(startedAt);
  return left === undefined || left >= neededMs;
}

/** What is left of this attempt's start-to-close, counted from `startedAt`; undefined outside an activity. */
export function startToCloseLeftMs(startedAt: number): number | undefined {
  const startToClose = activityContext()?.info.startToCloseTimeoutMs;
  return startToClose ? startToClose - (Date.now() - startedAt) : undefined;
}

const attemptStarts = new WeakMap<Context, number>();

/**
 * When this activity attempt began, as first asked within it: its activity function asks first thing. Outside an
 * activity, now.
 */
export function attemptStartedAt(): number {
  const context = activityContext();
  if (!context) return Date.now();
  let at = attemptStarts.get(context);
  if (at === undefined) attemptStarts.set(context, (at = Date.now()));
  return at;
}

/** How often a kept-alive activity heartbeats: well within the heartbeat timeout its workflow sets. */
const KEEP_ALIVE_EVERY_MS = 2000;

/**
 * Runs `work` heartbeating on a timer, so a worker that dies mid-activity (SIGKILL, OOM, lost host) is noticed
 * within the heartbeat timeout instead of the start-to-close timeout. Its own deadlines bound each step of the
 * work; this only says the worker is alive. Given `forMs`, it beats only that long: work wedged past it is noticed
 * too. Outside an activity, just the work.
 */
export async function keptAlive<T>(work: () => Promise<T>, forMs = Infinity): Promise<T> {
  const context = activityContext();
  if (!context) return work();
  const started = Date.now();
  const timer = setInterval(() => {
    if (Date.now() - started < forMs) context.heartbeat();
  }, KEEP_ALIVE_EVERY_MS);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}
