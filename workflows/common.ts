// What every workflow shares: how quick calls and fan-outs run, the claim holder, how a branch ended, and a child
// start that tolerates one of its id running already.
import {
  ActivityFailure,
  ApplicationFailure,
  patched,
  proxyActivities,
  proxyLocalActivities,
  sleep,
  workflowInfo,
  type ActivityInterfaceFor,
  type RetryPolicy,
} from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { Activities } from '../contract/activities';
import { FAN_OUT_ATTEMPTS } from '../domain/push';

/**
 * Push fan-outs (an episode's push, a digest): heartbeats after every accepted send, so a worker that dies mid
 * fan-out is noticed within the heartbeat timeout and the retry skips the devices already reached.
 */
export const fanOutCalls = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: FAN_OUT_ATTEMPTS,
  },
});

const QUICK_RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 20,
};

/** Claims, store reads and writes: short, and safe to run twice. The only activities `QuickCalls` offers. */
export const QUICK_CALLS = [
  'tryMark',
  'tryMarkEach',
  'unmark',
  'markDelivered',
  'renewClaim',
  'recordEpisode',
  'isStandbyVetoed',
  'classifyFailedRun',
  'callbackExhaustedAlert',
  'stampOpsMarker',
  'opsAlertSettings',
  'healthSettings',
  'persistedRunStatus',
  'runEndedAt',
  'recordedSpend',
  'recordedProgressSince',
  'saveHealth',
  'reapHealth',
  'recordTeamEvent',
] as const satisfies readonly (keyof Activities)[];

export type QuickCalls = Pick<ActivityInterfaceFor<Activities>, (typeof QUICK_CALLS)[number]>;

/**
 * Marks executions that chose how quick calls run once, at their start: every execution started on this code
 * runs them as local activities (run by the worker inside the workflow task, no round trip through the task
 * queue per call: most of an episode's latency before its first push).
 */
export const QUICK_DECIDED_AT_START_PATCH = 'quick-calls-decided-at-start';

/**
 * Marks, per call, quick calls that are local activities, in executions started before
 * QUICK_DECIDED_AT_START_PATCH. Such an execution chose at each call: scheduled activities until the worker
 * that recorded it knew LOCAL_QUICK_PATCH, local ones from then on, so one history can hold both.
 */
export const LOCAL_QUICK_PATCH = 'quick-calls-are-local-activities';

const scheduled = proxyActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: QUICK_RETRY });
const local = proxyLocalActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: QUICK_RETRY });

/**
 * Store calls outside `QuickCalls` (the redelivery's claim check and resettle): run the way quick calls run in
 * executions that decided at their start. Timeouts and retries are not compared on replay.
 */
export const localStoreCalls = local;

/**
 * One HTTP attempt of a callback per call (the episode's schedule and a redelivery): the schedule between attempts
 * is the workflow's (durable timers); Temporal's own retries only cover a worker lost mid-attempt, noticed once
 * the attempt's start-to-close (the receiver's timeout plus a margin; a minute where none was given) has passed.
 */
export const callbackAttemptCalls = (attemptSeconds?: number) =>
  proxyActivities<Activities>({
    startToCloseTimeout: attemptSeconds ? `${attemptSeconds} seconds` : '1 minute',
    retry: { initialInterval: '5 seconds', maximumAttempts: 3 },
  });

/** The per-call choice that histories started before QUICK_DECIDED_AT_START_PATCH replay. */
const chosenPerCall = Object.fromEntries(
  QUICK_CALLS.map((name) => [
    name,
    (...args: unknown[]) => {
      const call = (patched(LOCAL_QUICK_PATCH) ? local : scheduled)[name] as (...a: unknown[]) => unknown;
      return call(...args);
    },
  ]),
) as QuickCalls;

/**
 * How this execution runs its quick calls: called once, first thing in each workflow, and passed down.
 *
 * Retiring it: once no execution started before QUICK_DECIDED_AT_START_PATCH can still run or be replayed
 * (the longest-lived are run-health workflows, until their run ends plus HEALTH_REAP_SECONDS, then the
 * namespace's retention), replace the body with `deprecatePatch(QUICK_DECIDED_AT_START_PATCH); return local;`
 * and drop LOCAL_QUICK_PATCH with `chosenPerCall` and the fixtures recorded before it; one release later,
 * when no history carries the marker unread, drop the deprecatePatch call too.
 */
export function quickCalls(): QuickCalls {
  return patched(QUICK_DECIDED_AT_START_PATCH) ? local : chosenPerCall;
}

/**
 * Store calls of concurrent branches, made one at a time once `engage` was called: calls made before it (each
 * branch's first, side by side) go at once, and the first call after it waits until they all settled. Local
 * activities in flight together resolve one activation each on a first run, in the order they finish, but all in
 * one activation on a replay, where each branch then reaches its next command after as many promise steps as its
 * code takes: a branch that finished first but takes more steps issues its commands second, and the replay fails
 * or feeds a call another's result. Past the start, one call in flight at a time: each resolves alone, on both.
 */
export function callsInTurn<T, K extends keyof T>(
  calls: T,
  names: readonly K[],
  { firstAnsweredTogether = false }: { firstAnsweredTogether?: boolean } = {},
): { calls: Pick<T, K>; inTurn<R>(call: () => Promise<R>): Promise<R>; engage(): void } {
  let engaged = false;
  let last: Promise<unknown> = Promise.resolve();
  // `firstAnsweredTogether`: the calls made before `engage` are answered once all of them settled, on a first run
  // in the task of the last as on a replay, so the branches go on from them in the same order on both (a branch
  // whose call failed takes more steps to its next command than one whose call succeeded). None of them may be
  // awaited before `engage`: it would wait for ever.
  let startSettled!: (all: Promise<unknown>) => void;
  const allStarted = new Promise<unknown>((resolve) => (startSettled = resolve));
  const inTurn = <R>(call: () => Promise<R>): Promise<R> => {
    if (!engaged) {
      const made = call();
      last = Promise.all([last, made.catch(() => undefined)]);
      return firstAnsweredTogether ? allStarted.then(() => made) : made;
    }
    const made = last.then(call);
    last = made.catch(() => undefined);
    return made;
  };
  const inTurnCalls = Object.fromEntries(
    names.map((name) => [
      name,
      (...args: unknown[]) => inTurn(() => (calls[name] as (...a: unknown[]) => Promise<unknown>)(...args)),
    ]),
  ) as Pick<T, K>;
  const engage = (): void => {
    engaged = true;
    startSettled(last);
  };
  return { calls: inTurnCalls, inTurn, engage };
}

const STORE_RETRY_FIRST_MS = 60_000;
const STORE_RETRY_MAX_MS = 3_600_000;
const STORE_RETRY_SPAN_MS = 24 * 3_600_000;

/**
 * A store call (a claim, a read, a write safe to repeat) that failed past its quick retries, made again while the
 * store is away: after a wait of one minute doubling to an hour, for a day from its first failure. A failure the
 * activity marked for good is not an outage. Only a failed call asks `patchedHere` (the caller's own patch check),
 * so histories without one replay unchanged; a history recorded before the patch failed there, and still does.
 */
export async function outlastingStoreOutages<T>(
  call: () => Promise<T>,
  patchedHere: () => boolean,
): Promise<T> {
  let firstFailedAtMs: number | undefined;
  for (let waitMs = STORE_RETRY_FIRST_MS; ; waitMs = Math.min(waitMs * 2, STORE_RETRY_MAX_MS)) {
    try {
      return await call();
    } catch (err) {
      firstFailedAtMs ??= Date.now();
      const forGood =
        err instanceof ActivityFailure && err.cause instanceof ApplicationFailure && err.cause.nonRetryable;
      const spent = Date.now() - firstFailedAtMs + waitMs > STORE_RETRY_SPAN_MS;
      if (forGood || spent || !patchedHere()) throw err;
      await sleep(waitMs);
    }
  }
}

/** The named calls, each made through outlastingStoreOutages, once `patchedHere`. */
export function callsOutlastingOutages<T, K extends keyof T>(
  calls: T,
  names: readonly K[],
  patchedHere: () => boolean,
): Pick<T, K> {
  return Object.fromEntries(
    names.map((name) => [
      name,
      (...args: unknown[]) =>
        outlastingStoreOutages(
          () => (calls[name] as (...a: unknown[]) => Promise<unknown>)(...args),
          patchedHere,
        ),
    ]),
  ) as Pick<T, K>;
}

/** Every quick call made through outlastingStoreOutages, once `patchedHere`. */
export const quickCallsOutlastingOutages = (quick: QuickCalls, patchedHere: () => boolean): QuickCalls =>
  callsOutlastingOutages(quick, QUICK_CALLS, patchedHere);

/** The holder of this execution's claims: a re-run of the same episode is another holder. */
export function holder(): string {
  const info = workflowInfo();
  return `${info.workflowId}/${info.runId}`;
}

/**
 * A child workflow's start (and whatever the caller awaits of it), or `refused` when Temporal refuses the child's
 * id: one of it is running already, which the caller reads as "someone else has it". Catching the refusal records
 * no command of its own: the history is the start's.
 */
export async function unlessChildRunning<T, R>(start: () => Promise<T>, refused: R): Promise<T | R> {
  try {
    return await start();
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return refused;
    throw err;
  }
}
