// The operator dispatcher: every operator alert (failed run, router decision error, run health) goes through
// here, under its own ops|<episodeKey> claim, so each is sent once however often it is raised.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { claimKeys } from '../domain/outcome';
import type { OperatorAlert } from '../domain/ops';
import { holder, quick, type BranchResult } from './common';

// About 15 seconds of retries, then the claim is released: the sweep carries on at its own cadence.
const webhook = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 4,
  },
});

export async function dispatchOperatorAlert(alert: OperatorAlert): Promise<BranchResult> {
  const key = claimKeys.ops(alert.episodeKey);
  const me = holder();
  if (!(await quick.tryMark(key, me))) return 'claimed_elsewhere';
  try {
    // The activity settles the claim itself right after the receiver's 2xx, and a retry checks it before
    // sending: a worker killed between the two must not make the alert go out twice.
    await webhook.postOperatorAlert(alert, { key, holder: me });
  } catch {
    await quick.unmark(key, me); // released: the sweep (or the next report) tries again
    return 'released';
  }
  // Stamp the run's marker only once the claim is settled: certifying a pending claim would race its unmark.
  if (await quick.markDelivered(key, me)) await quick.stampOpsMarker(alert);
  return 'delivered';
}

/** A router decision error: its own workflow, id = ops|<episodeKey>, so repeated reports are one dispatch. */
export async function operatorAlertWorkflow(alert: OperatorAlert): Promise<BranchResult> {
  return dispatchOperatorAlert(alert);
}
