// A recover of a team's callbacks that gave up in a window (POST /callbacks/recover): pages through the give-ups
// the attempt log recorded, and runs for each one still given up the same redelivery the per-episode route runs
// (workflows/redeliver.ts, as a child with that route's id: never two redeliveries of one episode at once), a
// few at a time. Its progress goes to its store row after every batch. One per team at a time: its id is the
// team's (contract/workflows.ts).
//
// It is no amplifier: a give-up re-sent lately (by a redelivery or an earlier recover) is skipped, each send takes
// a slot of the team's redelivery budget first (waiting on a durable timer while it is spent), its redeliveries do
// not go past the team's open breaker (held: nothing sent, still given up), and it sends at most maxSends.
import {
  continueAsNew,
  executeChild,
  ParentClosePolicy,
  patched,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { GaveUpPage } from '../contract/activities';
import { runAttributes } from '../contract/searchAttributes';
import {
  callbackRedeliverWorkflowId,
  type RecoverCounts,
  type RecoverInput,
  type RedeliverResult,
} from '../contract/workflows';
import { callsInTurn, callsOutlastingOutages, localStoreCalls, unlessChildRunning } from './common';
import { callbackRedeliverWorkflow } from './redeliver';

/** Redeliveries in flight at once: each is one outbound POST to the team's receivers. */
export const RECOVER_WIDTH = 8;
/** Give-ups read per page. */
export const RECOVER_PAGE = 100;
/** Pages per execution before it continues as new (a page is a few hundred history events). */
const PAGES_PER_RUN = 10;

/**
 * Marks executions that skip give-ups re-sent lately, take a slot of the team's redelivery budget per send, count
 * held redeliveries, and stop at maxSends. A recover continued as new takes it from the new execution on.
 */
export const RECOVER_BOUNDED_PATCH = 'recover-skips-resent-takes-team-budget-stops-at-max';

/**
 * Marks executions in which a redelivery that fails itself (terminated, or its attempts spent on a worker's
 * errors) counts as failed and the recover goes on: the recover failed with it, or stalled on its rejection.
 */
export const RECOVER_SURVIVES_FAILED_REDELIVERY_PATCH = 'recover-survives-failed-redelivery';

/**
 * Marks executions whose store calls (a page of give-ups, its progress, a budget slot taken or given back) that
 * failed past their quick retries (a store outage of about a quarter of an hour) are made again after a wait, one
 * minute doubling to an hour, for a day. Before, the recover failed there: the give-ups of its later pages were
 * never sent, and its progress said `running` for good. Only a failed call reaches the check.
 */
export const RECOVER_OUTLASTS_OUTAGES_PATCH = 'recover-outlasts-store-outages';

/**
 * Marks executions whose store calls go one at a time (callsInTurn): a redelivery's slot given back and the main
 * loop's next take, in flight together, resolved in another order on a replay, which then fed the take the give-back's
 * result or saved progress where the first run waited. Decided at each execution's start.
 */
export const RECOVER_STORE_CALLS_IN_TURN_PATCH = 'recover-store-calls-in-turn';

type Callback = GaveUpPage['callbacks'][number];

/** A redelivery's own failure: whether it sent is unknown, so it counts as a failed send (its slot stays spent). */
function failedItself(err: unknown): 'failed' {
  // Only a failed redelivery reaches the patch check: other histories replay unchanged.
  if (!patched(RECOVER_SURVIVES_FAILED_REDELIVERY_PATCH)) throw err;
  return 'failed';
}

export async function callbackRecoverWorkflow(input: RecoverInput): Promise<RecoverCounts> {
  if (!patched(RECOVER_BOUNDED_PATCH)) return recoverUnbounded(input);
  const names = ['gaveUpCallbacks', 'saveRecoverProgress', 'takeRecoverSend', 'returnRecoverSend'] as const;
  const inTurns = patched(RECOVER_STORE_CALLS_IN_TURN_PATCH)
    ? callsInTurn(localStoreCalls, names)
    : undefined;
  inTurns?.engage();
  const store = callsOutlastingOutages(inTurns?.calls ?? localStoreCalls, names, () =>
    patched(RECOVER_OUTLASTS_OUTAGES_PATCH),
  );
  const counts: RecoverCounts = {
    ...{ found: 0, skipped: 0, sent: 0, delivered: 0, failed: 0, held: 0, stoppedAtMax: false },
    ...input.progress,
  };
  const max = input.maxSends ?? Infinity;
  let after = input.after;
  const recover = identityOf(input);
  const save = (completed: boolean) => store.saveRecoverProgress(recover, counts, completed);
  const sendOf = (callback: Callback) => ({
    teamId: input.teamId,
    recoverId: input.recoverId,
    episodeId: callback.episodeId,
  });

  // Redeliveries in flight (at most RECOVER_WIDTH); each takes its budget slot just before it starts.
  const inFlight = new Set<Promise<void>>();
  let doneSinceSaved = 0;
  const oneDone = () => Promise.race(inFlight);

  function start(callback: Callback): void {
    const running: Promise<void> = (async () => {
      const result = await redeliver(input, callback, input.recoverId).catch(failedItself);
      if (result === 'delivered' || result === 'failed') {
        counts[result]++;
        counts.sent++;
      } else {
        // Held, or another delivery of it ran meanwhile: nothing sent, its budget slot goes back.
        if (result === 'held') counts.held = (counts.held ?? 0) + 1;
        await store.returnRecoverSend(sendOf(callback));
      }
      if (++doneSinceSaved >= RECOVER_WIDTH) {
        doneSinceSaved = 0;
        await save(false);
      }
    })().then(() => void inFlight.delete(running));
    inFlight.add(running);
  }

  /**
   * A slot of the team's redelivery budget for the callback's send. While the budget is spent, a redelivery in
   * flight may give its slot back; with none in flight, wait for the budget's next slot to free.
   */
  async function takeBudget(callback: Callback): Promise<void> {
    for (;;) {
      const taken = await store.takeRecoverSend(sendOf(callback));
      if (taken.admitted) break;
      if (inFlight.size) {
        await oneDone();
        continue;
      }
      counts.waitingForBudgetUntil = taken.freeAt;
      await save(false);
      await sleep(taken.retryAfterSeconds * 1000);
    }
    delete counts.waitingForBudgetUntil;
  }

  pages: for (let pages = 1; ; pages++) {
    const page = await store.gaveUpCallbacks({
      teamId: input.teamId,
      since: input.since,
      until: input.until,
      limit: RECOVER_PAGE,
      ...(input.resendAfterSeconds !== undefined ? { resentWithinSeconds: input.resendAfterSeconds } : {}),
      ...(after ? { after } : {}),
    });
    const skipped = page.skipped ?? 0;
    counts.found += page.callbacks.length + skipped;
    counts.skipped = (counts.skipped ?? 0) + skipped;
    if (page.callbacks.length || skipped) await save(false);
    for (const callback of page.callbacks) {
      // Never more in flight than the sends left before the max (one held or busy sends nothing: more may go).
      while (inFlight.size >= RECOVER_WIDTH || (inFlight.size && counts.sent + inFlight.size >= max))
        await oneDone();
      if (counts.sent >= max) {
        counts.stoppedAtMax = true; // callbacks left on this page: another recover sends them
        break pages;
      }
      await takeBudget(callback);
      start(callback);
    }
    await Promise.all(inFlight);
    await save(false);
    if (!page.next) break;
    after = page.next;
    if (counts.sent >= max) {
      counts.stoppedAtMax = true; // more pages of give-ups: another recover sends them
      break;
    }
    if (pages >= PAGES_PER_RUN || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof callbackRecoverWorkflow>({ ...input, after, progress: counts });
  }
  await Promise.all(inFlight);
  await save(true);
  return counts;
}

/** What the progress row is keyed and described by. */
const identityOf = (input: RecoverInput): RecoverInput => ({
  recoverId: input.recoverId,
  teamId: input.teamId,
  since: input.since,
  until: input.until,
});

/** Executions started before RECOVER_BOUNDED_PATCH: every give-up still given up is sent, unbounded. */
async function recoverUnbounded(input: RecoverInput): Promise<RecoverCounts> {
  const store = localStoreCalls;
  const counts: RecoverCounts = { ...(input.progress ?? { found: 0, sent: 0, delivered: 0, failed: 0 }) };
  let after = input.after;
  const recover = identityOf(input);
  for (let pages = 1; ; pages++) {
    const page = await store.gaveUpCallbacks({
      teamId: input.teamId,
      since: input.since,
      until: input.until,
      limit: RECOVER_PAGE,
      ...(after ? { after } : {}),
    });
    counts.found += page.callbacks.length;
    if (page.callbacks.length) await store.saveRecoverProgress(recover, counts, false);
    for (let i = 0; i < page.callbacks.length; i += RECOVER_WIDTH) {
      const batch = page.callbacks.slice(i, i + RECOVER_WIDTH);
      const results = await Promise.all(batch.map((callback) => redeliver(input, callback)));
      for (const result of results) {
        if (result === 'delivered') counts.delivered++;
        else if (result === 'failed') counts.failed++;
        else continue; // nothing sent: another delivery of it ran meanwhile
        counts.sent++;
      }
      await store.saveRecoverProgress(recover, counts, false);
    }
    if (!page.next) break;
    after = page.next;
    if (pages >= PAGES_PER_RUN || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof callbackRecoverWorkflow>({ ...input, after, progress: counts });
  }
  await store.saveRecoverProgress(recover, counts, true);
  return counts;
}

/**
 * The episode's redelivery (a recover's, when recoverId is given: it does not go past the team's open breaker);
 * 'busy' when one of it is running already (the route's, or the episode's own).
 */
async function redeliver(
  { teamId, attemptSeconds }: RecoverInput,
  callback: Callback,
  recoverId?: string,
): Promise<RedeliverResult['result'] | 'busy'> {
  return unlessChildRunning(async () => {
    const { result } = await executeChild(callbackRedeliverWorkflow, {
      workflowId: callbackRedeliverWorkflowId(callback.episodeId),
      args: [
        {
          teamId,
          ...callback,
          ...(recoverId ? { recoverId } : {}),
          ...(attemptSeconds ? { attemptSeconds } : {}),
        },
      ],
      // A closed redelivery of the episode may be followed by this one; a running one is not doubled. A recover
      // that is terminated leaves the redeliveries it started to finish.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: runAttributes(callback.runId, teamId),
    });
    return result;
  }, 'busy');
}
