// One interaction's life besides its answer: the escalation rungs while nobody answers (durable timers from the
// moment it was asked), the snoozes people ask for (a re-push an hour later), and, once it is answered, the push
// that closes it on every device it reached. The answer arrives as a signal (with start: it may be the first to
// come) and is checked before every send, so an answer that lands at a rung's instant never produces that rung;
// the activities check the store again before they send. Each send has its own claim: exactly once across worker
// crashes, a replay, and a second execution the sweep starts. A rung or snooze that fails is tried again on the
// callbacks' schedule while the question is open, its claim kept, and settled as given up when the schedule ends.
import { condition, continueAsNew, patched, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities, FollowUpResult } from '../contract/activities';
import {
  CALLBACK_RETRY_JITTER,
  interactionAnsweredSignal,
  interactionSnoozedSignal,
  type InteractionAnswer,
  type InteractionCarried,
  type InteractionDue,
  type InteractionPlan,
  type InteractionRef,
  type InteractionResult,
} from '../contract/workflows';
import {
  callbackScheduleSpanSeconds,
  callbackWaitSeconds,
  heldWaitSeconds,
  jitteredWaitSeconds,
} from '../domain/callback';
import {
  interactionClaimKeys,
  rungsInOrder,
  SNOOZE_SECONDS,
  SNOOZES_PER_EXECUTION,
} from '../domain/interaction';
import { holder, localStoreCalls, outlastingStoreOutages } from './common';

/**
 * Marks histories in which a store call (a claim, the plan) that failed past its quick retries (a store outage of
 * about a quarter of an hour) is made again after a wait (outlastingOutages). Before, it failed the execution: the
 * rungs and snoozes still owed were never sent, and the sweep restarts only a question that never opened.
 */
export const STORE_OUTAGES_OUTLASTED_PATCH = 'interaction-store-calls-outlast-outages';

/**
 * Marks executions that skip a rung their plan names lapsed (due more than 15 days before, its claim maybe reaped
 * since): a question open a month, then snoozed, paged its whole ladder again. Only a plan that names one reaches
 * the check (a worker from before the change ignores the field; its histories replay as it ran).
 */
export const INTERACTION_SKIPS_LAPSED_RUNGS_PATCH = 'interaction-skips-lapsed-rungs';

/**
 * Marks histories in which a rung or snooze still owed when the answer came, after a try that threw, is settled by
 * what that try reached (followUpSentBefore): its push may have gone before its announce failed. Before, it settled
 * closed: counted not sent, and a rung's interaction.escalated never raised. Only such a send reaches it.
 */
export const THREW_FOLLOW_UPS_ASKED_AT_ANSWER_PATCH = 'interaction-threw-follow-ups-asked-at-answer';
const outlastingOutages = <T>(call: () => Promise<T>): Promise<T> =>
  outlastingStoreOutages(call, () => patched(STORE_OUTAGES_OUTLASTED_PATCH));

const store = {
  interactionPlan: (ref: InteractionRef, by: string) =>
    outlastingOutages(() => localStoreCalls.interactionPlan(ref, by)),
  tryMark: (key: string, by: string) => outlastingOutages(() => localStoreCalls.tryMark(key, by)),
  markDelivered: (key: string, by: string, result?: string) =>
    outlastingOutages(() => localStoreCalls.markDelivered(key, by, result)),
  unmark: (key: string, by: string) => outlastingOutages(() => localStoreCalls.unmark(key, by)),
};

/** A push to a handful of devices, or one webhook POST: the activity's own deadlines bound each send. */
const sendOptions = {
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 5,
  },
} as const;
const sendsUnwatched = proxyActivities<Activities>(sendOptions);
const sendsHeartbeating = proxyActivities<Activities>({ ...sendOptions, heartbeatTimeout: '10 seconds' });

/**
 * Marks histories whose sends (rungs, snoozes, the close) heartbeat under a 10 s heartbeat timeout: one on a
 * worker that died is tried again within seconds, not after its two-minute start-to-close.
 */
export const SENDS_HEARTBEAT_PATCH = 'interaction-sends-heartbeat';

/** The sends as this history schedules them: heartbeating once the patch is marked. */
const sends = (): typeof sendsUnwatched =>
  patched(SENDS_HEARTBEAT_PATCH) ? sendsHeartbeating : sendsUnwatched;

/**
 * With nothing left to send, the execution still waits this long for an answer or a snooze before it ends: most
 * answers come soon after the question or a rung, and they then find this execution instead of starting another
 * (a signal-with-start after the end starts a new one, which closes the question all the same).
 */
const LINGER_MS = 10 * 60_000;

/**
 * Marks histories in which a rung or snooze that failed (or threw past its retries) keeps its claim and is tried
 * again on the callbacks' schedule while the question is open (an attempt the worker held does not spend it), then
 * settles as `gave_up`; one still waiting when the answer comes settles as `closed`. Before, its claim was released
 * and nothing tried it again: a push service or store outage outlasting the send's retries lost the rung.
 */
export const FOLLOW_UPS_RETRIED_PATCH = 'interaction-sends-retried-until-settled';

const firstTry = (atMs: number) => ({ attempt: 0, holds: 0, firstAtMs: atMs, claimKept: false });

/**
 * When a send that failed goes again (undefined: never), by the callbacks' rules: a throw (`sent` undefined) or a
 * transient failure spends one of the schedule's `waits`, an attempt the worker held waits within the schedule's
 * span without spending one, and a refusal for good is never tried again.
 */
function retryOf(
  next: InteractionDue,
  sent: FollowUpResult | undefined,
  waits: number[],
): InteractionDue | undefined {
  const retry = sent ? sent.retry : {};
  if (!retry) return undefined;
  const now = Date.now();
  const span = callbackScheduleSpanSeconds(waits, CALLBACK_RETRY_JITTER) * 1000;
  if (retry.held && now < next.firstAtMs + span) {
    const atMs = now + heldWaitSeconds(retry.afterSeconds, next.holds) * 1000;
    return { ...next, atMs, holds: next.holds + 1, claimKept: true };
  }
  if (next.attempt >= waits.length) return undefined;
  const scheduled = jitteredWaitSeconds(waits[next.attempt], CALLBACK_RETRY_JITTER, Math.random());
  const atMs = now + callbackWaitSeconds(scheduled, retry.afterSeconds, true) * 1000;
  return { ...next, atMs, attempt: next.attempt + 1, claimKept: true };
}

/**
 * Marks histories in which an execution that has taken SNOOZES_PER_EXECUTION snoozes continues as new with the
 * sends it still owes (the history stays bounded however long a person keeps snoozing). Before, the snoozes past
 * that many were dropped while their tokens had answered 202: the person was never pushed again.
 */
export const SNOOZES_CONTINUE_AS_NEW_PATCH = 'interaction-snoozes-continue-as-new';

/** What a send's try that threw reached (none, when the question cannot be read). */
const reachedBefore = (ref: InteractionRef, due: InteractionDue): Promise<number> =>
  sends()
    .followUpSentBefore(
      ref,
      due.what === 'rung'
        ? { what: 'rung', index: due.index, rung: due.rung }
        : { what: 'snooze', snooze: due.snooze },
    )
    .then(
      (sent) => (sent.result === 'delivered' ? sent.delivered : 0),
      () => 0,
    );

/**
 * `known`: the plan the pause's start carried (its first task then arms the timers without a store call). Started
 * without one (an answer's or snooze's signal-with-start, the sweep, histories from before), it reads the plan.
 */
export async function interactionWorkflow(
  ref: InteractionRef,
  known?: InteractionPlan,
  carried?: InteractionCarried,
): Promise<InteractionResult> {
  let answer: InteractionAnswer | undefined;
  const queue: InteractionDue[] = [...(carried?.queue ?? [])];
  const snoozeIds = new Set(queue.flatMap((due) => (due.what === 'snooze' ? [due.snooze.snoozeId] : [])));
  let snoozesTaken = 0;
  setHandler(interactionAnsweredSignal, (answered) => {
    answer ??= answered;
  });
  setHandler(interactionSnoozedSignal, (snooze) => {
    if (snoozeIds.has(snooze.snoozeId)) return;
    if (snoozesTaken >= SNOOZES_PER_EXECUTION && !patched(SNOOZES_CONTINUE_AS_NEW_PATCH)) return;
    snoozeIds.add(snooze.snoozeId);
    snoozesTaken++;
    const atMs = Date.parse(snooze.at) + SNOOZE_SECONDS * 1000;
    queue.push({ what: 'snooze', atMs, snooze, ...firstTry(atMs) });
  });
  const me = carried?.holder ?? holder();
  const result: InteractionResult = carried?.result ?? { rungsSent: [], snoozesSent: 0, closed: false };

  /** The send under its claim: skipped when another holder has it or had it; released when it failed for good. */
  async function claimed(
    key: string,
    send: () => Promise<FollowUpResult>,
  ): Promise<FollowUpResult | undefined> {
    if (!(await store.tryMark(key, me))) return undefined;
    let sent: FollowUpResult;
    try {
      sent = await send();
    } catch {
      await store.unmark(key, me); // the sweep replays an answered close whose claim is absent
      return undefined;
    }
    if (sent.result === 'failed') await store.unmark(key, me);
    else await store.markDelivered(key, me, sent.result);
    return sent;
  }

  /** A rung or a snooze under its claim; one that fails is queued again or settled (see the patch). */
  async function followUp(
    key: string,
    next: InteractionDue,
    send: () => Promise<FollowUpResult>,
  ): Promise<FollowUpResult | undefined> {
    if (!(await store.tryMark(key, me))) return undefined;
    let sent: FollowUpResult | undefined;
    try {
      sent = await send();
    } catch {
      sent = undefined;
    }
    if (sent && sent.result !== 'failed') {
      // One that reached a device on an earlier try was sent, whatever this try found (the question closed since).
      const settled: FollowUpResult =
        next.reached && sent.result !== 'delivered' ? { result: 'delivered', delivered: next.reached } : sent;
      await store.markDelivered(key, me, settled.result);
      return settled;
    }
    // Only a failed send reaches the patch check: histories without one replay unchanged.
    if (!patched(FOLLOW_UPS_RETRIED_PATCH)) {
      await store.unmark(key, me); // the sweep replays an answered close whose claim is absent
      if (next.what === 'rung' && sent?.retry) {
        const again = retryOf(
          next,
          { ...sent, retry: { afterSeconds: sent.retry.afterSeconds } },
          webhookWaits,
        );
        if (again) queue.push({ ...again, claimKept: false });
      }
      return sent;
    }
    const reached = Math.max(next.reached ?? 0, sent?.delivered ?? 0);
    const again = retryOf(next, sent, webhookWaits);
    const threw = next.threw || sent === undefined;
    if (again) queue.push({ ...again, ...(reached ? { reached } : {}), ...(threw ? { threw } : {}) });
    else await store.markDelivered(key, me, reached ? 'delivered' : 'gave_up');
    return reached && !again ? { result: 'delivered', delivered: reached } : sent;
  }

  const countSent = (due: InteractionDue): void => {
    if (due.what === 'rung') result.rungsSent.push(due.index);
    else result.snoozesSent++;
  };

  const keyOf = (due: InteractionDue): string =>
    due.what === 'snooze'
      ? interactionClaimKeys.snooze(ref.interactionId, due.snooze.snoozeId)
      : interactionClaimKeys.rung(ref.interactionId, due.index);

  const plan = known ?? (await store.interactionPlan(ref, me));
  const webhookWaits = plan.webhookRetrySeconds;
  if (plan.open && !carried)
    for (const { index, rung } of rungsInOrder(plan.rungs)) {
      // Settled long ago, its claim maybe reaped: not sent again. Only a plan that names one reaches the check.
      if (plan.lapsedRungs?.includes(index) && patched(INTERACTION_SKIPS_LAPSED_RUNGS_PATCH)) continue;
      const atMs = plan.askedAtMs + rung.afterSeconds * 1000;
      queue.push({ what: 'rung', atMs, index, rung, ...firstTry(atMs) });
    }

  while (answer === undefined) {
    if (snoozesTaken >= SNOOZES_PER_EXECUTION && patched(SNOOZES_CONTINUE_AS_NEW_PATCH))
      return continueAsNew<typeof interactionWorkflow>(ref, plan, { queue, result, holder: me });
    if (!queue.length) {
      if (await condition(() => answer !== undefined || queue.length > 0, LINGER_MS)) continue;
      break;
    }
    queue.sort((a, b) => a.atMs - b.atMs);
    const next = queue[0];
    const wait = next.atMs - Date.now();
    if (wait > 0) {
      const queued = queue.length;
      await condition(() => answer !== undefined || queue.length !== queued, wait);
      continue; // answered, a snooze queued ahead, or the time has come: decided afresh
    }
    queue.shift();
    if (next.what === 'snooze') {
      const sent = await followUp(keyOf(next), next, () => sends().sendSnoozed(ref, next.snooze));
      if (sent?.result === 'delivered') countSent(next);
      continue;
    }
    const sent = await followUp(keyOf(next), next, () => sends().sendRung(ref, next.index, next.rung));
    if (sent?.result === 'delivered') countSent(next);
  }
  // Sends still waiting for another try when the answer came are owed no more; one that reached a device was sent.
  for (const due of queue) {
    if (!due.claimKept) continue;
    const reached =
      due.reached ??
      (due.threw && patched(THREW_FOLLOW_UPS_ASKED_AT_ANSWER_PATCH) ? await reachedBefore(ref, due) : 0);
    await store.markDelivered(keyOf(due), me, reached ? 'delivered' : 'closed');
    if (reached) countSent(due);
  }
  if (answer !== undefined) {
    const answered = answer;
    const key = interactionClaimKeys.answered(ref.interactionId);
    result.closed = (await claimed(key, () => sends().closeAnswered(ref, answered))) !== undefined;
  }
  return result;
}
