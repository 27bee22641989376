// The team's endpoints: the systems it runs that hear about every run of the team, each subscribed to event types.
// Team admins only. The URL passes the outbound guard at registration (and again at every send); the whsec_ secret
// is shown once, at creation and at each rotation.
import { randomBytes } from 'node:crypto';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { CallbackTestResult } from '../../delivery/callback/send';
import type { EndpointTarget } from '../../delivery/endpoint/send';
import { ResolverUnavailableError, TargetRefusedError } from '../../delivery/ssrfGuard';
import { ConflictError, NotFoundError } from '../../domain/errors';
import type { EndpointChange, EndpointRow, EndpointStore, NewEndpoint } from '../../store/endpoint/endpoints';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import { HttpError } from '../../platform/http/httpErrors';
import { rateLimiter, type Admitted } from '../../platform/http/rateLimit';
import { validate, type HandlerContext } from '../../platform/http/validate';
import { requireAdmin, type AuthState } from '../auth';
import { testPingBounds, type TestPingLimits } from './testPings';
import { createEndpointBody, endpointParams, updateEndpointBody } from '../endpointSchemas';
import { attemptSummary } from '../episodesView';
import { endpointAttemptsPage, recoverBody } from '../schemas';
import type { CallbackAttemptRow, CallbackAttemptStore } from '../../store/callback/attempts';
import { encodeCursor } from '../../store/paging';
import { recoverWindow, type RecoverWindowState } from './callbacks';
import { endpointRecoverWorkflowId, type EndpointRecoverInput } from '../../contract/workflows';

export interface EndpointsRouterDeps {
  endpoints: EndpointStore;
  /** The endpoints' attempt log (endpoint_attempts). */
  attempts: Pick<CallbackAttemptStore, 'listForEndpoint'>;
  /** ENDPOINTS_PER_TEAM. */
  perTeam: number;
  /** The outbound guard's verdict on a URL (throws TargetRefusedError or ResolverUnavailableError). */
  checkUrl: (url: string) => Promise<unknown>;
  newSecret: () => string;
  /** Sends one signed endpoint.test event now. */
  testEndpoint: (endpoint: EndpointTarget) => Promise<CallbackTestResult>;
  /** Starts the endpoint's recover (endpointRecoverWorkflow); false while one of the endpoint runs. */
  startRecover: (input: EndpointRecoverInput) => Promise<boolean>;
  /** Recovers per team (CALLBACK_RECOVER_RATE_LIMIT_PER_TEAM), and what one sends at most (CALLBACK_RECOVER_MAX). */
  recoverLimit: RateLimit;
  recoverMaxSends: number;
  /** Test events per endpoint: each is an outbound POST the caller chooses the moment of. */
  testLimit: RateLimit;
  /** The user's and the team's test-ping bounds, shared with the runs' callback tests. */
  testPingLimits: TestPingLimits;
  rateLimits: RateLimitStore;
  now: () => Date;
}

/** What the API shows of an endpoint: never its secret. */
export function endpointView(row: EndpointRow) {
  return {
    id: row._id,
    url: row.url,
    eventTypes: row.eventTypes,
    ...(row.description !== undefined ? { description: row.description } : {}),
    disabled: row.disabled,
    ...(row.disabledReason ? { disabledReason: row.disabledReason } : {}),
    ...(row.rateLimitPerSecond !== undefined ? { rateLimitPerSecond: row.rateLimitPerSecond } : {}),
    format: row.format,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
    ...(row.lastSuccessAt ? { lastSuccessAt: row.lastSuccessAt.toISOString() } : {}),
    ...(row.failingSince ? { failingSince: row.failingSince.toISOString() } : {}),
  };
}

/** What the attempt log shows of one attempt: a callback attempt's fields, the event it sent and its run. */
function endpointAttemptView(row: CallbackAttemptRow, endpointId: string) {
  // The row's key is the delivery's claim key, ep|<event id>|<endpoint id>.
  const eventId = row.episodeId.slice('ep|'.length, -(endpointId.length + 1));
  return { eventId, runId: row.runId, ...attemptSummary(row) };
}

/** The guard's refusal, as a 400 naming its category (never addresses); a resolver without an answer is a 503. */
async function guardUrl(deps: EndpointsRouterDeps, url: string): Promise<void> {
  try {
    await deps.checkUrl(url);
  } catch (err) {
    if (err instanceof TargetRefusedError) throw new HttpError(400, `endpoint url ${err.category}`);
    if (err instanceof ResolverUnavailableError)
      throw new HttpError(503, 'the endpoint url could not be resolved now; try again shortly', {
        'retry-after': '5',
      });
    throw err;
  }
}

interface EndpointState extends AuthState {
  endpoint: EndpointRow;
}

export function endpointsRouter(deps: EndpointsRouterDeps) {
  const router = new Router<AuthState>({ prefix: '/api/v1/endpoints' });
  router.use(requireAdmin("a team's endpoints are managed by its admins"));
  const load = async (teamId: string, id: string): Promise<EndpointRow> => {
    const row = await deps.endpoints.get(teamId, id);
    if (!row) throw new NotFoundError('endpoint not found');
    return row;
  };
  manageEndpoints(router, deps, load);
  operateEndpoints(router, deps, load);
  return router;
}

type LoadEndpoint = (teamId: string, id: string) => Promise<EndpointRow>;

/** Register, list, read, change, remove an endpoint and rotate its secret. */
function manageEndpoints(router: Router<AuthState>, deps: EndpointsRouterDeps, load: LoadEndpoint): void {
  const create = validate({
    summary:
      'registers an endpoint of the team, subscribed to event types; answers its whsec_ secret this once ' +
      '(409 past ENDPOINTS_PER_TEAM; 400 when the outbound guard refuses the URL)',
    body: createEndpointBody,
    success: 201,
    examples: [{ url: 'https://hooks.example.com/flow', eventTypes: ['run.finished', 'run.failed'] }],
  });
  router.post('/', create, async (ctx) => {
    const { caller } = ctx.state;
    const body = ctx.state.input.body;
    await guardUrl(deps, body.url);
    const input: NewEndpoint = {
      _id: `ep_${randomBytes(12).toString('base64url')}`,
      url: body.url,
      eventTypes: body.eventTypes,
      ...(body.description !== undefined ? { description: body.description } : {}),
      disabled: body.disabled ?? false,
      ...(body.rateLimitPerSecond !== undefined ? { rateLimitPerSecond: body.rateLimitPerSecond } : {}),
      format: body.format ?? 'standard',
      secret: deps.newSecret(),
    };
    const row = await deps.endpoints.create(caller.teamId, caller.userId, input, deps.perTeam, deps.now());
    if (!row) throw new HttpError(409, `a team may register at most ${deps.perTeam} endpoints`);
    ctx.status = 201;
    ctx.body = { ...endpointView(row), secret: row.secret };
  });

  router.get('/', validate({ summary: "the team's endpoints (never their secrets)" }), async (ctx) => {
    const rows = await deps.endpoints.listForTeam(ctx.state.caller.teamId);
    ctx.body = { endpoints: rows.map(endpointView) };
  });

  const getOne = validate({ summary: 'one endpoint of the team', params: endpointParams });
  router.get('/:id', getOne, async (ctx) => {
    ctx.body = endpointView(await load(ctx.state.caller.teamId, ctx.state.input.params.id));
  });

  const update = validate({
    summary:
      'changes an endpoint (null clears description or rateLimitPerSecond); enabling it again starts its ' +
      'failure streak over',
    params: endpointParams,
    body: updateEndpointBody,
    examples: [
      { eventTypes: ['run.input_requested', 'run.stalled'], rateLimitPerSecond: 5 },
      { disabled: false },
    ],
  });
  router.patch('/:id', update, async (ctx) => {
    const { teamId } = ctx.state.caller;
    const change: EndpointChange = ctx.state.input.body;
    if (change.url !== undefined) await guardUrl(deps, change.url);
    const row = await deps.endpoints.update(teamId, ctx.state.input.params.id, change, deps.now());
    if (!row) throw new NotFoundError('endpoint not found');
    ctx.body = endpointView(row);
  });

  const remove = validate({ summary: 'removes an endpoint', params: endpointParams, success: 204 });
  router.delete('/:id', remove, async (ctx) => {
    if (!(await deps.endpoints.remove(ctx.state.caller.teamId, ctx.state.input.params.id)))
      throw new NotFoundError('endpoint not found');
    ctx.status = 204;
  });

  const rotate = validate({
    summary:
      "replaces an endpoint's secret and shows the new one this once; for CALLBACK_SECRET_OVERLAP_SECONDS " +
      'events carry a signature with each secret; 409 when another rotation changed it meanwhile',
    params: endpointParams,
  });
  router.post('/:id/rotate-secret', rotate, async (ctx) => {
    const { teamId } = ctx.state.caller;
    const row = await deps.endpoints.rotateSecret(
      teamId,
      ctx.state.input.params.id,
      deps.newSecret(),
      deps.now(),
    );
    if (!row) throw new NotFoundError('endpoint not found');
    if (row === 'conflict') throw new ConflictError('the secret changed while it was rotated; rotate again');
    ctx.body = { secret: row.secret };
  });
}

/** What an endpoint did and what to do about it: its attempt log, a test event, a recover. */
function operateEndpoints(router: Router<AuthState>, deps: EndpointsRouterDeps, load: LoadEndpoint): void {
  const rateLimit = rateLimiter(deps.rateLimits, deps.now);
  const attempts = validate({
    summary:
      "an endpoint's attempt log, newest first, a page at a time, each with the event it sent and its run " +
      "(nextBefore: the next page's before)",
    params: endpointParams,
    query: endpointAttemptsPage,
  });
  router.get('/:id/attempts', attempts, async (ctx) => {
    const row = await load(ctx.state.caller.teamId, ctx.state.input.params.id);
    const { limit, before } = ctx.state.input.query;
    const page = await deps.attempts.listForEndpoint(row._id, limit, before);
    ctx.body = {
      attempts: page.rows.map((attempt) => endpointAttemptView(attempt, row._id)),
      ...(page.next ? { nextBefore: encodeCursor(page.next) } : {}),
    };
  });

  const test = validate({
    summary:
      "sends one endpoint.test event to the endpoint's URL (signed; to a Slack endpoint, an unsigned Slack message); answers the receiver's status or why not",
    params: endpointParams,
  });
  // The caller's endpoint, loaded ahead of the rate limits: an unknown one, or another team's, answers 404 before
  // anything is counted.
  const loaded: Middleware<EndpointState & { input: { params: { id: string } } }> = async (ctx, next) => {
    ctx.state.endpoint = await load(ctx.state.caller.teamId, ctx.state.input.params.id);
    await next();
  };
  const tests = rateLimit(({ endpoint, caller }: EndpointState & AuthState) => [
    { key: `endpoint-test|${endpoint._id}`, rule: deps.testLimit, what: 'test events for this endpoint' },
    ...testPingBounds(deps.testPingLimits, caller),
  ]);
  router.post(
    '/:id/test',
    test,
    loaded,
    tests,
    async (ctx: HandlerContext<typeof test, EndpointState & Admitted>) => {
      ctx.body = await deps.testEndpoint(ctx.state.endpoint);
    },
  );

  const recover = validate({
    summary:
      'sends the endpoint again every event of [since, until) (at most 14 days; until defaults to now) it ' +
      'subscribes to and did not get (its last attempt failed, or it was disabled then), same webhook-id: ' +
      '202 {"id"}; 409 while a recover of the endpoint runs',
    params: endpointParams,
    body: recoverBody,
    success: 202,
    examples: [{ since: '2026-12-01T08:00:00Z' }],
  });
  const recovers = rateLimit(({ caller }: AuthState) => [
    {
      key: `endpoint-recover-team|${caller.teamId}`,
      rule: deps.recoverLimit,
      what: 'endpoint recovers of this team',
    },
  ]);
  router.post(
    '/:id/recover',
    recover,
    recoverWindow(deps.now),
    loaded,
    recovers,
    async (ctx: HandlerContext<typeof recover, EndpointState & Admitted & RecoverWindowState>) => {
      const { caller, window, admission, endpoint: row } = ctx.state;
      const input: EndpointRecoverInput = {
        teamId: caller.teamId,
        endpointId: row._id,
        since: window.since.toISOString(),
        until: window.until.toISOString(),
        maxSends: deps.recoverMaxSends,
      };
      if (!(await admission.releaseIfFails(() => deps.startRecover(input)))) {
        await admission.release();
        throw new HttpError(409, 'a recover of this endpoint is running');
      }
      ctx.status = 202;
      ctx.body = { id: endpointRecoverWorkflowId(row._id) };
    },
  );
}
