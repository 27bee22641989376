// The runs routes: the engine surface that drives outcomes (a run's callback routes are in callbacks.ts). Every
// route is team-scoped through the caller.
import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { z } from 'zod';
import { listedRun, publicRun } from '../../domain/run';
import type { RunsService } from '../../runs/service';
import type { EpisodeView } from '../episodesView';
import type { TimelineView } from '../timelineView';
import type { AuthState } from '../auth';
import {
  answerBody,
  completeBody,
  createRunBody,
  episodesPage,
  eventBody,
  failBody,
  interactionParams,
  parkBody,
  pauseBody,
  routeDecisionErrorBody,
  runParams,
  runsPage,
} from '../schemas';
import { encodeCursor } from '../../store/paging';
import { validate, type HandlerContext } from '../../platform/http/validate';
import { rateLimiter, type Admitted, type RateLimiter } from '../../platform/http/rateLimit';
import { runLoader, type RunState } from './loadRun';
import { ConflictError, NotFoundError } from '../../domain/errors';
import type { RouteDecisionError } from '../../domain/ops';
import type { RunHealthStore } from '../../store/runHealth';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import type { EscalationPolicyStore } from '../../store/escalationPolicies';

export interface RunsRouterDeps {
  runsService: RunsService;
  episodes: EpisodeView;
  timeline: TimelineView;
  runHealth: RunHealthStore;
  /** Escalates a router decision error to the operator (notifyOperator). */
  notifyOperator: (report: RouteDecisionError) => Promise<{ episodeKey: string; started: boolean }>;
  /** Each new decision starts a workflow and an operator webhook: bounded per run and per team. */
  rateLimits: RateLimitStore;
  routeErrorLimits: { perRun: RateLimit; perTeam: RateLimit };
  /** Runs per team (RUN_CREATE_RATE_LIMIT): each owes a health workflow, pushes and maybe a callback with its retries. */
  runCreateLimit: RateLimit;
  /** A run's own webhook rungs post to its team's escalation webhookUrl. */
  escalationPolicies: Pick<EscalationPolicyStore, 'get'>;
  now: () => Date;
}

type RunsRoutes = Router<AuthState>;

export function runsRouter(deps: RunsRouterDeps) {
  const router: RunsRoutes = new Router<AuthState>({ prefix: '/api/v1/runs' });
  const rateLimit = rateLimiter(deps.rateLimits, deps.now);
  addLaunchAndReads(router, deps, rateLimit);
  addDecisionErrors(router, deps, rateLimit);
  addTransitions(router, deps);
  return router;
}

/** Launch and the reads. */
function addLaunchAndReads(router: RunsRoutes, deps: RunsRouterDeps, rateLimit: RateLimiter): void {
  const { runsService } = deps;
  const create = validate({
    summary: 'starts a run; a callback secret made here is shown this once',
    body: createRunBody,
    success: 201,
    examples: [
      { title: 'Deploy', callback: { url: 'https://hooks.example.com/flow' }, budget: { limit: 20 } },
      { watchedIssueIds: ['ISSUE-1'] },
    ],
  });
  // Every run counts: each is a health workflow, pushes and possibly a callback owed.
  const runsFromTeam = rateLimit(({ caller }: AuthState) => [
    { key: `run-create|${caller.teamId}`, rule: deps.runCreateLimit, what: 'runs from this team' },
  ]);
  // Checked before the run is counted: a run its team cannot escalate as asked is refused, not made.
  const webhookRungsReachable: Middleware<
    AuthState & { input: { body: z.infer<typeof createRunBody> } }
  > = async (ctx, next) => {
    const rungs = ctx.state.input.body.escalation?.rungs ?? [];
    if (rungs.some((rung) => rung.via === 'webhook')) {
      const policy = await deps.escalationPolicies.get(ctx.state.caller.teamId);
      if (!policy?.webhookUrl)
        throw new ConflictError(
          "a via: webhook rung needs the team's escalation webhookUrl, and it has none",
        );
    }
    await next();
  };
  router.post(
    '/',
    create,
    webhookRungsReachable,
    runsFromTeam,
    async (ctx: HandlerContext<typeof create, AuthState & Admitted>) => {
      const body = ctx.state.input.body;
      // No run, nothing owed: a failed create gives its slot back.
      const run = await ctx.state.admission.releaseIfFails(() => runsService.create(ctx.state.caller, body));
      ctx.status = 201;
      const shown = publicRun(run);
      ctx.body = {
        ...shown,
        // The secret is shown this once, when the caller did not bring its own.
        ...(run.callback && !body.callback?.secret
          ? { callback: { ...(shown.callback as object), secret: run.callback.secret } }
          : {}),
      };
    },
  );

  const list = validate({
    summary:
      "the caller's team's runs, newest first, a page at a time (nextBefore: the next page's before); each final " +
      'answer and error message cut to its first 1,000 characters (finalAnswerTruncated, errorMessageTruncated), ' +
      'without the escalation ladder, watched issues and assistant watchers: all whole on GET /runs/:id',
    query: runsPage,
  });
  router.get('/', list, async (ctx) => {
    const { rows, next } = await runsService.list(ctx.state.caller, ctx.state.input.query);
    ctx.body = { runs: rows.map(listedRun), ...(next ? { nextBefore: encodeCursor(next) } : {}) };
  });

  const getRun = validate({ summary: 'one run (never its callback secret)', params: runParams });
  router.get('/:id', getRun, async (ctx) => {
    ctx.body = publicRun(await runsService.get(ctx.state.caller, ctx.state.input.params.id));
  });

  const episodes = validate({
    summary:
      "the run's outcome episodes, newest first, a page at a time, and per family its claim state, deliveries " +
      "and callback attempts (nextBefore: the next page's before)",
    params: runParams,
    query: episodesPage,
  });
  router.get('/:id/episodes', episodes, async (ctx) => {
    const { id } = ctx.state.input.params;
    await runsService.get(ctx.state.caller, id);
    const { next, ...page } = await deps.episodes.listForRun(
      ctx.state.caller.teamId,
      id,
      ctx.state.input.query,
    );
    ctx.body = { ...page, ...(next ? { nextBefore: encodeCursor(next) } : {}) };
  });

  const timeline = validate({
    summary:
      "the run's pauses as people lived them, oldest first: paused, each device notified (and whether any receipt " +
      'came), shown, clicked, action, each escalation rung sent (via what, to whom), answered (who, with what); ' +
      'the newest 50 pauses',
    params: runParams,
  });
  router.get('/:id/timeline', timeline, async (ctx) => {
    const { id } = ctx.state.input.params;
    ctx.body = await deps.timeline.forRun(await runsService.get(ctx.state.caller, id));
  });

  const health = validate({
    summary: "the run's health twin: phase, current node, spend",
    params: runParams,
  });
  router.get('/:id/health', health, async (ctx) => {
    const { id } = ctx.state.input.params;
    await runsService.get(ctx.state.caller, id);
    const health = await deps.runHealth.getForTeam(ctx.state.caller.teamId, id);
    if (!health)
      throw new NotFoundError('no health recorded for this run (not started yet, or reaped after it ended)');
    // Alerts in hand-off are the workflow's own bookkeeping: they are the operator's once sent.
    const { _id: _runId, handingOff: _handingOff, ...rest } = health;
    ctx.body = rest;
  });
}

/** A router's decision errors: one operator alert per decision, bounded per run and per team. */
function addDecisionErrors(router: RunsRoutes, deps: RunsRouterDeps, rateLimit: RateLimiter): void {
  const loadRun = runLoader(deps.runsService);
  const routeDecisionError = validate({
    summary: 'reports a router decision error: one operator alert per decision',
    params: runParams,
    body: routeDecisionErrorBody,
    success: 202,
    examples: [{ decisionId: 'dec_1', error: { code: 'no_route', message: 'no branch matched' } }],
  });
  // A decision counts once: a retry of the same decisionId is admitted again.
  const decisionErrors = rateLimit(
    ({ run, input }: RunState & { input: { body: { decisionId: string } } }) => [
      {
        key: `rde-run|${run._id}`,
        rule: deps.routeErrorLimits.perRun,
        what: 'route decision errors for this run',
        hitId: input.body.decisionId,
      },
      {
        key: `rde-team|${run.teamId}`,
        rule: deps.routeErrorLimits.perTeam,
        what: 'route decision errors for this team',
        hitId: `${run._id}|${input.body.decisionId}`,
      },
    ],
  );
  router.post(
    '/:id/route-decision-errors',
    routeDecisionError,
    loadRun,
    decisionErrors,
    async (ctx: HandlerContext<typeof routeDecisionError, RunState & Admitted>) => {
      const { run } = ctx.state;
      const { decisionId, error } = ctx.state.input.body;
      ctx.status = 202;
      ctx.body = await deps.notifyOperator({ runId: run._id, teamId: run.teamId, decisionId, error });
    },
  );
}

/** Events and the status transitions. */
function addTransitions(router: RunsRoutes, deps: Pick<RunsRouterDeps, 'runsService'>): void {
  const { runsService } = deps;
  const event = validate({
    summary: 'records a run event; run health reads progress from it (usage carries {"spent": number})',
    params: runParams,
    body: eventBody,
    success: 201,
    examples: [
      { type: 'node_started', node: 'plan' },
      { type: 'usage', spent: 4.2 },
    ],
  });
  router.post('/:id/events', event, async (ctx) => {
    const { type, ...data } = ctx.state.input.body;
    const event = await runsService.recordEvent(ctx.state.caller, ctx.state.input.params.id, type, data);
    ctx.status = 201;
    ctx.body = { id: event._id, type: event.type, at: event.at };
  });

  const pause = validate({
    summary:
      "asks a human: pauses the run and creates an interaction; its choices (at most 3) become the notification's actions",
    params: runParams,
    body: pauseBody,
    examples: [
      { prompt: 'Approve the deploy?' },
      {
        prompt: 'Deploy v2 to production?',
        choices: [
          { id: 'approve', label: 'Approve' },
          { id: 'reject', label: 'Reject' },
        ],
      },
    ],
  });
  router.post('/:id/pause', pause, async (ctx) => {
    const { prompt, choices } = ctx.state.input.body;
    const { run, interactionId } = await runsService.pause(
      ctx.state.caller,
      ctx.state.input.params.id,
      prompt,
      choices,
    );
    ctx.body = { interactionId, run: publicRun(run) };
  });

  const answer = validate({
    summary: 'answers the interaction and resumes the run; the same answer again is 200, another one 409',
    params: interactionParams,
    body: answerBody,
    examples: [{ answer: 'yes' }],
  });
  router.post('/:id/interactions/:iid/answer', answer, async (ctx) => {
    const { id, iid } = ctx.state.input.params;
    ctx.body = publicRun(await runsService.answer(ctx.state.caller, id, iid, ctx.state.input.body.answer));
  });

  const park = validate({
    summary: 'parks the run at a usage cap',
    params: runParams,
    body: parkBody,
    examples: [{ wall: 'daily-tokens' }],
  });
  router.post('/:id/park', park, async (ctx) => {
    const { wall } = ctx.state.input.body;
    ctx.body = publicRun(await runsService.park(ctx.state.caller, ctx.state.input.params.id, wall));
  });

  const softPause = validate({ summary: 'an operator soft-pause (no interaction)', params: runParams });
  router.post('/:id/soft-pause', softPause, async (ctx) => {
    ctx.body = publicRun(await runsService.softPause(ctx.state.caller, ctx.state.input.params.id));
  });

  const resume = validate({ summary: 'resumes a parked or soft-paused run', params: runParams });
  router.post('/:id/resume', resume, async (ctx) => {
    ctx.body = publicRun(await runsService.resume(ctx.state.caller, ctx.state.input.params.id));
  });

  const complete = validate({
    summary: 'finishes the run with its final answer',
    params: runParams,
    body: completeBody,
    examples: [{ finalAnswer: 'Deployed v2.' }],
  });
  router.post('/:id/complete', complete, async (ctx) => {
    const { finalAnswer } = ctx.state.input.body;
    ctx.body = publicRun(
      await runsService.complete(ctx.state.caller, ctx.state.input.params.id, finalAnswer),
    );
  });

  const fail = validate({
    summary: 'fails the run',
    params: runParams,
    body: failBody,
    examples: [{ error: { code: 'tool_error', message: 'the deploy tool timed out' } }],
  });
  router.post('/:id/fail', fail, async (ctx) => {
    const { error } = ctx.state.input.body;
    ctx.body = publicRun(await runsService.fail(ctx.state.caller, ctx.state.input.params.id, error));
  });

  const cancel = validate({ summary: 'cancels the run', params: runParams });
  router.post('/:id/cancel', cancel, async (ctx) => {
    ctx.body = publicRun(await runsService.cancel(ctx.state.caller, ctx.state.input.params.id));
  });
}
