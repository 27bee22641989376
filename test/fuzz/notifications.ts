// The fuzzer's notification routes (api/routes/notifications.ts): push devices, the test push, preferences.
import { none, type RouteSpec } from './spec';

export const NOTIFICATION_ROUTES: RouteSpec[] = [
  {
    name: 'GET /api/v1/notifications/push/vapid-public-key',
    method: 'GET',
    template: '/api/v1/notifications/push/vapid-public-key',
    onSuccess: none,
  },
  {
    name: 'POST /api/v1/notifications/push/subscriptions',
    method: 'POST',
    template: '/api/v1/notifications/push/subscriptions',
    valid: (ctx, variant) => {
      const sub = ctx.subscription(variant) as unknown as Record<string, unknown>;
      ctx.subscribed.push(sub.endpoint as string);
      return sub;
    },
    onSuccess: ({ status }) => ({ push_subscriptions: status === 201 ? 1 : 0 }),
  },
  {
    name: 'DELETE /api/v1/notifications/push/subscriptions',
    method: 'DELETE',
    template: '/api/v1/notifications/push/subscriptions',
    // Rows of the caller to delete; valid bodies name them (a second delete of one is a no-op 204).
    before: (fx) => fx.subscribe(20),
    valid: (ctx, variant) => ({
      endpoint: ctx.subscribed.length
        ? ctx.subscribed[variant % ctx.subscribed.length]
        : 'https://push.example.com/never-subscribed',
    }),
  },
  {
    name: 'GET /api/v1/notifications/push/subscriptions',
    method: 'GET',
    template: '/api/v1/notifications/push/subscriptions',
    before: (fx) => fx.subscribe(3),
    onSuccess: none,
  },
  {
    name: 'POST /api/v1/notifications/push/test',
    method: 'POST',
    template: '/api/v1/notifications/push/test',
    // A test push fans out to every endpoint of the caller: a few, so each case is a real send.
    before: (fx) => fx.subscribe(3),
    valid: () => ({}),
  },
  {
    name: 'GET /api/v1/notifications/prefs',
    method: 'GET',
    template: '/api/v1/notifications/prefs',
    onSuccess: none,
  },
  {
    name: 'PUT /api/v1/notifications/prefs',
    method: 'PUT',
    template: '/api/v1/notifications/prefs',
    valid: (_ctx, variant) =>
      variant % 3 === 2
        ? {
            scope: variant % 2 ? 'team' : 'own',
            kinds: { run_finished: variant % 4 < 2, usage_parked: false },
          }
        : { scope: variant % 2 ? 'team' : 'own' },
  },
  {
    name: 'DELETE /api/v1/notifications/push/subscriptions/:id',
    method: 'DELETE',
    template: '/api/v1/notifications/push/subscriptions/:id',
    paramKinds: { id: 'device' },
    // A few of the caller's devices; a 204 deletes one (a delete, not a record), which later cases no longer name.
    before: (fx) => fx.subscribe(3),
    consumes: (fx, req) => {
      for (const device of req.devices) fx.unsubscribed(device.endpoint);
    },
  },
];
