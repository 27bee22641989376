// The sweep's Temporal Schedule: created at worker start-up, updated when the interval changes, never duplicated.
import { Client, ScheduleAlreadyRunning, ScheduleOverlapPolicy } from '@temporalio/client';
import { sweepWorkflowId, workflowTypes } from '../contract/workflows';

export const sweepScheduleId = (taskQueue: string): string => `flow-notify-sweep:${taskQueue}`;

export async function ensureSweepSchedule(
  client: Client,
  taskQueue: string,
  intervalSeconds: number,
): Promise<void> {
  const scheduleId = sweepScheduleId(taskQueue);
  const spec = { intervals: [{ every: intervalSeconds * 1000 }] };
  const action = {
    type: 'startWorkflow' as const,
    workflowType: workflowTypes.sweep,
    workflowId: sweepWorkflowId(taskQueue),
    taskQueue,
  };
  try {
    await client.schedule.create({
      scheduleId,
      spec,
      action,
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: Math.max(60, intervalSeconds) * 1000 },
    });
  } catch (err) {
    if (!(err instanceof ScheduleAlreadyRunning)) throw err;
    await client.schedule.getHandle(scheduleId).update((previous) => ({ ...previous, spec, action }));
  }
}
