// The sweep workflow a Temporal Schedule starts every SWEEP_INTERVAL_SECONDS.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { SweepReport } from '../activities/sweep';

const { sweepOnce } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 3 },
});

export async function sweepWorkflow(): Promise<SweepReport> {
  return sweepOnce();
}
