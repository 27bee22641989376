// What every workflow shares: the short-activity proxy, the claim holder, and how a branch ended.
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';

/** Claims, stores and other quick reads and writes. */
export const quick = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 20,
  },
});

export type BranchResult =
  'delivered' | 'not_addressable' | 'released' | 'claimed_elsewhere' | 'vetoed' | 'not_owed' | 'gave_up';

/** The holder of this execution's claims: a re-run of the same episode is another holder. */
export function holder(): string {
  const info = workflowInfo();
  return `${info.workflowId}/${info.runId}`;
}
