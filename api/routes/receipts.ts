// What a device's service worker saw of a push: shown, clicked, the action taken. No session: the receipt token the
// push carried names the (episode, person, device) it is about, and it can only ever set a time once.
import Router from '@koa/router';
import { GoneError, NotFoundError } from '../../domain/errors';
import type { Metrics } from '../../platform/metrics';
import { addressKey } from '../../platform/http/clientAddress';
import { rateLimiter, type Admitted } from '../../platform/http/rateLimit';
import { validate, type HandlerContext } from '../../platform/http/validate';
import { hashActionToken } from '../../store/actionTokens';
import type { PushReceiptStore } from '../../store/push/receipts';
import { RECEIPT_RETENTION_SECONDS } from '../../store/push/receipts';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import { receiptBody } from '../pushSchemas';

export interface ReceiptsRouterDeps {
  receipts: PushReceiptStore;
  rateLimits: RateLimitStore;
  /** Receipts per client address: no caller to count by, and each is a token lookup. */
  receiptLimit: RateLimit;
  metrics?: Pick<Metrics, 'pauseFirstShown'>;
  now: () => Date;
}

export function receiptsRouter(deps: ReceiptsRouterDeps) {
  const router = new Router({ prefix: '/api/v1/notifications' });
  const rateLimit = rateLimiter(deps.rateLimits, deps.now);
  const receipt = validate({
    summary:
      'what a service worker saw of a push, without a session: the receipt token from the push payload and the ' +
      'event (shown, clicked, or action with the action taken); each is recorded once, a repeat changes nothing ' +
      '(204 both); past its week 410, unknown 404',
    body: receiptBody,
    examples: [
      { token: 'Hq0n3Jm2vX0bq3S9Jd3lqk1mW8yX2cVtZp4uR7sN5aE', event: 'shown' },
      { token: 'Hq0n3Jm2vX0bq3S9Jd3lqk1mW8yX2cVtZp4uR7sN5aE', event: 'action', action: 'approve' },
    ],
  });
  const perAddress = rateLimit((_state, { ip }) => [
    { key: `push-receipt|${addressKey(ip)}`, rule: deps.receiptLimit, what: 'receipts from this address' },
  ]);
  router.post('/receipts', receipt, perAddress, async (ctx: HandlerContext<typeof receipt, Admitted>) => {
    const { token, event, action } = ctx.state.input.body;
    const hash = hashActionToken(token);
    const row = await deps.receipts.get(hash);
    if (!row) throw new NotFoundError('unknown receipt token');
    const at = deps.now();
    if (row.expiresAt <= at) throw new GoneError('this receipt token has expired');
    const recorded = await deps.receipts.record(hash, event, at, action);
    const firstOfPause = recorded && event === 'shown' && row.pausedAt;
    if (firstOfPause) {
      const expiresAt = new Date(row.expiresAt.getTime() + RECEIPT_RETENTION_SECONDS * 1000);
      if (await deps.receipts.takeFirstShown(row.episodeId, at, expiresAt))
        deps.metrics?.pauseFirstShown(row.pausedAt!, at);
    }
    ctx.status = 204;
  });
  return router;
}
