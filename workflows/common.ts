// What every workflow shares: the short-activity proxy, the claim holder, and how a branch ended.
import {
  patched,
  proxyActivities,
  proxyLocalActivities,
  workflowInfo,
  type RetryPolicy,
} from '@temporalio/workflow';
import type { Activities } from '../activities';

const QUICK_RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '1 minute',
  maximumAttempts: 20,
};

/** Marks histories whose quick calls are local activities; older histories replay with scheduled ones. */
export const LOCAL_QUICK_PATCH = 'quick-calls-are-local-activities';

const scheduled = proxyActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: QUICK_RETRY });
// Local: run by the worker inside the workflow task, with no round trip through the task queue per call. This
// is most of an episode's latency before its first push (the bench's "activity shape" tuning). Same at-least-
// once semantics: a lost workflow task re-runs them, and every quick call is safe to run twice.
const local = proxyLocalActivities<Activities>({ startToCloseTimeout: '30 seconds', retry: QUICK_RETRY });

/** Claims, stores and other quick reads and writes. */
export const quick = new Proxy(local, {
  get: (_target, name: keyof Activities) => (patched(LOCAL_QUICK_PATCH) ? local : scheduled)[name],
});

export type BranchResult =
  'delivered' | 'not_addressable' | 'released' | 'claimed_elsewhere' | 'vetoed' | 'not_owed' | 'gave_up';

/** The holder of this execution's claims: a re-run of the same episode is another holder. */
export function holder(): string {
  const info = workflowInfo();
  return `${info.workflowId}/${info.runId}`;
}
