// Answering the interaction a run waits on, which resumes the run.
import { NotFoundError } from '../domain/errors';
import { interactionClaimKeys, runWaitsOn } from '../domain/interaction';
import type { Run } from '../domain/run';
import { IllegalTransitionError } from '../domain/runStatus';
import type { Interaction } from '../store/interactions';
import { loadRun, type Caller, type RunsContext } from './context';
import { applyTransition, repairLastTransition } from './transition';

/**
 * Answers the interaction the run waits on. Safe to retry: the answer is stored first, then the run resumes
 * (its run_resumed event under an id derived from the interaction, then the status). When a store write
 * after the answer failed (Mongo restarting), the client's retry finds the interaction answered and the run
 * still paused on it, and finishes the transition instead of refusing, so the run cannot be left waiting
 * forever on a question that was answered. A different answer is still refused (409) — after resuming the
 * run on the answer that was stored first — and so is any answer once the run has moved on, except the
 * repeat of the very answer that resumed it (a retry whose first try succeeded unseen): that returns the run.
 */
export async function answerInteraction(
  ctx: RunsContext,
  caller: Caller,
  runId: string,
  interactionId: string,
  answer: string,
): Promise<Run> {
  const run = await loadRun(ctx, caller, runId);
  const interaction = await ctx.interactions.get(runId, interactionId);
  if (!interaction) throw new NotFoundError('interaction not found');
  if (!runWaitsOn(run, interactionId)) return answerNotWaitedOn(ctx, run, interactionId, interaction, answer);
  let stored = { answer, answeredBy: caller.userId, at: ctx.now() };
  const recordedHere = await ctx.interactions.recordAnswer(interactionId, answer, stored.at, caller.userId);
  if (!recordedHere) {
    const current = await ctx.interactions.get(runId, interactionId);
    if (current?.status !== 'answered' || current.answer === undefined)
      throw new IllegalTransitionError('the interaction cannot be answered');
    stored = {
      answer: current.answer,
      answeredBy: current.answeredBy ?? '',
      at: current.answeredAt ?? stored.at,
    };
  }
  const resumed = await resumeOnAnswer(ctx, run, interactionId).catch(async (err: unknown) => {
    // The run moved on another way first (cancelled, failed): the answer is refused, so it is not kept either, or
    // the sweep would close the question everywhere as answered by someone told 409.
    if (recordedHere && err instanceof IllegalTransitionError)
      await ctx.interactions
        .withdrawAnswer(interactionId, interaction.status, stored.at, caller.userId)
        .catch((withdrawErr: unknown) =>
          ctx.onEmitError?.(
            run._id,
            new Error(`a refused answer was not taken back: ${String(withdrawErr)}`),
          ),
        );
    throw err;
  });
  if (recordedHere) ctx.metrics?.pauseAnswered(interaction.createdAt, stored.at);
  await closeEverywhere(ctx, run, interactionId, stored);
  if (stored.answer !== answer) throw new IllegalTransitionError('the interaction was already answered');
  return resumed;
}

/**
 * The interaction's workflow learns of the answer: it stops the ladder and closes the question on every device.
 * Safe to repeat (its claim); a signal that failed never fails the answer: the sweep replays the close.
 */
async function closeEverywhere(
  ctx: RunsContext,
  run: Run,
  interactionId: string,
  stored: { answeredBy: string; at: Date },
): Promise<void> {
  try {
    await ctx.interactionSignals?.answered(
      { runId: run._id, teamId: run.teamId, interactionId },
      { answeredBy: stored.answeredBy, at: stored.at.toISOString() },
    );
  } catch (err) {
    ctx.onEmitError?.(run._id, err);
  }
}

/** An answer to an interaction the run no longer waits on: the repeat of the answer that resumed it, or a 409. */
async function answerNotWaitedOn(
  ctx: RunsContext,
  run: Run,
  interactionId: string,
  interaction: Interaction,
  answer: string,
): Promise<Run> {
  const resumedOnThisInteraction =
    run.status === 'running' &&
    run.pause?.interactionId === interactionId &&
    interaction.status === 'answered';
  if (resumedOnThisInteraction && interaction.answer === answer) {
    await repairLastTransition(ctx, run); // the first try may have died after the status write
    // Closed already: a signal would only start the question's finished workflow anew, on every repeat.
    if (!(await ctx.claims.wasDelivered(interactionClaimKeys.answered(interactionId))))
      await closeEverywhere(ctx, run, interactionId, {
        answeredBy: interaction.answeredBy ?? '',
        at: interaction.answeredAt ?? ctx.now(),
      });
    return run;
  }
  if (resumedOnThisInteraction) {
    await repairLastTransition(ctx, run);
    throw new IllegalTransitionError('the interaction was already answered');
  }
  throw new IllegalTransitionError('the run is not waiting on this interaction');
}

/**
 * The second half of answer, idempotent: a retry (or a concurrent answerer) finishing the same transition
 * writes no second run_resumed, and losing the status write to it is not a conflict.
 */
async function resumeOnAnswer(ctx: RunsContext, run: Run, interactionId: string): Promise<Run> {
  const at = ctx.now();
  const item = { type: 'run_resumed', data: { interaction_id: interactionId } };
  try {
    return await applyTransition(ctx, run, 'answer', {
      set: { checkpoint: { status: 'running', at } },
      events: [item],
    });
  } catch (err) {
    if (!(err instanceof IllegalTransitionError)) throw err;
    const current = await ctx.runs.getById(run._id);
    if (current?.status === 'running' && current.pause?.interactionId === interactionId) {
      await repairLastTransition(ctx, current);
      return current;
    }
    throw err;
  }
}
