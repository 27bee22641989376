// The notification routes: VAPID key, push subscriptions, test push, and the per-user scope. createApp
// registers them only when web push is enabled (a subscription store plus both VAPID keys); a route whose
// store is missing later still answers the seed's 404s.
import Router from '@koa/router';
import { renderTestPush } from '../../domain/push';
import { randomUUID } from 'node:crypto';
import { fanOut } from '../../activities/push';
import type { PushSender } from '../../net/pushSender';
import type { NotificationPrefStore } from '../../store/notificationPrefs';
import type { PushSubscriptionStore } from '../../store/pushSubscriptions';
import type { AuthState } from '../auth';
import { HttpError, jsonBody } from '../errors';
import { parsePrefsBody, parseSubscribeBody, parseUnsubscribeBody, type EndpointRules } from '../pushSchemas';

export interface NotificationRouteDeps {
  vapidPublicKey: string;
  subscriptions?: PushSubscriptionStore;
  prefs?: NotificationPrefStore;
  /** The live sink the test route pushes through (the same code the worker fans out with). */
  sender?: PushSender;
  endpointRules: EndpointRules;
  studioUrl: string;
  now: () => Date;
  log: (line: string) => void;
}

const NOT_CONFIGURED = 'web push is not configured on this server';

/** The test push answers by then with what got through; sends still in flight finish in the background. */
export const TEST_PUSH_DEADLINE_MS = 10_000;

export function notificationsRouter(deps: NotificationRouteDeps) {
  const router = new Router<AuthState>({ prefix: '/api/v1/notifications' });

  const subscriptions = (): PushSubscriptionStore => {
    if (!deps.subscriptions) throw new HttpError(404, NOT_CONFIGURED);
    return deps.subscriptions;
  };
  const prefs = (): NotificationPrefStore => {
    if (!deps.prefs) throw new HttpError(404, 'notification prefs are not available on this server');
    return deps.prefs;
  };

  router.get('/push/vapid-public-key', (ctx) => {
    ctx.body = { publicKey: deps.vapidPublicKey };
  });

  router.post('/push/subscriptions', async (ctx) => {
    const store = subscriptions();
    const subscription = parseSubscribeBody(
      ctx.state.bodyError === undefined ? ctx.request.body : undefined,
      deps.endpointRules,
    );
    const created = await store.upsert(ctx.state.caller, subscription, deps.now());
    ctx.status = created ? 201 : 200;
    ctx.body = { endpoint: subscription.endpoint, created };
  });

  router.delete('/push/subscriptions', async (ctx) => {
    const store = subscriptions();
    const { endpoint } = parseUnsubscribeBody(jsonBody(ctx));
    // Only the caller's own row: another user's endpoint is left alone, and the answer does not say it exists.
    await store.deleteByEndpoint(ctx.state.caller.userId, endpoint);
    ctx.status = 204;
  });

  router.post('/push/test', async (ctx) => {
    const store = subscriptions();
    if (!deps.sender) throw new HttpError(404, NOT_CONFIGURED);
    const subs = await store.listForUsers([ctx.state.caller.userId]);
    const payload = renderTestPush(deps.studioUrl, ctx.state.caller.userId, randomUUID());
    const stop = AbortSignal.timeout(TEST_PUSH_DEADLINE_MS);
    let sent = 0;
    const sending = fanOut(
      { subscriptions: store, sender: deps.sender, width: 8, log: deps.log, stop },
      subs,
      payload,
      async () => {
        sent++;
      },
    );
    const finished = await Promise.race([
      sending.then(() => true),
      new Promise<false>((resolve) => stop.addEventListener('abort', () => resolve(false), { once: true })),
    ]);
    sending.catch((err: unknown) =>
      deps.log(`push test: ${err instanceof Error ? err.message : String(err)}`),
    );
    ctx.status = 202;
    ctx.body = finished ? { sent } : { sent, timedOut: true };
  });

  router.get('/prefs', async (ctx) => {
    ctx.body = { scope: await prefs().getScope(ctx.state.caller.userId, ctx.state.caller.teamId) };
  });

  router.put('/prefs', async (ctx) => {
    const store = prefs();
    const { scope } = parsePrefsBody(jsonBody(ctx));
    await store.setScope(ctx.state.caller.userId, ctx.state.caller.teamId, scope, deps.now());
    ctx.body = { scope };
  });

  return router;
}
