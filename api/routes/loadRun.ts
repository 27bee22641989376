// The caller's run named by the path's :id, loaded ahead of the checks that read it (a rate limit's keys, whether it
// has a callback): an unknown run, or another team's, answers 404 before anything is counted.
import type { Middleware } from 'koa';
import type { Run } from '../../domain/run';
import type { RunsService } from '../../runs/service';
import type { AuthState } from '../auth';

export interface RunState extends AuthState {
  run: Run;
}

export function runLoader(
  runsService: Pick<RunsService, 'get'>,
): Middleware<RunState & { input: { params: { id: string } } }> {
  return async (ctx, next) => {
    ctx.state.run = await runsService.get(ctx.state.caller, ctx.state.input.params.id);
    await next();
  };
}
