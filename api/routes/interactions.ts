// The interaction routes that answer without a session: a notification's action carries its own single-use token.
import Router from '@koa/router';
import { publicRun } from '../../domain/run';
import type { RunsService } from '../../runs/service';
import { actionBody } from '../schemas';
import { validate, type HandlerContext } from '../../platform/http/validate';
import { addressKey } from '../../platform/http/clientAddress';
import { rateLimiter, type Admitted } from '../../platform/http/rateLimit';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';

export interface InteractionsRouterDeps {
  runsService: Pick<RunsService, 'actWithToken'>;
  rateLimits: RateLimitStore;
  /** Action requests per client address: no caller to count by, and each is a token lookup. */
  actionLimit: RateLimit;
  now: () => Date;
}

export function interactionsRouter(deps: InteractionsRouterDeps) {
  const router = new Router({ prefix: '/api/v1/interactions' });
  const rateLimit = rateLimiter(deps.rateLimits, deps.now);
  const action = validate({
    summary:
      "answers an interaction from a notification's action, without a session: the single-use token from the " +
      'push payload answers with its choice as its person (200, the run), or, a snooze token, pushes the ' +
      'question to its person again an hour later unless answered by then (202 {"snoozedUntil"}); used again or ' +
      'the interaction answered 409, expired 410, unknown 404; its person removed from the team since 403',
    body: actionBody,
    examples: [{ token: 'Hq0n3Jm2vX0bq3S9Jd3lqk1mW8yX2cVtZp4uR7sN5aE' }],
  });
  const perAddress = rateLimit((_state, { ip }) => [
    {
      key: `interaction-action|${addressKey(ip)}`,
      rule: deps.actionLimit,
      what: 'actions from this address',
    },
  ]);
  router.post('/actions', action, perAddress, async (ctx: HandlerContext<typeof action, Admitted>) => {
    const done = await deps.runsService.actWithToken(ctx.state.input.body.token);
    if (done.did === 'snoozed') {
      ctx.status = 202;
      ctx.body = { snoozedUntil: done.until.toISOString() };
    } else ctx.body = publicRun(done.run);
  });
  return router;
}
