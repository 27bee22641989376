// Every callback route: a run's (a test ping, a secret rotation, the redelivery of a settled episode) and the team's
// as a whole (recover every callback that gave up in a window, one recover per team at a time, workflows/recover.ts,
// and its progress). Each outbound send is bounded by a rate limit before it starts.
import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { RecoverInput } from '../../contract/workflows';
import type { CallbackTestResult } from '../../delivery/callback/send';
import { teamRedeliveryBudgetKey } from '../../domain/callback';
import { NotFoundError } from '../../domain/errors';
import type { Run } from '../../domain/run';
import type { RunsService } from '../../runs/service';
import type { CallbackRecoverStore } from '../../store/callback/recovers';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import type { AuthState } from '../auth';
import { CLAIM_RETENTION_SECONDS } from '../../domain/outcome';
import { testPingBounds } from './testPings';
import type { EpisodeView } from '../episodesView';
import { HttpError } from '../../platform/http/httpErrors';
import { rateLimiter, type Admitted, type RateLimiter } from '../../platform/http/rateLimit';
import { episodeParams, recoverBody, recoverParams, runParams } from '../schemas';
import type { RunState } from './loadRun';
import { validate, type HandlerContext } from '../../platform/http/validate';

/** The widest window one recover may cover. */
export const RECOVER_MAX_WINDOW_DAYS = 14;

export interface CallbacksRouterDeps {
  runsService: RunsService;
  episodes: EpisodeView;
  /** Sends the launcher's test ping (one signed run.test event) to the run's callback URL. */
  testCallback: (run: CallbackRun) => Promise<CallbackTestResult>;
  /** Test pings per run, user and team: each is an outbound POST the caller chooses the moment of. */
  callbackTestLimits: PerRunUserTeam;
  /** Secret rotations per run: each one cuts the previous secret's overlap short. */
  callbackRotateLimit: RateLimit;
  /** Starts a redelivery of an episode's callback; false while one of that episode is running. */
  redeliverCallback: (input: {
    runId: string;
    teamId: string;
    episodeId: string;
    seenAttempts?: number;
  }) => Promise<boolean>;
  /** Redeliveries per run, user and team: outbound POSTs too. */
  callbackRedeliverLimits: PerRunUserTeam;
  /** Writes an episode's expired callback claim again, settled (`expired`): a redelivery asks for a settled one. */
  restoreExpiredClaim: (episodeId: string) => Promise<void>;
  /**
   * Takes over an episode's stale callback claim (pending past its grace, its holder gone) and settles it given up,
   * so a redelivery (which asks for a settled one) goes; false when another took it first.
   */
  settleAbandonedClaim: (episodeId: string) => Promise<boolean>;
  callbackRecovers: CallbackRecoverStore;
  /** Starts the team's recover workflow; false while one of the team is running. */
  startRecover: (input: RecoverInput) => Promise<boolean>;
  rateLimits: RateLimitStore;
  /** Recovers per team: each may send every callback the team's receivers missed. */
  recoverLimit: RateLimit;
  /**
   * What one recover may send (CALLBACK_RECOVER_MAX), how recent a re-send it skips
   * (CALLBACK_RECOVER_RESEND_AFTER_SECONDS) and its redeliveries' attempt time: fixed in its input when it starts.
   */
  recoverBounds: Pick<RecoverInput, 'maxSends' | 'resendAfterSeconds' | 'attemptSeconds'>;
  now: () => Date;
  log: (line: string) => void;
}

/** One bound per run, per user (across the runs of a user) and per team (across the runs of a team). */
export interface PerRunUserTeam {
  perRun: RateLimit;
  perUser: RateLimit;
  perTeam: RateLimit;
}

type CallbackRoutes = Router<AuthState>;

export function callbacksRouter(deps: CallbacksRouterDeps) {
  const router: CallbackRoutes = new Router<AuthState>({ prefix: '/api/v1' });
  const rateLimit = rateLimiter(deps.rateLimits, deps.now);
  addRunCallbackRoutes(router, deps, rateLimit);
  addRecoverRoutes(router, deps, rateLimit);
  return router;
}

/** An action's bounds on one run, one user and one team (`<action>|<run>`, `<action>-user|<user>`, the team's key). */
function perRunUserTeam(
  limits: PerRunUserTeam,
  action: string,
  noun: string,
  teamKey = (teamId: string) => `${action}-team|${teamId}`,
) {
  return ({ run, caller }: RunState) => [
    { key: `${action}|${run._id}`, rule: limits.perRun, what: `${noun} for this run` },
    { key: `${action}-user|${caller.userId}`, rule: limits.perUser, what: `${noun} from this user` },
    { key: teamKey(run.teamId), rule: limits.perTeam, what: `${noun} from this team` },
  ];
}

/** The run's callback: a test ping, a secret rotation, a redelivery. */
function addRunCallbackRoutes(
  router: CallbackRoutes,
  deps: CallbacksRouterDeps,
  rateLimit: RateLimiter,
): void {
  const { runsService } = deps;
  const loadCallbackRun = callbackRunLoader(runsService);
  const testCallback = validate({
    summary:
      "sends one signed run.test event to the run's callback URL; answers the receiver's status or why not",
    params: runParams,
  });
  const testPings = rateLimit(({ run, caller }: CallbackRunState) => [
    {
      key: `callback-test|${run._id}`,
      rule: deps.callbackTestLimits.perRun,
      what: 'test pings for this run',
    },
    ...testPingBounds(deps.callbackTestLimits, caller),
  ]);
  router.post(
    '/runs/:id/callback/test',
    testCallback,
    loadCallbackRun,
    testPings,
    async (ctx: HandlerContext<typeof testCallback, CallbackRunState & Admitted>) => {
      ctx.body = await deps.testCallback(ctx.state.run);
    },
  );

  const rotateSecret = validate({
    summary:
      "replaces the run's callback secret and shows the new one this once (the run's owner or a team admin, 403 " +
      'otherwise); for CALLBACK_SECRET_OVERLAP_SECONDS callbacks carry a signature with each secret, then with the ' +
      'new one only (409 without a callback)',
    params: runParams,
  });
  // Whoever holds the secret can sign as us to the launcher's receiver: a teammate may ping or redeliver, not hold it.
  const ownerOrAdmin: Middleware<CallbackRunState> = async (ctx, next) => {
    const { caller, run } = ctx.state;
    if (caller.userId !== run.ownerId && !caller.admin)
      throw new HttpError(403, "only the run's owner or a team admin may rotate its callback secret");
    await next();
  };
  const rotations = rateLimit(({ run }: CallbackRunState) => [
    {
      key: `callback-rotate|${run._id}`,
      rule: deps.callbackRotateLimit,
      what: 'secret rotations for this run',
    },
  ]);
  router.post(
    '/runs/:id/callback/rotate-secret',
    rotateSecret,
    loadCallbackRun,
    ownerOrAdmin,
    rotations,
    async (ctx: HandlerContext<typeof rotateSecret, CallbackRunState & Admitted>) => {
      const { caller, run, admission } = ctx.state;
      // Nothing rotated: the slot goes back.
      ctx.body = {
        secret: await admission.releaseIfFails(() => runsService.rotateCallbackSecret(caller, run._id)),
      };
    },
  );

  const redeliver = validate({
    summary:
      "sends an episode's callback again, delivered or not: the same webhook-id, a fresh timestamp and signature " +
      '(202; 409 while a delivery of the episode is in progress or before one has settled)',
    params: episodeParams,
    success: 202,
  });
  const redeliveries = rateLimit(
    perRunUserTeam(
      deps.callbackRedeliverLimits,
      'callback-redeliver',
      'redeliveries',
      teamRedeliveryBudgetKey,
    ),
  );
  router.post(
    '/runs/:id/episodes/:episodeId/callback/redeliver',
    redeliver,
    settledEpisode(deps),
    redeliveries,
    async (ctx: HandlerContext<typeof redeliver, SettledEpisodeState & Admitted>) => {
      const { run, seenAttempts, admission } = ctx.state;
      const { episodeId } = ctx.state.input.params;
      // Nothing was sent: the slots go back.
      const started = await admission.releaseIfFails(async () => {
        if (ctx.state.claimExpired) await deps.restoreExpiredClaim(episodeId);
        if (ctx.state.claimAbandoned && !(await deps.settleAbandonedClaim(episodeId))) return false;
        return deps.redeliverCallback({ runId: run._id, teamId: run.teamId, episodeId, seenAttempts });
      });
      if (!started) {
        await admission.release();
        throw new HttpError(409, 'a delivery of this episode is in progress');
      }
      ctx.status = 202;
      ctx.body = { episodeId, webhookId: episodeId };
    },
  );
}

/** The team's recover and its progress. */
function addRecoverRoutes(router: CallbackRoutes, deps: CallbacksRouterDeps, rateLimit: RateLimiter): void {
  const recover = validate({
    summary:
      "redelivers every callback of the caller's team that gave up in [since, until) (at most 14 days; until " +
      'defaults to now) and was not re-sent lately: the same webhook-id, a fresh signature, each send taken from ' +
      "the team's redelivery budget, at most CALLBACK_RECOVER_MAX (202 {id}; 409 while a recover of the team runs)",
    body: recoverBody,
    success: 202,
    examples: [
      { since: '2026-12-01T08:00:00Z' },
      { since: '2026-12-01T08:00:00Z', until: '2026-12-01T12:00:00Z' },
    ],
  });
  const recovers = rateLimit(({ caller }: AuthState) => [
    {
      key: `callback-recover-team|${caller.teamId}`,
      rule: deps.recoverLimit,
      what: 'recovers from this team',
    },
  ]);
  router.post(
    '/callbacks/recover',
    recover,
    recoverWindow(deps.now),
    recovers,
    async (ctx: HandlerContext<typeof recover, RecoverWindowState & Admitted>) => {
      const { caller, window, admission } = ctx.state;
      const id = `rec_${randomUUID()}`;
      // Nothing started: the slot goes back.
      const started = await admission.releaseIfFails(() =>
        deps.startRecover({
          recoverId: id,
          teamId: caller.teamId,
          since: window.since.toISOString(),
          until: window.until.toISOString(),
          ...deps.recoverBounds,
        }),
      );
      if (!started) {
        await admission.release();
        throw new HttpError(409, 'a recover of this team is running');
      }
      // Its row, so GET answers as soon as the id is out. The workflow writes it too, so one that fails here loses
      // nothing: the id is answered all the same (a retry would only meet the running recover's 409).
      await deps.callbackRecovers
        .open({ id, teamId: caller.teamId, ...window }, deps.now())
        .catch((err: unknown) => deps.log(`recover ${id}: its row left to its workflow: ${String(err)}`));
      ctx.status = 202;
      ctx.body = { id };
    },
  );

  const progress = validate({
    summary:
      "a recover of the caller's team: running or completed; found, skipped (re-sent lately), sent, delivered, " +
      "failed, held (the team's breaker open: nothing sent), stoppedAtMax, and while it waits for the team's " +
      'redelivery budget, waitingForBudgetUntil',
    params: recoverParams,
  });
  router.get('/callbacks/recover/:id', progress, async (ctx) => {
    const row = await deps.callbackRecovers.getForTeam(ctx.state.caller.teamId, ctx.state.input.params.id);
    if (!row) throw new NotFoundError('recover not found');
    // Rows written before skipped, held and stoppedAtMax existed read as none.
    ctx.body = {
      id: row._id,
      status: row.status,
      since: row.since.toISOString(),
      until: row.until.toISOString(),
      found: row.found,
      skipped: row.skipped ?? 0,
      sent: row.sent,
      delivered: row.delivered,
      failed: row.failed,
      held: row.held ?? 0,
      stoppedAtMax: row.stoppedAtMax ?? false,
      ...(row.status === 'running' && row.waitingForBudgetUntil
        ? { waitingForBudgetUntil: row.waitingForBudgetUntil.toISOString() }
        : {}),
    };
  });
}

/** The caller's run named by :id, refused with 409 when it has no callback URL. */
function callbackRunLoader(
  runsService: Pick<RunsService, 'get'>,
): Middleware<CallbackRunState & { input: { params: { id: string } } }> {
  return async (ctx, next) => {
    const run = await runsService.get(ctx.state.caller, ctx.state.input.params.id);
    const { callback } = run;
    if (!callback) throw new HttpError(409, 'the run has no callback URL');
    ctx.state.run = { ...run, callback };
    await next();
  };
}

type CallbackRun = Run & { callback: NonNullable<Run['callback']> };

interface CallbackRunState extends AuthState {
  run: CallbackRun;
}

interface SettledEpisodeState extends RunState {
  /** The episode's callback attempts logged before this redelivery. */
  seenAttempts: number;
  /** Its claim expired (kept 30 days after it settled): written again before the redelivery starts. */
  claimExpired?: boolean;
  /** Its claim is pending past its grace, its holder gone: settled given up before the redelivery starts. */
  claimAbandoned?: boolean;
}

/** The caller's run and one of its episodes whose callback delivery has settled (delivered or gave up). */
function settledEpisode(
  deps: Pick<CallbacksRouterDeps, 'runsService' | 'episodes' | 'now'>,
): Middleware<SettledEpisodeState & { input: { params: { id: string; episodeId: string } } }> {
  return async (ctx, next) => {
    const { id, episodeId } = ctx.state.input.params;
    const run = await deps.runsService.get(ctx.state.caller, id);
    const claim = await deps.episodes.callbackClaim(run.teamId, run._id, episodeId);
    if (!claim) throw new NotFoundError('no such episode of this run');
    if (!run.callback) throw new HttpError(409, 'the run has no callback URL');
    // The episode's own schedule holds its claim pending; absent: no delivery was owed, or it was released and
    // the sweep replays it. A settled one, delivered or gave up, may be delivered again (the workflow checks again,
    // and leaves a delivered claim as it is).
    // A stale one's holder is gone (its schedule stopped, its release lost in a store outage at the end of its day):
    // nothing else settles it once its run is past the sweep's reach, so it is settled given up and redelivered.
    // It is settled once the request is admitted: one the rate limits refuse writes nothing.
    if (claim.state === 'pending') {
      if (!claim.stale) throw new HttpError(409, 'a delivery of this episode is in progress');
      ctx.state.claimAbandoned = true;
    }
    if (claim.state === 'absent') {
      // Recorded longer ago than claims are kept: its delivery settled long since and the claim expired. Once
      // admitted, it is written again, settled, so the redelivery (which asks for a settled claim) goes.
      const expired =
        claim.owedCallbackAt &&
        claim.owedCallbackAt.getTime() < deps.now().getTime() - CLAIM_RETENTION_SECONDS * 1000;
      if (!expired) throw new HttpError(409, 'no delivery of this episode has settled yet');
      ctx.state.claimExpired = true;
    }
    ctx.state.run = run;
    // The attempts logged so far: a redelivery in flight now logs one more before it ends, and a start that lands
    // after it ended then sends nothing (workflows/redeliver.ts).
    ctx.state.seenAttempts = await deps.episodes.callbackAttemptCount(episodeId);
    await next();
  };
}

export interface RecoverWindowState extends AuthState {
  window: { since: Date; until: Date };
}

/** The window a recover covers: in the past, not empty, at most RECOVER_MAX_WINDOW_DAYS (until defaults to now). */
export function recoverWindow(
  now: () => Date,
): Middleware<RecoverWindowState & { input: { body: { since: Date; until?: Date } } }> {
  return async (ctx, next) => {
    const at = now();
    const { since } = ctx.state.input.body;
    const until = ctx.state.input.body.until ?? at;
    if (since.getTime() > at.getTime()) throw new HttpError(400, 'since must not be in the future');
    if (since.getTime() >= until.getTime()) throw new HttpError(400, 'since must be before until');
    if (until.getTime() - since.getTime() > RECOVER_MAX_WINDOW_DAYS * 86_400_000)
      throw new HttpError(400, `the window must be at most ${RECOVER_MAX_WINDOW_DAYS} days`);
    ctx.state.window = { since, until };
    await next();
  };
}
