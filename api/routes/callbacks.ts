// The team's callbacks as a whole: recover every callback that gave up in a window (one recover per team at a
// time, workflows/recover.ts), and its progress.
import { randomUUID } from 'node:crypto';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import type { RecoverInput } from '../../contract/workflows';
import { NotFoundError } from '../../domain/errors';
import type { CallbackRecoverStore } from '../../store/callback/recovers';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import type { AuthState } from '../auth';
import { HttpError } from '../../platform/http/httpErrors';
import { rateLimiter, type Admitted } from '../../platform/http/rateLimit';
import { recoverBody, recoverParams } from '../schemas';
import { validate, type HandlerContext } from '../../platform/http/validate';

/** The widest window one recover may cover. */
export const RECOVER_MAX_WINDOW_DAYS = 14;

export interface CallbacksRouterDeps {
  callbackRecovers: CallbackRecoverStore;
  /** Starts the team's recover workflow; false while one of the team is running. */
  startRecover: (input: RecoverInput) => Promise<boolean>;
  rateLimits: RateLimitStore;
  /** Recovers per team: each may send every callback the team's receivers missed. */
  recoverLimit: RateLimit;
  /**
   * What one recover may send (CALLBACK_RECOVER_MAX), and how recent a re-send it skips
   * (CALLBACK_RECOVER_RESEND_AFTER_SECONDS): fixed in its input when it starts.
   */
  recoverBounds: Pick<RecoverInput, 'maxSends' | 'resendAfterSeconds'>;
  now: () => Date;
}

export function callbacksRouter(deps: CallbacksRouterDeps) {
  const router = new Router<AuthState>({ prefix: '/api/v1/callbacks' });
  const rateLimit = rateLimiter(deps.rateLimits, deps.now);

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
    '/recover',
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
      // Its row, so GET answers as soon as the id is out (the workflow writes it too, whichever comes first).
      await deps.callbackRecovers.open({ id, teamId: caller.teamId, ...window }, deps.now());
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
  router.get('/recover/:id', progress, async (ctx) => {
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

  return router;
}

interface RecoverWindowState extends AuthState {
  window: { since: Date; until: Date };
}

/** The window a recover covers: in the past, not empty, at most RECOVER_MAX_WINDOW_DAYS (until defaults to now). */
function recoverWindow(
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
