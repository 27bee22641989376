// The notification routes: VAPID key, push subscriptions, test push, and the per-user scope. createApp
// registers them only when web push is enabled (a subscription store plus both VAPID keys); a route whose
// store is missing later still answers the documented 404s.
import Router from '@koa/router';
import { renderTestPush, type PushPayload } from '../../domain/push';
import { randomUUID } from 'node:crypto';
import { withDeadline } from '../../platform/deadline';
import type { NotificationPrefStore } from '../../store/push/notificationPrefs';
import type { PushDeliveryStore } from '../../store/push/deliveries';
import type { PushSubscriptionRow, PushSubscriptionStore } from '../../store/push/subscriptions';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import { deviceLabel } from '../../domain/deviceLabel';
import { MAX_DO_NOT_DISTURB_MS } from '../../domain/quietHours';
import type { AuthState } from '../auth';
import { HttpError } from '../../platform/http/httpErrors';
import { rateLimiter, type Admitted } from '../../platform/http/rateLimit';
import {
  deviceParams,
  isDeviceId,
  prefsBody,
  subscribeBody,
  unsubscribeBody,
  type EndpointRules,
} from '../pushSchemas';
import { validate, type HandlerContext } from '../../platform/http/validate';
import { devicesPage } from '../schemas';
import { encodeCursor } from '../../store/paging';

/**
 * Pushes one payload to the subscriptions given, at most `width` at a time, pruning dead endpoints as an episode's
 * push does: the fan-out the worker's push activity runs, over the same live sender, handed in by the API's entry.
 */
export type PushFanOut = (
  subs: PushSubscriptionRow[],
  payload: PushPayload,
  options: { width: number; signal: AbortSignal; onDelivered: () => Promise<void> },
) => Promise<unknown>;

export interface NotificationRouteDeps {
  vapidPublicKey: string;
  subscriptions?: PushSubscriptionStore;
  prefs?: NotificationPrefStore;
  /** Where a device's last success is read (the fan-out's delivery records). */
  deliveries?: PushDeliveryStore;
  /** What the test route pushes through; absent: web push is off. */
  fanOut?: PushFanOut;
  endpointRules: EndpointRules;
  /** Shared by every API process: a user's test pushes are counted here (without it the test route is 404). */
  rateLimits?: RateLimitStore;
  /** Default 20 (PUSH_MAX_SUBSCRIPTIONS_PER_USER). */
  maxSubscriptionsPerUser?: number;
  /** Default 5 a minute (PUSH_TEST_RATE_LIMIT, PUSH_TEST_RATE_WINDOW_SECONDS). */
  testPushRate?: RateLimit;
  studioUrl: string;
  /** Tells the person's waiting digest that quiet hours or do-not-disturb changed; absent: no digests. */
  prefsChanged?: (teamId: string, userId: string) => Promise<boolean>;
  /** The person's held pushes, offered by the sweep's next pass (pushHolds.owedNow); absent: no digests. */
  holdsOwedNow?: (teamId: string, userId: string, now: Date) => Promise<void>;
  now: () => Date;
  log: (line: string) => void;
}

const NOT_CONFIGURED = 'web push is not configured on this server';

/** The test push answers by then with what got through; sends still in flight finish in the background. */
export const TEST_PUSH_DEADLINE_MS = 10_000;
/** A test push's sends in flight at once (a user has a few devices). */
const TEST_PUSH_WIDTH = 8;

type NotificationRoutes = Router<AuthState>;

export function notificationsRouter(deps: NotificationRouteDeps) {
  const router: NotificationRoutes = new Router<AuthState>({ prefix: '/api/v1/notifications' });

  const subscriptions = (): PushSubscriptionStore => {
    if (!deps.subscriptions) throw new HttpError(404, NOT_CONFIGURED);
    return deps.subscriptions;
  };
  const prefs = (): NotificationPrefStore => {
    if (!deps.prefs) throw new HttpError(404, 'notification prefs are not available on this server');
    return deps.prefs;
  };

  // A route whose store is missing answers its 404 before its input is looked at.
  router.use(['/push/subscriptions', '/push/test'], async (_ctx, next) => {
    subscriptions();
    await next();
  });
  router.use('/prefs', async (_ctx, next) => {
    prefs();
    await next();
  });

  addDeviceRoutes(router, deps, subscriptions);
  addTestPushRoute(router, deps, subscriptions);
  addPrefsRoutes(router, deps, prefs);
  return router;
}

/** The caller's devices: the VAPID key, subscribe and unsubscribe, the device list. */
function addDeviceRoutes(
  router: NotificationRoutes,
  deps: NotificationRouteDeps,
  subscriptions: () => PushSubscriptionStore,
): void {
  const maxSubscriptions = deps.maxSubscriptionsPerUser ?? 20;
  router.get('/push/vapid-public-key', validate({ summary: "the server's VAPID public key" }), (ctx) => {
    ctx.body = { publicKey: deps.vapidPublicKey };
  });

  const subscribe = validate({
    summary: "registers (201) or refreshes (200) one of the caller's push subscriptions",
    body: subscribeBody(deps.endpointRules),
    examples: [
      {
        endpoint: 'https://fcm.googleapis.com/fcm/send/abc123',
        keys: {
          p256dh: 'BNcRdreALRFXTkOOUHK1EtK2wtaz5Ry4YfYCA_0QTpQtUbVlUls0VJXg7A8u-Ts1XbjhazAkj7I99e8QcYP7DkM',
          auth: 'tBHItJI5svbpez7KI4CCXg',
        },
      },
    ],
  });
  router.post('/push/subscriptions', subscribe, async (ctx) => {
    const store = subscriptions();
    const subscription = ctx.state.input.body;
    const label = deviceLabel(ctx.get('user-agent'));
    const outcome = await store.register(ctx.state.caller, subscription, deps.now(), maxSubscriptions, label);
    // Another user's row: the caller does not hold the subscription's keys, so it may not redirect its pushes.
    if (outcome === 'held_by_another_user')
      throw new HttpError(409, 'this endpoint is subscribed by another user');
    if (outcome === 'limit_reached')
      throw new HttpError(
        409,
        `subscription limit reached (${maxSubscriptions} per user): remove a device first`,
      );
    const created = outcome === 'created';
    ctx.status = created ? 201 : 200;
    ctx.body = { endpoint: subscription.endpoint, created };
  });

  const unsubscribe = validate({
    summary: "removes one of the caller's own push subscriptions (204 whether or not it existed)",
    body: unsubscribeBody,
    success: 204,
    examples: [{ endpoint: 'https://fcm.googleapis.com/fcm/send/abc123' }],
  });
  router.delete('/push/subscriptions', unsubscribe, async (ctx) => {
    const store = subscriptions();
    const { endpoint } = ctx.state.input.body;
    // Only the caller's own row: another user's endpoint is left alone, and the answer does not say it exists.
    await store.deleteByEndpoint(ctx.state.caller.userId, endpoint);
    ctx.status = 204;
  });

  const listDevices = validate({
    summary:
      "the caller's own devices, newest first, a page at a time: id, push service host, label, created, last " +
      "success (never the endpoint or keys; nextBefore: the next page's before)",
    query: devicesPage,
  });
  router.get('/push/subscriptions', listDevices, async (ctx) => {
    const { limit, before } = ctx.state.input.query;
    const { rows, next } = await subscriptions().listForUser(ctx.state.caller.userId, limit, before);
    const last = deps.deliveries
      ? await deps.deliveries.lastSuccess(rows, deps.now())
      : new Map<string, Date>();
    ctx.body = {
      subscriptions: rows.map((row) => ({
        id: row._id,
        host: new URL(row.endpoint).host,
        label: row.label ?? 'Unknown browser',
        createdAt: row.createdAt.toISOString(),
        lastSuccessAt: last.get(row._id)?.toISOString() ?? null,
      })),
      ...(next ? { nextBefore: encodeCursor(next) } : {}),
    };
  });

  const removeDevice = validate({
    summary: "removes one of the caller's own devices by id (204; an id that is not the caller's is 404)",
    params: deviceParams,
    success: 204,
  });
  router.delete('/push/subscriptions/:id', removeDevice, async (ctx) => {
    const store = subscriptions();
    const { id } = ctx.state.input.params;
    const removed = isDeviceId(id) && (await store.deleteById(ctx.state.caller.userId, id));
    if (!removed) throw new HttpError(404, 'no such device');
    ctx.status = 204;
  });
}

/** A test push to every one of the caller's devices, rate-limited per user. */
function addTestPushRoute(
  router: NotificationRoutes,
  deps: NotificationRouteDeps,
  subscriptions: () => PushSubscriptionStore,
): void {
  const testPushRate = deps.testPushRate ?? { limit: 5, windowSeconds: 60 };
  const pushTest = validate({
    summary: "sends a test push to every one of the caller's endpoints; answers how many were reached",
    success: 202,
  });
  const { fanOut, rateLimits } = deps;
  if (!fanOut || !rateLimits) {
    router.post('/push/test', pushTest, () => {
      throw new HttpError(404, NOT_CONFIGURED);
    });
    return;
  }
  const testPushes = rateLimiter(
    rateLimits,
    deps.now,
  )(({ caller }: AuthState) => [
    { key: `push-test|${caller.userId}`, rule: testPushRate, what: 'test notifications' },
  ]);
  router.post(
    '/push/test',
    pushTest,
    testPushes,
    async (ctx: HandlerContext<typeof pushTest, AuthState & Admitted>) => {
      const store = subscriptions();
      const subs = await store.listForUsers([ctx.state.caller.userId]);
      const payload = renderTestPush(deps.studioUrl, ctx.state.caller.userId, randomUUID());
      const signal = AbortSignal.timeout(TEST_PUSH_DEADLINE_MS);
      let sent = 0;
      const sending = fanOut(subs, payload, {
        width: TEST_PUSH_WIDTH,
        signal,
        onDelivered: async () => {
          sent++;
        },
      });
      const finished = await withDeadline(
        sending.then(() => true),
        signal,
        () => false,
      );
      sending.catch((err: unknown) =>
        deps.log(`push test: ${err instanceof Error ? err.message : String(err)}`),
      );
      ctx.status = 202;
      ctx.body = finished ? { sent } : { sent, timedOut: true };
    },
  );
}

/** The caller's notification prefs in their team. */
function addPrefsRoutes(
  router: NotificationRoutes,
  deps: NotificationRouteDeps,
  prefs: () => NotificationPrefStore,
): void {
  const getPrefs = validate({
    summary:
      "the caller's notification prefs in the caller's team: scope (own or team), each push kind on or off, " +
      'quiet hours, do-not-disturb (while ahead) and the kinds that break through both',
  });
  router.get('/prefs', getPrefs, async (ctx) => {
    ctx.body = await prefs().get(ctx.state.caller.userId, ctx.state.caller.teamId);
  });

  const putPrefs = validate({
    summary:
      "sets the caller's scope in the caller's team (own runs only, or the whole team's) and, when given, " +
      'the push kinds named (the others keep their value), quiet hours and do-not-disturb (null clears; at ' +
      'most 7 days ahead) and the kinds that break through them; answers the prefs now in force',
    body: prefsBody,
    examples: [
      { scope: 'team' },
      { scope: 'own', kinds: { run_finished: false, run_cancelled: false } },
      {
        scope: 'team',
        quietHours: { start: '22:00', end: '07:00', timeZone: 'Europe/Berlin', days: ['mon', 'tue'] },
        breakThrough: ['human_input_requested'],
      },
      { scope: 'team', doNotDisturbUntil: '2026-12-01T08:00:00+01:00' },
    ],
  });
  router.put('/prefs', putPrefs, async (ctx) => {
    const store = prefs();
    const { scope, kinds, quietHours, doNotDisturbUntil, breakThrough } = ctx.state.input.body;
    const now = deps.now();
    if (doNotDisturbUntil && doNotDisturbUntil.getTime() - now.getTime() > MAX_DO_NOT_DISTURB_MS)
      throw new HttpError(400, 'doNotDisturbUntil may be at most 7 days ahead');
    const { userId, teamId } = ctx.state.caller;
    ctx.body = await store.set(
      userId,
      teamId,
      { scope, kinds, quietHours, doNotDisturbUntil, breakThrough },
      now,
    );
    // A digest waiting for this person goes out when they can be reached now: tell it to look again. The prefs
    // are saved whatever happens here, and the digest reads them again when its timer fires anyway.
    const holdsChanged =
      quietHours !== undefined || doNotDisturbUntil !== undefined || breakThrough !== undefined;
    if (holdsChanged && deps.prefsChanged) {
      const told = await deps.prefsChanged(teamId, userId).catch((err: unknown) => {
        deps.log(
          `prefs: could not tell ${userId}'s digest in ${teamId} that the prefs changed: ${String(err)}`,
        );
        return false;
      });
      // None told (none running, or Temporal away): the sweep's next pass offers what the person has held, and
      // the digest it starts or signals reads these prefs.
      if (!told)
        await deps
          .holdsOwedNow?.(teamId, userId, now)
          .catch((err: unknown) =>
            deps.log(`prefs: could not offer ${userId}'s held pushes in ${teamId} again: ${String(err)}`),
          );
    }
  });
}
