// Assistant watches: an assistant standing by on a run (the standby veto reads them).
import Router from '@koa/router';
import { NotFoundError } from '../../domain/errors';
import type { RunStore } from '../../store/runs';
import type { WatchStore } from '../../store/watches';
import type { AuthState } from '../auth';
import { watchParams } from '../schemas';
import { validate } from '../validate';

export function watchesRouter(deps: { runs: RunStore; watches: WatchStore; now: () => Date }) {
  const router = new Router<AuthState>({ prefix: '/api/v1/assistants/:assistantId/watches' });

  const activate = validate({
    summary: 'an assistant stands by on a run (the standby veto)',
    params: watchParams,
  });
  router.put('/:runId', activate, async (ctx) => {
    const { assistantId, runId } = ctx.state.input.params;
    const { teamId } = ctx.state.caller;
    if (!(await deps.runs.getForTeam(teamId, runId))) throw new NotFoundError('run not found');
    await deps.watches.activate(teamId, assistantId, runId, deps.now());
    ctx.body = { assistantId, runId, active: true };
  });

  const remove = validate({
    summary: "ends an assistant's watch on a run",
    params: watchParams,
    success: 204,
  });
  router.delete('/:runId', remove, async (ctx) => {
    const { assistantId, runId } = ctx.state.input.params;
    if (!(await deps.watches.remove(ctx.state.caller.teamId, assistantId, runId))) {
      throw new NotFoundError('watch not found');
    }
    ctx.status = 204;
  });

  return router;
}
