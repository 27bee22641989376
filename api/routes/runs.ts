// The runs routes: the engine surface that drives outcomes. Every route is team-scoped through the caller.
import Router from '@koa/router';
import { publicRun } from '../../domain/run';
import type { RunEngine } from '../../engine/runEngine';
import type { EpisodeView } from '../episodesView';
import type { AuthState } from '../auth';
import { HttpError, jsonBody } from '../errors';
import {
  answerBody,
  completeBody,
  createRunBody,
  eventBody,
  failBody,
  idParam,
  parkBody,
  pauseBody,
  routeDecisionErrorBody,
} from '../schemas';
import { NotFoundError } from '../../domain/errors';
import type { RouteDecisionError } from '../../domain/ops';
import type { RunHealthStore } from '../../store/runHealth';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';

export interface RunsRouterDeps {
  engine: RunEngine;
  episodes: EpisodeView;
  runHealth: RunHealthStore;
  /** Escalates a router decision error to the operator (notifyOperator). */
  notifyOperator: (report: RouteDecisionError) => Promise<{ episodeKey: string; started: boolean }>;
  /** Each new decision starts a workflow and an operator webhook: bounded per run and per team. */
  rateLimits: RateLimitStore;
  routeErrorLimits: { perRun: RateLimit; perTeam: RateLimit };
  now: () => Date;
}

export function runsRouter(deps: RunsRouterDeps) {
  const { engine } = deps;
  const router = new Router<AuthState>({ prefix: '/api/v1/runs' });

  router.param('id', async (value, ctx, next) => {
    idParam.parse(value);
    return next();
  });

  router.post('/', async (ctx) => {
    const body = createRunBody.parse(jsonBody(ctx));
    const run = await engine.create(ctx.state.caller, body);
    ctx.status = 201;
    ctx.body = {
      ...publicRun(run),
      // The secret is shown this once, when the caller did not bring its own.
      ...(run.callback && !body.callback?.secret
        ? { callback: { url: run.callback.url, secret: run.callback.secret } }
        : {}),
    };
  });

  router.get('/', async (ctx) => {
    ctx.body = { runs: (await engine.list(ctx.state.caller)).map(publicRun) };
  });

  router.get('/:id', async (ctx) => {
    ctx.body = publicRun(await engine.get(ctx.state.caller, ctx.params.id));
  });

  router.get('/:id/episodes', async (ctx) => {
    await engine.get(ctx.state.caller, ctx.params.id);
    ctx.body = { episodes: await deps.episodes.listForRun(ctx.state.caller.teamId, ctx.params.id) };
  });

  router.get('/:id/health', async (ctx) => {
    await engine.get(ctx.state.caller, ctx.params.id);
    const health = await deps.runHealth.getForTeam(ctx.state.caller.teamId, ctx.params.id);
    if (!health)
      throw new NotFoundError('no health recorded for this run (not started yet, or reaped after it ended)');
    const { _id: _runId, ...rest } = health;
    ctx.body = rest;
  });

  router.post('/:id/route-decision-errors', async (ctx) => {
    const { decisionId, error } = routeDecisionErrorBody.parse(jsonBody(ctx));
    const run = await engine.get(ctx.state.caller, ctx.params.id);
    // A decision counts once (a retry of the same decisionId is admitted again); the team's bound is checked
    // after the run's, and a team refusal gives the run's slot back.
    const now = deps.now();
    const perRun = await deps.rateLimits.hit(
      `rde-run|${run._id}`,
      deps.routeErrorLimits.perRun,
      now,
      decisionId,
    );
    if (!perRun.admitted) throw tooManyRouteErrors('run', perRun.retryAfterSeconds);
    const perTeam = await deps.rateLimits.hit(
      `rde-team|${run.teamId}`,
      deps.routeErrorLimits.perTeam,
      now,
      `${run._id}|${decisionId}`,
    );
    if (!perTeam.admitted) {
      await perRun.release();
      throw tooManyRouteErrors('team', perTeam.retryAfterSeconds);
    }
    ctx.status = 202;
    ctx.body = await deps.notifyOperator({ runId: run._id, teamId: run.teamId, decisionId, error });
  });

  router.post('/:id/events', async (ctx) => {
    const { type, ...data } = eventBody.parse(jsonBody(ctx));
    const event = await engine.recordEvent(ctx.state.caller, ctx.params.id, type, data);
    ctx.status = 201;
    ctx.body = { id: event._id, type: event.type, at: event.at };
  });

  router.post('/:id/pause', async (ctx) => {
    const { prompt } = pauseBody.parse(jsonBody(ctx));
    const { run, interactionId } = await engine.pause(ctx.state.caller, ctx.params.id, prompt);
    ctx.body = { interactionId, run: publicRun(run) };
  });

  router.post('/:id/interactions/:iid/answer', async (ctx) => {
    idParam.parse(ctx.params.iid);
    const { answer } = answerBody.parse(jsonBody(ctx));
    ctx.body = publicRun(await engine.answer(ctx.state.caller, ctx.params.id, ctx.params.iid, answer));
  });

  router.post('/:id/park', async (ctx) => {
    const { wall } = parkBody.parse(jsonBody(ctx));
    ctx.body = publicRun(await engine.park(ctx.state.caller, ctx.params.id, wall));
  });

  router.post('/:id/soft-pause', async (ctx) => {
    ctx.body = publicRun(await engine.softPause(ctx.state.caller, ctx.params.id));
  });

  router.post('/:id/resume', async (ctx) => {
    ctx.body = publicRun(await engine.resume(ctx.state.caller, ctx.params.id));
  });

  router.post('/:id/complete', async (ctx) => {
    const { finalAnswer } = completeBody.parse(jsonBody(ctx));
    ctx.body = publicRun(await engine.complete(ctx.state.caller, ctx.params.id, finalAnswer));
  });

  router.post('/:id/fail', async (ctx) => {
    const { error } = failBody.parse(jsonBody(ctx));
    ctx.body = publicRun(await engine.fail(ctx.state.caller, ctx.params.id, error));
  });

  router.post('/:id/cancel', async (ctx) => {
    ctx.body = publicRun(await engine.cancel(ctx.state.caller, ctx.params.id));
  });

  return router;
}

function tooManyRouteErrors(scope: 'run' | 'team', retryAfterSeconds: number): HttpError {
  return new HttpError(429, `too many route decision errors for this ${scope}; try again later`, {
    'retry-after': String(retryAfterSeconds),
  });
}
