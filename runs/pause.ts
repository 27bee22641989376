// Pausing a run (on a human's input, parked on a wall, soft-paused) and resuming it without an answer.
import type { InteractionChoice } from '../domain/push';
import type { Run } from '../domain/run';
import { nextStatus, pauseReasonFor } from '../domain/runStatus';
import { loadRun, newId, type Caller, type RunsContext } from './context';
import { applyTransition } from './transition';

/**
 * doPause: writes the interaction, saves the checkpoint together with the paused status in one write, then
 * appends human_input_requested and run_paused.
 */
export async function pauseForHuman(
  ctx: RunsContext,
  caller: Caller,
  runId: string,
  prompt: string,
  choices?: InteractionChoice[],
): Promise<{ run: Run; interactionId: string }> {
  const run = await loadRun(ctx, caller, runId);
  nextStatus(run.status, run.pause?.reason, 'pause'); // refuse before writing anything
  const at = ctx.now();
  const interactionId = newId('int');
  const seq = run.pauseCount + 1;
  await ctx.interactions.insert({
    _id: interactionId,
    runId,
    teamId: run.teamId,
    prompt,
    ...(choices?.length ? { choices } : {}),
    status: 'pending',
    createdAt: at,
  });
  try {
    const updated = await applyTransition(ctx, run, 'pause', {
      set: {
        pause: { reason: 'human_input', seq, interactionId, at },
        pauseCount: seq,
        checkpoint: { status: 'paused', at },
      },
      events: [
        {
          type: 'human_input_requested',
          data: { interaction_id: interactionId, prompt, ...(choices?.length ? { choices } : {}) },
        },
        { type: 'run_paused', data: { reason: 'human_input', interaction_id: interactionId, seq } },
      ],
    });
    return { run: updated, interactionId };
  } catch (err) {
    await ctx.interactions.abandon(interactionId);
    throw err;
  }
}

/** A pause no one answers: parked on a wall, or soft-paused; resume ends it. */
export async function pauseWithoutHuman(
  ctx: RunsContext,
  caller: Caller,
  runId: string,
  op: 'park' | 'soft_pause',
  wall?: string,
): Promise<Run> {
  const run = await loadRun(ctx, caller, runId);
  nextStatus(run.status, run.pause?.reason, op);
  const at = ctx.now();
  const seq = run.pauseCount + 1;
  const reason = pauseReasonFor(op);
  return applyTransition(ctx, run, op, {
    set: {
      pause: { reason, seq, at, ...(wall !== undefined ? { wall } : {}) },
      pauseCount: seq,
      checkpoint: { status: 'paused', at },
    },
    events: [{ type: 'run_paused', data: { reason, interaction_id: '', wall, seq } }],
  });
}

export async function resumeRun(ctx: RunsContext, caller: Caller, runId: string): Promise<Run> {
  const run = await loadRun(ctx, caller, runId);
  return applyTransition(ctx, run, 'resume', {
    set: { checkpoint: { status: 'running', at: ctx.now() } },
    events: [{ type: 'run_resumed', data: { reason: run.pause?.reason } }],
  });
}
