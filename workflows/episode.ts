// One outcome episode: a run paused or ended. Each outbound family is an independent branch with its own
// claim key; one failing never holds up the others. The workflow only decides; activities do the I/O.
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { claimKeys, type RunOutcome } from '../domain/outcome';
import { kindFor } from '../domain/push';

const quick = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 20,
  },
});

// A fan-out heartbeats after every accepted send; a worker that dies mid fan-out is noticed within the
// heartbeat timeout and the retry skips the endpoints already reached.
const fanOut = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '10 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 5,
  },
});

export type BranchResult =
  'delivered' | 'not_addressable' | 'released' | 'claimed_elsewhere' | 'vetoed' | 'not_owed';

export interface EpisodeResult {
  episodeId: string;
  push: BranchResult;
}

/** The holder of this execution's claims: a re-run of the same episode is another holder. */
function holder(): string {
  const info = workflowInfo();
  return `${info.workflowId}/${info.runId}`;
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
  else await quick.markDelivered(key, me);
  return settled;
}

export async function episodeWorkflow(outcome: RunOutcome): Promise<EpisodeResult> {
  await quick.recordEpisode(outcome);
  const [push] = await Promise.all([pushBranch(outcome)]);
  return { episodeId: outcome.episodeId, push };
}
