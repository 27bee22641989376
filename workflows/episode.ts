// One outcome episode: a run paused or ended. Each outbound family is an independent branch with its own
// claim key; one failing never holds up the others. The workflow only decides; activities do the I/O.
import { proxyActivities, sleep } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { shouldNotify } from '../domain/callback';
import { claimKeys, type RunOutcome } from '../domain/outcome';
import { FAN_OUT_ATTEMPTS, kindFor } from '../domain/push';
import { holder, quick, type BranchResult } from './common';

export type { BranchResult };
import { sendOperatorAlert } from './operatorAlert';

// A fan-out heartbeats after every accepted send; a worker that dies mid fan-out is noticed within the
// heartbeat timeout and the retry skips the endpoints already reached.
const fanOut = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: FAN_OUT_ATTEMPTS,
  },
});

// One HTTP attempt per call; the schedule between attempts is the workflow's (durable timers). Temporal's own
// retries here only cover a worker lost mid-attempt.
const callbackAttempt = proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '5 seconds', maximumAttempts: 3 },
});

export interface EpisodeOptions {
  /** Waits between callback attempts (CALLBACK_RETRY_SECONDS): n waits → n + 1 attempts. */
  callbackRetrySeconds: number[];
}

export const DEFAULT_EPISODE_OPTIONS: EpisodeOptions = { callbackRetrySeconds: [20, 60, 180, 540] };

/** A receiver's Retry-After is honoured, up to this. */
const MAX_CALLBACK_WAIT_SECONDS = 3600;

export interface EpisodeResult {
  episodeId: string;
  push: BranchResult;
  callback: BranchResult;
  ops: BranchResult;
}

async function pushBranch(outcome: RunOutcome): Promise<BranchResult> {
  const kind = kindFor(outcome);
  if (!kind) return 'not_owed';
  // The veto comes before any claim, so the episode stays replayable once the watch ends.
  if (kind === 'human_input_requested' && (await quick.isStandbyVetoed(outcome.runId))) return 'vetoed';
  const key = claimKeys.push(outcome.episodeId);
  const me = holder();
  if (!(await quick.tryMark(key, me))) return 'claimed_elsewhere';
  let settled: BranchResult;
  try {
    const result = await fanOut.deliverPush(outcome);
    // Confirmed on one success; a deliberate no-op (no recipient, no sink) is confirmed too, never retried.
    if (!result.addressable) settled = 'not_addressable';
    else settled = result.delivered + result.alreadyDelivered > 0 ? 'delivered' : 'released';
  } catch {
    settled = 'released';
  }
  if (settled === 'released') await quick.unmark(key, me);
  else await quick.markDelivered(key, me, settled);
  return settled;
}

/**
 * The completion callback: its own claim, then up to n + 1 signed attempts with the same webhook-id. A refusal
 * (SSRF guard, a 4xx other than 408/429) or an exhausted schedule settles it too: bounded, best effort.
 */
async function callbackBranch(outcome: RunOutcome, options: EpisodeOptions): Promise<BranchResult> {
  if (!shouldNotify(outcome)) return 'not_owed';
  const key = claimKeys.callback(outcome.episodeId);
  const me = holder();
  if (!(await quick.tryMark(key, me))) return 'claimed_elsewhere';
  const waits = options.callbackRetrySeconds;
  for (let attempt = 0; ; attempt++) {
    const result = await callbackAttempt.sendCallback(outcome.episodeId, outcome.runId);
    if (result.result === 'delivered') {
      await quick.markDelivered(key, me);
      return 'delivered';
    }
    if (result.result === 'stop' || attempt >= waits.length) {
      await quick.markDelivered(key, me, `gave_up: ${result.detail}`);
      return 'gave_up';
    }
    const wait = Math.min(Math.max(waits[attempt], result.retryAfterSeconds ?? 0), MAX_CALLBACK_WAIT_SECONDS);
    await sleep(wait * 1000);
  }
}

/**
 * The operator alert for a failed run (classify reads the run as persisted now), handed to its own retrying
 * ops| workflow; the branch reports how it ended.
 */
async function opsBranch(outcome: RunOutcome): Promise<BranchResult> {
  if (outcome.kind !== 'run_failed') return 'not_owed';
  const alert = await quick.classifyFailedRun(outcome);
  if (!alert) return 'not_owed';
  return sendOperatorAlert(alert, true);
}

/** A branch that throws settles as released: the others carry on, and the sweep replays what was missed. */
const contained = (branch: Promise<BranchResult>): Promise<BranchResult> =>
  branch.catch(() => 'released' as const);

export async function episodeWorkflow(
  outcome: RunOutcome,
  options: EpisodeOptions = DEFAULT_EPISODE_OPTIONS,
): Promise<EpisodeResult> {
  // The episode's record (GET /runs/:id/episodes) is written beside the branches, not ahead of them: one write
  // less before the first push. It is a view: if it finally fails, the branches still settle their claims.
  const [, push, callback, ops] = await Promise.all([
    quick.recordEpisode(outcome).catch(() => undefined),
    contained(pushBranch(outcome)),
    contained(callbackBranch(outcome, options)),
    contained(opsBranch(outcome)),
  ]);
  return { episodeId: outcome.episodeId, push, callback, ops };
}
