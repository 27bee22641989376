// A manual redelivery of an episode's completion callback (POST /runs/:id/episodes/:episodeId/callback/redeliver):
// one more signed attempt with the episode's webhook-id, recorded in the same attempt log, then the callback
// claim's result is brought up to date. Its own workflow, id cb-redeliver|<episodeId> (workflows/ids.ts).
//
// Never two deliveries of one episode at once: the episode's own schedule holds the cb| claim pending while it
// runs and settles it for good (delivered, or gave_up) when it ends; a redelivery runs only on a settled claim,
// which no schedule takes again, and Temporal runs one execution of this id at a time.
import { claimKeys } from '../domain/outcome';
import { callbackAttemptCalls, localStoreCalls } from './common';

export interface RedeliverInput {
  runId: string;
  teamId: string;
  episodeId: string;
}

export interface RedeliverResult {
  /** delivered or failed: how the attempt went; not_settled: the episode's own delivery is not over. */
  result: 'delivered' | 'failed' | 'not_settled';
  status?: number;
  detail?: string;
}

// The episode's own callback attempt options, and the store calls as quick calls run (workflows/common.ts).
const attempt = callbackAttemptCalls();
const store = localStoreCalls;

export async function callbackRedeliverWorkflow(input: RedeliverInput): Promise<RedeliverResult> {
  const key = claimKeys.callback(input.episodeId);
  // The API checked this before starting; checked again here, so nothing that starts this workflow can make a
  // redelivery overlap the episode's own schedule.
  if (!(await store.wasDelivered(key))) return { result: 'not_settled' };
  // The attempt log numbers it after the episode's attempts (the activity starts from their count).
  const sent = await attempt.sendCallback(input.episodeId, input.runId, { attempt: 1, trigger: 'redeliver' });
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
