// Ending a run: complete (with its final answer), fail (with its error) or cancel.
import type { Run } from '../domain/run';
import { nextStatus } from '../domain/runStatus';
import { loadRun, type Caller, type RunsContext } from './context';
import { applyTransition } from './transition';

export async function endRun(
  ctx: RunsContext,
  caller: Caller,
  runId: string,
  op: 'complete' | 'fail' | 'cancel',
  set: Partial<Run>,
  answer?: string,
): Promise<Run> {
  const run = await loadRun(ctx, caller, runId);
  const status = nextStatus(run.status, run.pause?.reason, op);
  const at = ctx.now();
  return applyTransition(ctx, run, op, {
    set: { ...set, endedAt: at, checkpoint: { status, at } },
    events: [{ type: `run_${status}`, data: { ...set } }],
    bodyError: set.error,
    answer,
  });
}
