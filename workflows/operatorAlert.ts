// The operator dispatcher: every operator alert (failed run, router decision error, run health) goes out under
// its own ops|<episodeKey> claim, so each is sent once however often it is raised. Each alert is its own
// workflow (id ops|<episodeKey>) that retries on durable timers for OPS_ALERT_RETRY_HOURS, its claim kept
// pending and renewed meanwhile, then settles gave_up with the reason: a webhook outage of minutes or hours
// loses nothing, and a worker killed meanwhile resumes the schedule where it was.
import {
  ActivityFailure,
  ApplicationFailure,
  ParentClosePolicy,
  patched,
  proxyActivities,
  sleep,
  startChild,
} from '@temporalio/workflow';
import type { Activities } from '../contract/activities';
import { runAttributes } from '../contract/searchAttributes';
import { operatorAlertWorkflowId, type BranchResult } from '../contract/workflows';
import { claimKeys } from '../domain/outcome';
import { nextOpsAlertWait, OPS_ALERT_FIRST_WAIT_MS, type OperatorAlert } from '../domain/ops';
import {
  holder,
  quickCalls,
  quickCallsOutlastingOutages,
  unlessChildRunning,
  type QuickCalls,
} from './common';

/** Marks histories in which alerts are their own retrying workflows; older ones replay the inline dispatch. */
export const OPS_ALERT_WORKFLOW_PATCH = 'ops-alert-own-workflow-retrying';

/**
 * Marks histories in which an alert's store call (its claim taken, renewed or settled) that failed past its quick
 * retries (a store outage of about a quarter of an hour) is made again after a wait, one minute doubling to an
 * hour, for a day. Before, it failed the alert's workflow: a failed run's alert came back with the sweep's replay,
 * but a router error's, a run-health alert or a callback's give-up had nothing to replay them. Only a failed store
 * call reaches it.
 */
export const OPS_ALERT_STORE_OUTAGES_OUTLASTED_PATCH = 'ops-alert-store-calls-outlast-outages';

// Before OPS_ALERT_WORKFLOW_PATCH: about 15 seconds of retries, then the claim was released.
const webhook = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '2 seconds',
    backoffCoefficient: 2,
    maximumInterval: '30 seconds',
    maximumAttempts: 4,
  },
});

// One POST per call: the schedule between attempts is the workflow's (durable timers).
const webhookOnce = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 1 },
});

/** The inline dispatch that histories recorded before OPS_ALERT_WORKFLOW_PATCH replay. */
export async function dispatchOperatorAlert(quick: QuickCalls, alert: OperatorAlert): Promise<BranchResult> {
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

function failureReason(err: unknown): { reason: string; final: boolean } {
  const cause = err instanceof ActivityFailure ? err.cause : err;
  const final = cause instanceof ApplicationFailure && cause.nonRetryable === true;
  return { reason: cause instanceof Error ? cause.message : String(cause), final };
}

/** The alert, retried with backoff (2 s, doubling, capped) until it goes through or the retry window ends. */
async function dispatchRetrying(quick: QuickCalls, alert: OperatorAlert): Promise<BranchResult> {
  const key = claimKeys.ops(alert.episodeKey);
  const me = holder();
  if (!(await quick.tryMark(key, me))) return 'claimed_elsewhere';
  const { retryForMs, maxWaitMs } = await quick.opsAlertSettings();
  const giveUpAt = Date.now() + retryForMs;
  for (let wait = OPS_ALERT_FIRST_WAIT_MS; ; wait = nextOpsAlertWait(wait, maxWaitMs)) {
    let failure: { reason: string; final: boolean };
    try {
      // Settled by the activity itself right after the 2xx; a repeat checks the claim before sending.
      await webhookOnce.postOperatorAlert(alert, { key, holder: me });
      if (await quick.markDelivered(key, me)) await quick.stampOpsMarker(alert);
      return 'delivered';
    } catch (err) {
      failure = failureReason(err);
    }
    if (failure.final || Date.now() + wait > giveUpAt) {
      await quick.markDelivered(key, me, `gave_up: ${failure.reason}`);
      return 'gave_up';
    }
    // Still in hand: the sweep and other replicas keep off while this schedule runs.
    if (!(await quick.renewClaim(key, me))) {
      // Not pending under us any more: either our attempt settled it after the 2xx and then failed to report
      // (a worker lost at that moment), or another holder took it over.
      if (!(await quick.markDelivered(key, me))) return 'claimed_elsewhere';
      await quick.stampOpsMarker(alert);
      return 'delivered';
    }
    await sleep(wait);
  }
}

/** One alert: its own workflow, id = ops|<episodeKey>, so repeated reports are one dispatch. */
export async function operatorAlertWorkflow(alert: OperatorAlert): Promise<BranchResult> {
  const quick = quickCallsOutlastingOutages(quickCalls(), () =>
    patched(OPS_ALERT_STORE_OUTAGES_OUTLASTED_PATCH),
  );
  return patched(OPS_ALERT_WORKFLOW_PATCH)
    ? dispatchRetrying(quick, alert)
    : dispatchOperatorAlert(quick, alert);
}

/**
 * Hands an alert to its own workflow, abandoned by this one's close (continue-as-new, a reset or termination
 * leaves it running). `wait`: the caller takes the alert's result; otherwise only its start. An alert already
 * in flight under the same id is another dispatch of the same alert: claimed elsewhere.
 */
export async function handOffOperatorAlert(alert: OperatorAlert, wait: boolean): Promise<BranchResult> {
  return unlessChildRunning(async () => {
    const child = await startChild(operatorAlertWorkflow, {
      workflowId: operatorAlertWorkflowId(alert.episodeKey),
      args: [alert],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      // A closed dispatch may run again (its claim still dedupes); a running one is not doubled.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      typedSearchAttributes: runAttributes(alert.runId, alert.teamId),
    });
    return wait ? await child.result() : 'delivered';
  }, 'claimed_elsewhere');
}

/** The dispatch for this history: a retrying alert workflow, or the inline one histories before it recorded. */
export function sendOperatorAlert(
  quick: QuickCalls,
  alert: OperatorAlert,
  wait: boolean,
): Promise<BranchResult> {
  return patched(OPS_ALERT_WORKFLOW_PATCH)
    ? handOffOperatorAlert(alert, wait)
    : dispatchOperatorAlert(quick, alert);
}
