// Assistant watches: an assistant standing by on a run (the standby veto reads them).
import Router from '@koa/router';
import { ConflictError, NotFoundError } from '../../domain/errors';
import { ASSISTANT_WATCHERS_PER_RUN } from '../../domain/run';
import type { RunStore } from '../../store/runs';
import type { WatchStore } from '../../store/watches';
import type { AuthState } from '../auth';
import { watchParams } from '../schemas';
import { validate } from '../../platform/http/validate';

export interface WatchesRouterDeps {
  runs: RunStore;
  watches: WatchStore;
  /** Starts the run's current episode again (ALLOW_DUPLICATE): a pause the watch vetoed is pushed now. */
  replayOutcome: (runId: string, teamId: string) => Promise<unknown>;
  now: () => Date;
}

export function watchesRouter(deps: WatchesRouterDeps) {
  const router = new Router<AuthState>({ prefix: '/api/v1/assistants/:assistantId/watches' });

  /**
   * The run's copy of a watch is dropped when its row is gone: a copy without a row would have the sweep take a
   * pause for vetoed while the push does not (a PUT and a DELETE at once can leave one).
   */
  const copyKeptOnlyWithRow = async (teamId: string, assistantId: string, runId: string): Promise<void> => {
    if (!(await deps.watches.exists(teamId, assistantId, runId)))
      await deps.runs.dropWatcher(teamId, runId, assistantId);
  };

  const activate = validate({
    summary: 'an assistant stands by on a run (the standby veto); 409 past 100 assistants on the run',
    params: watchParams,
  });
  router.put('/:runId', activate, async (ctx) => {
    const { assistantId, runId } = ctx.state.input.params;
    const { teamId } = ctx.state.caller;
    const run = await deps.runs.getForTeam(teamId, runId);
    if (!run) throw new NotFoundError('run not found');
    const full = () =>
      new ConflictError(`a run holds at most ${ASSISTANT_WATCHERS_PER_RUN} assistants' watches`);
    const watchers = run.assistantWatchers ?? [];
    if (!watchers.includes(assistantId) && watchers.length >= ASSISTANT_WATCHERS_PER_RUN) throw full();
    // The watch row (the veto's authority) first, then the run's copy the sweep reads: a crash between leaves the
    // old cost (the sweep replays a pause the push still vetoes), never a copy that hides an unvetoed pause.
    await deps.watches.activate(teamId, assistantId, runId, deps.now());
    if (!(await deps.runs.addWatcher(teamId, runId, assistantId, ASSISTANT_WATCHERS_PER_RUN))) {
      // Another watch took the last place meanwhile: this one is not kept.
      await deps.watches.remove(teamId, assistantId, runId);
      throw full();
    }
    // A DELETE between the row and the copy removed the row.
    await copyKeptOnlyWithRow(teamId, assistantId, runId);
    ctx.body = { assistantId, runId, active: true };
  });

  const remove = validate({
    summary: "ends an assistant's watch on a run; a pause it vetoed is pushed now",
    params: watchParams,
    success: 204,
  });
  router.delete('/:runId', remove, async (ctx) => {
    const { assistantId, runId } = ctx.state.input.params;
    const { teamId } = ctx.state.caller;
    // Refused before any write: a 404 stores nothing.
    if (!(await deps.watches.exists(teamId, assistantId, runId))) throw new NotFoundError('watch not found');
    // The run's copy goes first: a crash before the row is removed leaves the old cost (the sweep replays a pause
    // the push still vetoes), never a stale veto that would keep the pause from ever being pushed.
    const paused = await deps.runs.removeWatcher(teamId, runId, assistantId, deps.now());
    await deps.watches.remove(teamId, assistantId, runId); // gone already: a concurrent DELETE, same end
    // A PUT between the copy and the row put the copy back, and its row went with ours.
    await copyKeptOnlyWithRow(teamId, assistantId, runId);
    // A pause this watch vetoed is pushed now, once (its claim dedups); still vetoed (another watch) it costs one
    // workflow. If the start fails, the sweep replays it: the run was touched into its window.
    if (paused) await deps.replayOutcome(runId, teamId).catch(() => undefined);
    ctx.status = 204;
  });

  return router;
}
