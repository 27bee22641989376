// One interaction's life besides its answer: the escalation rungs while nobody answers (durable timers from the
// moment it was asked), the snoozes people ask for (a re-push an hour later), and, once it is answered, the push
// that closes it on every device it reached. The answer arrives as a signal (with start: it may be the first to
// come) and is checked before every send, so an answer that lands at a rung's instant never produces that rung;
// the activities check the store again before they send. Each send has its own claim: exactly once across worker
// crashes, a replay, and a second execution the sweep starts.
import { condition, proxyActivities, setHandler } from '@temporalio/workflow';
import type { Activities, FollowUpResult } from '../contract/activities';
import {
  CALLBACK_RETRY_JITTER,
  interactionAnsweredSignal,
  interactionSnoozedSignal,
  type InteractionAnswer,
  type InteractionRef,
  type InteractionResult,
  type InteractionSnooze,
} from '../contract/workflows';
import { callbackWaitSeconds, jitteredWaitSeconds } from '../domain/callback';
import {
  interactionClaimKeys,
  rungsInOrder,
  SNOOZE_SECONDS,
  SNOOZES_PER_INTERACTION,
  type EscalationRung,
} from '../domain/interaction';
import { holder, localStoreCalls } from './common';

const store = localStoreCalls;

/** A push to a handful of devices, or one webhook POST: the activity's own deadlines bound each send. */
const sends = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 5,
  },
});

/**
 * With nothing left to send, the execution still waits this long for an answer or a snooze before it ends: most
 * answers come soon after the question or a rung, and they then find this execution instead of starting another
 * (a signal-with-start after the end starts a new one, which closes the question all the same).
 */
const LINGER_MS = 10 * 60_000;

/** Something the workflow sends when its time comes. */
type Due =
  | { what: 'rung'; atMs: number; index: number; rung: EscalationRung; attempt: number }
  | { what: 'snooze'; atMs: number; snooze: InteractionSnooze };

export async function interactionWorkflow(ref: InteractionRef): Promise<InteractionResult> {
  let answer: InteractionAnswer | undefined;
  const queue: Due[] = [];
  const snoozeIds = new Set<string>();
  setHandler(interactionAnsweredSignal, (answered) => {
    answer ??= answered;
  });
  setHandler(interactionSnoozedSignal, (snooze) => {
    if (snoozeIds.has(snooze.snoozeId) || snoozeIds.size >= SNOOZES_PER_INTERACTION) return;
    snoozeIds.add(snooze.snoozeId);
    queue.push({ what: 'snooze', atMs: Date.parse(snooze.at) + SNOOZE_SECONDS * 1000, snooze });
  });
  const me = holder();
  const result: InteractionResult = { rungsSent: [], snoozesSent: 0, closed: false };

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

  const plan = await store.interactionPlan(ref, me);
  const webhookWaits = plan.webhookRetrySeconds;
  if (plan.open)
    for (const { index, rung } of rungsInOrder(plan.rungs))
      queue.push({ what: 'rung', atMs: plan.askedAtMs + rung.afterSeconds * 1000, index, rung, attempt: 0 });

  while (answer === undefined) {
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
      const key = interactionClaimKeys.snooze(ref.interactionId, next.snooze.snoozeId);
      const sent = await claimed(key, () => sends.sendSnoozed(ref, next.snooze));
      if (sent?.result === 'delivered') result.snoozesSent++;
      continue;
    }
    const key = interactionClaimKeys.rung(ref.interactionId, next.index);
    const sent = await claimed(key, () => sends.sendRung(ref, next.index, next.rung));
    if (sent?.result === 'delivered') result.rungsSent.push(next.index);
    if (sent?.retry && next.attempt < webhookWaits.length) {
      const scheduled = jitteredWaitSeconds(webhookWaits[next.attempt], CALLBACK_RETRY_JITTER, Math.random());
      const waitSeconds = callbackWaitSeconds(scheduled, sent.retry.afterSeconds, true);
      queue.push({ ...next, atMs: Date.now() + waitSeconds * 1000, attempt: next.attempt + 1 });
    }
  }
  if (answer !== undefined) {
    const answered = answer;
    const key = interactionClaimKeys.answered(ref.interactionId);
    result.closed = (await claimed(key, () => sends.closeAnswered(ref, answered))) !== undefined;
  }
  return result;
}
