// The sweep workflow a Temporal Schedule starts every SWEEP_INTERVAL_SECONDS.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../contract/activities';
import type { SweepReport } from '../contract/workflows';

// Both activities heartbeat (per page, and a keep-alive while one query runs long): a worker killed mid-pass is
// noticed within the heartbeat timeout and the pass retried on a live worker, instead of holding the schedule
// (overlap SKIP) for the whole start-to-close timeout. That timeout still bounds a live worker stuck on a query
// (the keep-alive beats on); a pass over 100,000 runs takes 1-3 min on FerretDB v1. A retried pass starts over:
// it is safe to run twice.
const { sweepOnce, sweepReapExpired } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '5 seconds', maximumInterval: '1 minute', maximumAttempts: 3 },
});

export async function sweepWorkflow(): Promise<SweepReport> {
  const pass = await sweepOnce();
  const reaped = await sweepReapExpired();
  return { ...pass, reaped };
}
