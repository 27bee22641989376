// A run's transition: read the run, ask the status machine whether the operation is legal, win the run's
// revision (a concurrent operation makes it a 409), write the status, and only then append the transition's
// events, then let run health observe them and, when the run paused or ended, emit the outcome, side by side: a
// transition that lost leaves nothing behind.
import { isDeepStrictEqual } from 'node:util';
import { listedAnswer, type Run, type RunError } from '../domain/run';
import { IllegalTransitionError, isTerminal, nextStatus, type RunOperation } from '../domain/runStatus';
import type { RunTransition } from '../store/runTransitions';
import { newId, type EventItem, type RunsContext } from './context';
import { observe } from './events';

/** What a transition writes besides the status: fields, events, and what its outcome carries. */
export interface TransitionChange {
  set: Partial<Run>;
  events: EventItem[];
  unset?: (keyof Run)[];
  /** The error the outcome's body carries (a failed run). */
  bodyError?: RunError;
  /** The final answer: staged on the run, not in the transition row. */
  answer?: string;
}

/**
 * The transition, decided on the run as read: its revision is won first (one insert; a concurrent operation
 * makes this a 409 before anything is written), then its answer is staged on the run, then the status, the
 * events, health and the outcome.
 */
export async function applyTransition(
  ctx: RunsContext,
  run: Run,
  op: RunOperation,
  change: TransitionChange,
): Promise<Run> {
  const { set, events, unset = [], bodyError, answer } = change;
  const status = nextStatus(run.status, run.pause?.reason, op);
  const at = ctx.now();
  const revision = run.revision ?? 0;
  const transition: RunTransition = {
    _id: `${run._id}#${revision}`,
    runId: run._id,
    teamId: run.teamId,
    revision,
    op,
    status,
    set: { ...set, status, updatedAt: at },
    unset,
    events,
    ...(answer !== undefined ? { answer: newId('ans') } : {}),
    at,
    open: true,
  };
  const lost = () => new IllegalTransitionError(`the run changed while ${op.replace('_', '-')} was applied`);
  if (!(await ctx.runTransitions.claim(transition))) {
    // A winner that died before staging its answer gave the revision back: it is taken once more.
    if (
      (await finishStuckTransition(ctx, run)) !== 'given-up' ||
      !(await ctx.runTransitions.claim(transition))
    )
      throw lost();
  }
  if (transition.answer !== undefined && answer !== undefined)
    if (!(await ctx.runs.stageAnswer(run._id, revision, transition.answer, answer))) {
      // No win: a revision the run had left (its row removed, inserted again by this caller) or given up.
      await ctx.runTransitions.forget(run._id, revision, transition.answer);
      throw lost();
    }
  return finishTransition(ctx, run, transition, bodyError, answer);
}

/**
 * The run's last transition again, minus the status write that landed: its events (by their derived ids) and
 * health. For a retry whose first try wrote the status but died before the rest (its row still open); one that
 * finished costs the row's read.
 */
export async function repairLastTransition(ctx: RunsContext, run: Run): Promise<void> {
  const revision = run.revision ?? 0;
  if (revision === 0) return;
  const t = await ctx.runTransitions.get(run._id, revision - 1);
  if (t?.open) await writeEvents(ctx, run, t, withAnswer(t, answerOf(run, t)).items);
}

/**
 * Everything after the win of the transition's revision; safe to repeat (the status write is filtered on the
 * revision, events have ids).
 */
async function finishTransition(
  ctx: RunsContext,
  run: Run,
  t: RunTransition,
  bodyError?: RunError,
  answer?: string,
): Promise<Run> {
  const { set, items } = withAnswer(t, answer);
  const unset: (keyof Run)[] = [...t.unset, 'pendingAnswers'];
  const expected = { status: run.status, revision: t.revision };
  const updated =
    (await ctx.runs.transition(run._id, expected, set, unset)) ?? (await ctx.runs.getById(run._id));
  if (!updated || (updated.revision ?? 0) <= t.revision)
    throw new IllegalTransitionError('the run changed while the transition was applied');
  if ((updated.revision ?? 0) > t.revision + 1) {
    // Another request finished this very transition (a loser repairs the winner it finds stalled) and the run moved
    // on since: it was applied, and this caller won it.
    if (await appliedBefore(ctx, run, t, items)) return updated;
    // Otherwise this revision's row had been removed and a caller that read the run before then inserted it
    // again. That is no win; nothing of it is written.
    await ctx.runTransitions.forget(run._id, t.revision);
    throw new IllegalTransitionError('the run changed while the transition was applied');
  }
  await writeEvents(
    ctx,
    run,
    t,
    items,
    t.status !== 'running' ? () => emitOutcome(ctx, updated, bodyError) : undefined,
  );
  return updated;
}

/**
 * A transition's row left open (the sweep finds it): its writer died before the status write and no caller met it
 * since (finished, or given up: a complete whose answer was never staged), or after it, before its events were
 * written or health heard of them (those done again). False when there was nothing to finish.
 */
export async function finishStuck(ctx: RunsContext, runId: string, revision: number): Promise<boolean> {
  const run = await ctx.runs.getById(runId);
  if (run && (run.revision ?? 0) === revision) return (await finishStuckTransition(ctx, run)) !== 'none';
  const t = run && (run.revision ?? 0) > revision ? await ctx.runTransitions.get(runId, revision) : null;
  // A run never moves past an end: such a row is a stale caller's, never won.
  if (run && t?.open && (run.revision ?? 0) > revision + 1 && !isTerminal(t.status)) {
    // Its status write landed (the run moved past it) and its writer died before its events: they are written
    // (by their ids) and health told; no outcome, its pause being over. Its row then goes, two revisions back.
    await writeEvents(ctx, run, t, withAnswer(t, answerOf(run, t)).items);
    await ctx.runTransitions.forget(runId, revision);
    return true;
  }
  if (run && t?.open && t.status === run.status) {
    // Its status write landed and its writer died before the events, or health was not told (the row is settled
    // only after both): the events are written by their ids, health is told, and the outcome goes out once more
    // (its episode's id dedups it).
    const emit = t.status !== 'running' ? () => emitOutcome(ctx, run, t.set.error) : undefined;
    await writeEvents(ctx, run, t, withAnswer(t, answerOf(run, t)).items, emit);
    return true;
  }
  // Finished, its row's settle lost (or its run gone, or moved on since): it is no longer open.
  await ctx.runTransitions.settle(runId, revision);
  return false;
}

/**
 * A revision someone won but whose status write never landed (its writer died): finish it now, so the run
 * is not stuck on a revision nobody can take; or, when it carries an answer its writer never staged, give it
 * up (the row goes, and the revision is free again): a complete is never finished without its answer.
 */
async function finishStuckTransition(ctx: RunsContext, run: Run): Promise<'finished' | 'given-up' | 'none'> {
  const revision = run.revision ?? 0;
  const current = await ctx.runs.getById(run._id);
  if (!current || (current.revision ?? 0) !== revision || current.status !== run.status) return 'none';
  const t = await ctx.runTransitions.get(run._id, revision);
  if (!t) return 'none';
  if (t.answer !== undefined && current.pendingAnswers?.[t.answer] == null) {
    if (await ctx.runs.giveUpAnswer(run._id, revision, t.answer)) {
      // Only the given-up row: a caller that took the revision back first keeps its own.
      await ctx.runTransitions.forget(run._id, revision, t.answer);
      return 'given-up';
    }
    // Staged meanwhile: its writer is alive, and finishes it (as may this caller, below).
    return finishStuckTransition(ctx, run);
  }
  await finishTransition(ctx, current, t, t.set.error, answerOf(current, t));
  return 'finished';
}

/** Whether the revision's first derived event is this transition's own: written by whoever finished it. */
async function appliedBefore(
  ctx: RunsContext,
  run: Run,
  t: RunTransition,
  items: EventItem[],
): Promise<boolean> {
  const [first] = items;
  if (!first) return false;
  const written = await ctx.events.get(run._id, eventIdOf(run, t, 0));
  return written !== null && written.type === first.type && isDeepStrictEqual(written.data, first.data ?? {});
}

/** A transition's events have ids derived from its run and revision: written again, they are the same events. */
const eventIdOf = (run: Run, t: RunTransition, index: number): string =>
  `evt_${run._id}_r${t.revision}_${index}`;

/**
 * The transition's events, then health told of them (and the row settled) and the outcome emitted side by side:
 * under a burst a health signal can take seconds, and the push to whoever the pause waits for must not wait behind
 * it. The events are written first, so whoever hears of the outcome finds them, and the row stays open until they
 * are and health heard of them: a writer dying before, or health not told, leaves it for the sweep (finishStuck).
 * Settled, the row is no longer open and the one two revisions back is gone (only a revision's row and the one
 * before it are ever read again).
 */
async function writeEvents(
  ctx: RunsContext,
  run: Run,
  t: RunTransition,
  items: EventItem[],
  emit?: () => Promise<void>,
): Promise<void> {
  const ids = items.map((item, i) => ({ id: eventIdOf(run, t, i), ...item }));
  await ctx.events.append(run, ids, t.at);
  // A lost resume would leave health paused for good (a paused run never stalls).
  const toldThenSettled = async (): Promise<void> => {
    if (await observe(ctx, run, items, t.at, t.revision))
      await ctx.runTransitions.settle(run._id, t.revision).catch(() => undefined);
  };
  await Promise.all([toldThenSettled(), emit?.()]);
}

/** The transition's fields and events with its answer (kept out of the row) put back. */
function withAnswer(t: RunTransition, answer: string | undefined) {
  if (t.answer === undefined || answer === undefined) return { set: t.set, items: t.events };
  return {
    set: { ...t.set, finalAnswer: answer, listing: listedAnswer(answer) },
    items: t.events.map((item) => ({ ...item, data: { ...item.data, finalAnswer: answer } })),
  };
}

/** A transition row's answer: staged on the run until the status write, on the run's finalAnswer after it. */
function answerOf(run: Run, t: RunTransition): string | undefined {
  if (t.answer === undefined) return undefined;
  return run.pendingAnswers?.[t.answer] ?? run.finalAnswer;
}

/** The run paused or ended: its outcome goes out; failing to emit never fails the operation (the sweep replays it). */
async function emitOutcome(ctx: RunsContext, run: Run, bodyError?: RunError): Promise<void> {
  try {
    await ctx.emitter.emitRunOutcome(run, bodyError);
  } catch (err) {
    ctx.onEmitError?.(run._id, err);
  }
}
