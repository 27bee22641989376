// The runs service behind the runs routes. Every operation that changes a run's status is a transition
// (runs/transition.ts): legal per the status machine, won on the run's revision (a concurrent operation makes
// it a 409), and only then its events, run health and, when the run paused or ended, its outcome.
import type { InteractionChoice } from '../domain/push';
import type { Run, RunError } from '../domain/run';
import type { Page, PageCursor } from '../store/paging';
import { answerInteraction } from './answer';
import { actWithToken } from './answerWithToken';
import { loadRun, runsContext, type Caller, type RunsServiceDeps } from './context';
import { endRun } from './end';
import { pauseForHuman, pauseWithoutHuman, resumeRun } from './pause';
import { createRun, recordProgress, rotateCallbackSecret, type NewRun } from './record';

export type { Caller, RunsServiceDeps } from './context';
export { RESERVED_EVENT_TYPES, newCallbackSecret, type NewRun } from './record';

export type RunsService = ReturnType<typeof createRunsService>;

export function createRunsService(deps: RunsServiceDeps) {
  const ctx = runsContext(deps);
  return {
    get: (caller: Caller, runId: string): Promise<Run> => loadRun(ctx, caller, runId),

    /** The caller's team's runs, newest first, a page at a time. */
    list: (caller: Caller, page: { limit: number; before?: PageCursor }): Promise<Page<Run>> =>
      ctx.runs.listForTeam(caller.teamId, page.limit, page.before),

    /** Launches a run; returns it with the callback secret, which the caller sees this once. */
    create: (caller: Caller, input: NewRun) => createRun(ctx, caller, input),

    /** Pauses the run on a human's input: the interaction, then the paused status, then its events. */
    pause: (caller: Caller, runId: string, prompt: string, choices?: InteractionChoice[]) =>
      pauseForHuman(ctx, caller, runId, prompt, choices),

    /** Answers the interaction the run waits on and resumes it; safe to retry (see runs/answer.ts). */
    answer: (caller: Caller, runId: string, interactionId: string, text: string) =>
      answerInteraction(ctx, caller, runId, interactionId, text),

    /**
     * A notification's action: the token stands for its person and choice, and answers, or snoozes the question
     * (runs/answerWithToken.ts).
     */
    actWithToken: (token: string) => actWithToken(ctx, token),

    park: (caller: Caller, runId: string, wall: string) =>
      pauseWithoutHuman(ctx, caller, runId, 'park', wall),

    softPause: (caller: Caller, runId: string) => pauseWithoutHuman(ctx, caller, runId, 'soft_pause'),

    resume: (caller: Caller, runId: string) => resumeRun(ctx, caller, runId),

    complete: (caller: Caller, runId: string, finalAnswer: string) =>
      endRun(ctx, caller, runId, 'complete', {}, finalAnswer),

    fail: (caller: Caller, runId: string, error: RunError) => endRun(ctx, caller, runId, 'fail', { error }),

    cancel: (caller: Caller, runId: string) => endRun(ctx, caller, runId, 'cancel', {}),

    /** A new callback secret (shown this once); callbacks carry the old one's signature too for a while. */
    rotateCallbackSecret: (caller: Caller, runId: string) => rotateCallbackSecret(ctx, caller, runId),

    /** A progress event from the engine (node_started, usage, run_workspace_checkpoint, ...). */
    recordEvent: (caller: Caller, runId: string, type: string, data: Record<string, unknown>) =>
      recordProgress(ctx, caller, runId, type, data),
  };
}
