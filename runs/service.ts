// The engine operations behind the runs routes. Each one reads the run, asks the status machine whether the
// operation is legal, wins the run's revision (a concurrent operation makes it a 409), writes the status, and
// only then appends the transition's events, lets run health observe them and, when the run paused or ended,
// emits the outcome: a transition that lost leaves nothing behind.
import { randomBytes, randomUUID } from 'node:crypto';
import type { OutcomeEmitter } from '../client/emitter';
import type { HealthSignaler } from '../client/health';
import { NotFoundError } from '../domain/errors';
import type { CallbackEvent, Run, RunError } from '../domain/run';
import {
  IllegalTransitionError,
  isTerminal,
  nextStatus,
  pauseReasonFor,
  type RunOperation,
} from '../domain/runStatus';
import type { EventStore } from '../store/events';
import type { InteractionStore } from '../store/interactions';
import type { RunStore } from '../store/runs';
import type { Page, PageCursor } from '../store/paging';
import type { RunTransition, RunTransitionStore } from '../store/runTransitions';

export interface Caller {
  userId: string;
  teamId: string;
}

export interface NewRun {
  title?: string;
  callback?: { url: string; secret?: string; events?: CallbackEvent[] };
  budget?: { limit: number };
  watchedIssueIds?: string[];
}

export interface RunsServiceDeps {
  runs: RunStore;
  runTransitions: RunTransitionStore;
  events: EventStore;
  interactions: InteractionStore;
  emitter: OutcomeEmitter;
  /** Run health sees every event the engine writes; undefined where no one watches (some tests). */
  health?: HealthSignaler;
  now?: () => Date;
  /** Where an emit or a health signal that failed is reported; the operation itself still succeeds. */
  onEmitError?: (runId: string, err: unknown) => void;
}

/** Event types the engine writes itself; a progress report may not forge them. */
export const RESERVED_EVENT_TYPES = new Set([
  'human_input_requested',
  'run_paused',
  'run_resumed',
  'run_finished',
  'run_failed',
  'run_cancelled',
]);

export function newCallbackSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

const newId = (prefix: string): string => `${prefix}_${randomUUID().replace(/-/g, '')}`;

export type RunsService = ReturnType<typeof createRunsService>;

export function createRunsService(deps: RunsServiceDeps) {
  const now = deps.now ?? (() => new Date());
  const { runs, runTransitions, events, interactions } = deps;

  async function load(caller: Caller, runId: string): Promise<Run> {
    const run = await runs.getForTeam(caller.teamId, runId);
    if (!run) throw new NotFoundError('run not found');
    return run;
  }

  type Item = { type: string; data?: Record<string, unknown> };

  /**
   * The transition, decided on the run as read: its revision is won first (one insert; a concurrent operation
   * makes this a 409 before anything is written), then the status, then the events, health and the outcome.
   */
  async function apply(
    run: Run,
    op: RunOperation,
    set: Partial<Run>,
    items: Item[],
    unset: (keyof Run)[] = [],
    bodyError?: RunError,
    answer?: string,
  ): Promise<Run> {
    const status = nextStatus(run.status, run.pause?.reason, op);
    const at = now();
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
      events: items,
      ...(answer !== undefined ? { answer: newId('ans') } : {}),
      at,
    };
    if (transition.answer !== undefined && answer !== undefined)
      await runs.stageAnswer(run._id, transition.answer, answer);
    if (!(await runTransitions.claim(transition))) {
      if (transition.answer !== undefined) await runs.dropStagedAnswer(run._id, transition.answer);
      await finishStuck(run);
      throw new IllegalTransitionError(`the run changed while ${op.replace('_', '-')} was applied`);
    }
    return complete(run, transition, bodyError, answer);
  }

  /** The transition's fields and events with its answer (kept out of the row) put back. */
  function withAnswer(t: RunTransition, answer: string | undefined) {
    if (t.answer === undefined || answer === undefined) return { set: t.set, items: t.events };
    return {
      set: { ...t.set, finalAnswer: answer },
      items: t.events.map((item) => ({ ...item, data: { ...item.data, finalAnswer: answer } })),
    };
  }

  /** A transition row's answer: staged on the run until the status write, on the run's finalAnswer after it. */
  function answerOf(run: Run, t: RunTransition): string | undefined {
    if (t.answer === undefined) return undefined;
    return run.pendingAnswers?.[t.answer] ?? run.finalAnswer;
  }

  /** Everything after the win; safe to repeat (the status write is filtered on the revision, events have ids). */
  async function complete(run: Run, t: RunTransition, bodyError?: RunError, answer?: string): Promise<Run> {
    // Only this revision's row and the one before it are ever read again.
    await runTransitions.forget(run._id, t.revision - 2);
    const { set, items } = withAnswer(t, answer);
    const unset: (keyof Run)[] = t.answer !== undefined ? [...t.unset, 'pendingAnswers'] : t.unset;
    const expected = { status: run.status, revision: t.revision };
    const updated = (await runs.transition(run._id, expected, set, unset)) ?? (await runs.getById(run._id));
    if (!updated || (updated.revision ?? 0) <= t.revision)
      throw new IllegalTransitionError('the run changed while the transition was applied');
    if ((updated.revision ?? 0) > t.revision + 1) {
      // The run is two revisions past: this revision's row had been removed and a caller that read the run
      // before then inserted it again. That is no win; nothing of it is written.
      await runTransitions.forget(run._id, t.revision);
      if (t.answer !== undefined) await runs.dropStagedAnswer(run._id, t.answer);
      throw new IllegalTransitionError('the run changed while the transition was applied');
    }
    await writeEvents(run, t, items);
    if (t.status !== 'running') await emit(updated, bodyError);
    return updated;
  }

  async function writeEvents(run: Run, t: RunTransition, items: Item[]): Promise<void> {
    const ids = items.map((item, i) => ({ id: `evt_${run._id}_r${t.revision}_${i}`, ...item }));
    await events.append(run, ids, t.at);
    await observe(run, items);
  }

  /**
   * A revision someone won but whose status write never landed (its writer died): finish it now, so the run
   * is not stuck on a revision nobody can take.
   */
  async function finishStuck(run: Run): Promise<void> {
    const revision = run.revision ?? 0;
    const current = await runs.getById(run._id);
    if (!current || (current.revision ?? 0) !== revision) return;
    const t = await runTransitions.get(run._id, revision);
    if (t && current.status === run.status) await complete(current, t, t.set.error, answerOf(current, t));
  }

  /** Appends events outside a transition (run_started, progress), then lets run health observe them. */
  async function record(run: Run, items: Item[], at: Date) {
    const written = await events.append(run, items, at);
    await observe(run, items);
    return written;
  }

  /** The run's health workflow sees the events; failing to tell it never fails the operation. */
  async function observe(run: Run, items: { type: string; data?: Record<string, unknown> }[]): Promise<void> {
    try {
      await deps.health?.observe(run, items);
    } catch (err) {
      deps.onEmitError?.(run._id, err);
    }
  }

  async function emit(run: Run, bodyError?: RunError): Promise<void> {
    try {
      await deps.emitter.emitRunOutcome(run._id, bodyError);
    } catch (err) {
      deps.onEmitError?.(run._id, err);
    }
  }

  /**
   * The second half of answer, idempotent: a retry (or a concurrent answerer) finishing the same transition
   * writes no second run_resumed, and losing the status write to it is not a conflict.
   */
  async function resumeOnAnswer(run: Run, interactionId: string): Promise<Run> {
    const at = now();
    const item = { type: 'run_resumed', data: { interaction_id: interactionId } };
    try {
      return await apply(run, 'answer', { checkpoint: { status: 'running', at } }, [item]);
    } catch (err) {
      if (!(err instanceof IllegalTransitionError)) throw err;
      const current = await runs.getById(run._id);
      if (current?.status === 'running' && current.pause?.interactionId === interactionId) {
        await repairLast(current);
        return current;
      }
      throw err;
    }
  }

  /**
   * The run's last transition again, minus the status write that landed: its events (by their derived ids) and
   * health. For a retry whose first try wrote the status but died before the rest.
   */
  async function repairLast(run: Run): Promise<void> {
    const revision = run.revision ?? 0;
    if (revision === 0) return;
    const t = await runTransitions.get(run._id, revision - 1);
    if (t) await writeEvents(run, t, withAnswer(t, answerOf(run, t)).items);
  }

  async function pauseWithoutHuman(caller: Caller, runId: string, op: 'park' | 'soft_pause', wall?: string) {
    const run = await load(caller, runId);
    nextStatus(run.status, run.pause?.reason, op);
    const at = now();
    const seq = run.pauseCount + 1;
    const reason = pauseReasonFor(op);
    return apply(
      run,
      op,
      {
        pause: { reason, seq, at, ...(wall !== undefined ? { wall } : {}) },
        pauseCount: seq,
        checkpoint: { status: 'paused', at },
      },
      [{ type: 'run_paused', data: { reason, interaction_id: '', wall, seq } }],
    );
  }

  async function end(
    caller: Caller,
    runId: string,
    op: 'complete' | 'fail' | 'cancel',
    set: Partial<Run>,
    answer?: string,
  ) {
    const run = await load(caller, runId);
    const status = nextStatus(run.status, run.pause?.reason, op);
    const at = now();
    return apply(
      run,
      op,
      { ...set, endedAt: at, checkpoint: { status, at } },
      [{ type: `run_${status}`, data: { ...set } }],
      [],
      set.error,
      answer,
    );
  }

  return {
    get: load,

    /** The caller's team's runs, newest first, a page at a time. */
    async list(caller: Caller, page: { limit: number; before?: PageCursor }): Promise<Page<Run>> {
      return runs.listForTeam(caller.teamId, page.limit, page.before);
    },

    /** Launches a run; returns it with the callback secret, which the caller sees this once. */
    async create(caller: Caller, input: NewRun): Promise<Run> {
      const at = now();
      const run: Run = {
        _id: newId('run'),
        teamId: caller.teamId,
        ownerId: caller.userId,
        title: input.title ?? 'Untitled run',
        status: 'running',
        revision: 0,
        pauseCount: 0,
        watchedIssueIds: input.watchedIssueIds ?? [],
        ...(input.callback
          ? {
              callback: {
                url: input.callback.url,
                secret: input.callback.secret ?? newCallbackSecret(),
                ...(input.callback.events ? { events: input.callback.events } : {}),
              },
            }
          : {}),
        ...(input.budget ? { budget: input.budget } : {}),
        checkpoint: { status: 'running', at },
        createdAt: at,
        updatedAt: at,
      };
      await runs.insert(run);
      await record(run, [{ type: 'run_started' }], at);
      return run;
    },

    /**
     * doPause: writes the interaction, saves the checkpoint together with the paused status in one write, then
     * appends human_input_requested and run_paused.
     */
    async pause(caller: Caller, runId: string, prompt: string): Promise<{ run: Run; interactionId: string }> {
      const run = await load(caller, runId);
      nextStatus(run.status, run.pause?.reason, 'pause'); // refuse before writing anything
      const at = now();
      const interactionId = newId('int');
      const seq = run.pauseCount + 1;
      await interactions.insert({
        _id: interactionId,
        runId,
        teamId: run.teamId,
        prompt,
        status: 'pending',
        createdAt: at,
      });
      let updated: Run;
      try {
        updated = await apply(
          run,
          'pause',
          {
            pause: { reason: 'human_input', seq, interactionId, at },
            pauseCount: seq,
            checkpoint: { status: 'paused', at },
          },
          [
            { type: 'human_input_requested', data: { interaction_id: interactionId, prompt } },
            { type: 'run_paused', data: { reason: 'human_input', interaction_id: interactionId, seq } },
          ],
        );
      } catch (err) {
        await interactions.abandon(interactionId);
        throw err;
      }
      return { run: updated, interactionId };
    },

    /**
     * Answers the interaction the run waits on. Safe to retry: the answer is stored first, then the run resumes
     * (its run_resumed event under an id derived from the interaction, then the status). When a store write
     * after the answer failed (Mongo restarting), the client's retry finds the interaction answered and the run
     * still paused on it, and finishes the transition instead of refusing, so the run cannot be left waiting
     * forever on a question that was answered. A different answer is still refused (409) — after resuming the
     * run on the answer that was stored first — and so is any answer once the run has moved on, except the
     * repeat of the very answer that resumed it (a retry whose first try succeeded unseen): that returns the run.
     */
    async answer(caller: Caller, runId: string, interactionId: string, answer: string): Promise<Run> {
      const run = await load(caller, runId);
      const interaction = await interactions.get(runId, interactionId);
      if (!interaction) throw new NotFoundError('interaction not found');
      const waiting =
        run.status === 'paused' &&
        run.pause?.reason === 'human_input' &&
        run.pause.interactionId === interactionId;
      if (!waiting) {
        const resumedByThisAnswer =
          run.status === 'running' &&
          run.pause?.interactionId === interactionId &&
          interaction.status === 'answered' &&
          interaction.answer === answer;
        if (resumedByThisAnswer) {
          await repairLast(run); // the first try may have died after the status write
          return run;
        }
        const resumedByOtherAnswer =
          run.status === 'running' &&
          run.pause?.interactionId === interactionId &&
          interaction.status === 'answered';
        if (resumedByOtherAnswer) {
          await repairLast(run);
          throw new IllegalTransitionError('the interaction was already answered');
        }
        throw new IllegalTransitionError('the run is not waiting on this interaction');
      }
      let stored = answer;
      if (!(await interactions.recordAnswer(interactionId, answer, now()))) {
        const current = await interactions.get(runId, interactionId);
        if (current?.status !== 'answered' || current.answer === undefined)
          throw new IllegalTransitionError('the interaction cannot be answered');
        stored = current.answer;
      }
      const resumed = await resumeOnAnswer(run, interactionId);
      if (stored !== answer) throw new IllegalTransitionError('the interaction was already answered');
      return resumed;
    },

    park(caller: Caller, runId: string, wall: string): Promise<Run> {
      return pauseWithoutHuman(caller, runId, 'park', wall);
    },

    softPause(caller: Caller, runId: string): Promise<Run> {
      return pauseWithoutHuman(caller, runId, 'soft_pause');
    },

    async resume(caller: Caller, runId: string): Promise<Run> {
      const run = await load(caller, runId);
      return apply(run, 'resume', { checkpoint: { status: 'running', at: now() } }, [
        { type: 'run_resumed', data: { reason: run.pause?.reason } },
      ]);
    },

    complete(caller: Caller, runId: string, finalAnswer: string): Promise<Run> {
      return end(caller, runId, 'complete', {}, finalAnswer);
    },

    fail(caller: Caller, runId: string, error: RunError): Promise<Run> {
      return end(caller, runId, 'fail', { error });
    },

    cancel(caller: Caller, runId: string): Promise<Run> {
      return end(caller, runId, 'cancel', {});
    },

    /** A progress event from the engine (node_started, usage, run_workspace_checkpoint, ...). */
    async recordEvent(caller: Caller, runId: string, type: string, data: Record<string, unknown>) {
      const run = await load(caller, runId);
      if (isTerminal(run.status))
        throw new IllegalTransitionError(`cannot record events on a ${run.status} run`);
      const [event] = await record(run, [{ type, data }], now());
      return event;
    },
  };
}
