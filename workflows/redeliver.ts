// A manual redelivery of an episode's completion callback (POST /runs/:id/episodes/:episodeId/callback/redeliver):
// one more signed attempt with the episode's webhook-id, recorded in the same attempt log, then the callback
// claim's result is brought up to date. Its own workflow, id cb-redeliver|<episodeId> (contract/workflows.ts).
//
// Never two deliveries of one episode at once: the episode's own schedule holds the cb| claim pending while it
// runs and settles it for good (delivered, or gave_up) when it ends; a redelivery runs only on a settled claim,
// which no schedule takes again, and Temporal runs one execution of this id at a time. A request decided while
// another redelivery was in flight, whose start landed after that one closed, sends nothing (seenAttempts).
//
// Any settled claim may be redelivered (a receiver that acknowledged and then lost the message asks again): a
// delivered one stays as it is whatever the redelivery's outcome, which only the attempt log records; one that
// gave up is brought up to date.
import { patched } from '@temporalio/workflow';
import type { RedeliverInput, RedeliverResult } from '../contract/workflows';
import { claimKeys } from '../domain/outcome';
import { callbackAttemptCalls, localStoreCalls, outlastingStoreOutages } from './common';

// The store calls as quick calls run (workflows/common.ts); the attempt's options are the episode's (its input's).
const store = localStoreCalls;

/** Marks executions that redeliver any settled callback and check the request's view of the attempt log. */
export const REDELIVER_ANY_SETTLED_PATCH = 'redeliver-any-settled';

/** Marks executions in which an attempt the worker held (nothing sent) leaves the claim as it was. */
export const REDELIVER_HELD_LEAVES_CLAIM_PATCH = 'redelivery-held-leaves-claim';

/**
 * Marks executions whose claim resettle after the send, failed past its quick retries (a store outage of about a
 * quarter of an hour), is made again after a wait, one minute doubling to an hour, for a day. Before, the
 * redelivery failed there: a callback the receiver had taken stayed given up, was counted failed and was sent again
 * by the next recover. Only a failed resettle reaches the check.
 */
export const REDELIVER_RESETTLE_OUTLASTS_OUTAGES_PATCH = 'redeliver-resettle-outlasts-store-outages';

/**
 * Marks executions in which a recover's redelivery sends only a callback still given up: one delivered since the
 * recover read its page (a manual redelivery took it, its attempt counted before the recover's read) was sent
 * again. Only such a callback reaches the check.
 */
export const RECOVER_REDELIVERS_ONLY_GIVEN_UP_PATCH = 'recover-redelivers-only-given-up';

const resettle = (key: string, result: string): Promise<boolean> =>
  outlastingStoreOutages(
    () => store.resettleClaim(key, result),
    () => patched(REDELIVER_RESETTLE_OUTLASTS_OUTAGES_PATCH),
  );

export async function callbackRedeliverWorkflow(input: RedeliverInput): Promise<RedeliverResult> {
  const key = claimKeys.callback(input.episodeId);
  const attempt = callbackAttemptCalls(input.attemptSeconds);
  if (!patched(REDELIVER_ANY_SETTLED_PATCH)) return redeliverGaveUp(input, key, attempt);
  // The API checked the claim before starting; checked again here, so nothing that starts this workflow can make
  // a redelivery overlap the episode's own schedule.
  const claim = await store.describeClaim(key);
  if (claim.state !== 'delivered') return { result: 'not_settled' };
  if (
    input.seenAttempts !== undefined &&
    (await store.callbackAttemptCount(input.episodeId)) > input.seenAttempts
  )
    return { result: 'superseded' };
  const gaveUp = claim.result?.startsWith('gave_up') ?? false;
  if (input.recoverId && !gaveUp && patched(RECOVER_REDELIVERS_ONLY_GIVEN_UP_PATCH))
    return { result: 'superseded' };
  // The attempt log numbers it after the episode's attempts (past the newest row). A recover's
  // does not go past the team's open breaker.
  const sent = await attempt.sendCallback(
    input.episodeId,
    input.runId,
    { attempt: 1, trigger: 'redeliver', ...(input.recoverId ? { recoverId: input.recoverId } : {}) },
    input.teamId,
  );
  if (sent.result === 'delivered') {
    if (gaveUp) await resettle(key, 'redelivered');
    return { result: 'delivered', status: sent.status };
  }
  // Held, nothing went out: the claim keeps what the last send said. Only activities that tell a hold reach
  // the patch check: histories recorded before replay unchanged.
  if (sent.result === 'retry' && sent.held && patched(REDELIVER_HELD_LEAVES_CLAIM_PATCH))
    return { result: 'held', held: sent.held, detail: sent.detail };
  // A failure never overwrites a delivery, and raises no alert: the launcher asked and sees the outcome.
  if (gaveUp) await resettle(key, `gave_up: ${sent.detail}`);
  return {
    result: 'failed',
    ...(sent.status !== undefined ? { status: sent.status } : {}),
    detail: sent.detail,
  };
}

/** Executions started before REDELIVER_ANY_SETTLED_PATCH: only a callback that gave up (the route refused others). */
async function redeliverGaveUp(
  input: RedeliverInput,
  key: string,
  attempt: ReturnType<typeof callbackAttemptCalls>,
): Promise<RedeliverResult> {
  // The API checked this before starting; checked again here, so nothing that starts this workflow can make a
  // redelivery overlap the episode's own schedule.
  if (!(await store.wasDelivered(key))) return { result: 'not_settled' };
  // The attempt log numbers it after the episode's attempts (past the newest row).
  const sent = await attempt.sendCallback(
    input.episodeId,
    input.runId,
    { attempt: 1, trigger: 'redeliver' },
    input.teamId,
  );
  if (sent.result === 'delivered') {
    await store.resettleClaim(key, 'redelivered');
    return { result: 'delivered', status: sent.status };
  }
  await store.resettleClaim(key, `gave_up: ${sent.detail}`);
  return {
    result: 'failed',
    ...(sent.status !== undefined ? { status: sent.status } : {}),
    detail: sent.detail,
  };
}
