// The app with every router mounted and inert dependencies, for tests that read its routes without servers
// (nothing here may call a route that reaches a dependency).
import type Router from '@koa/router';
import { createApp } from '../../api/app';

const inert = {} as never;

/** The app as api/server.ts builds it, web push on; `metrics` mounts GET /metrics as well. */
export function appWithEveryRoute(options: { metrics?: boolean } = {}) {
  return createApp({
    auth: {
      jwtSecret: 'unit-test-secret-of-at-least-32-bytes!',
      maxLifetimeSeconds: 3600,
      clockSkewSeconds: 60,
    },
    runs: inert,
    callbacks: inert,
    watches: inert,
    teams: inert,
    endpoints: inert,
    interactions: inert,
    receipts: inert,
    health: { temporal: async () => undefined, mongo: async () => undefined },
    notifications: {
      vapidPublicKey: 'BPublicKey',
      endpointRules: { allowInsecure: false, allowlist: [] },
      studioUrl: 'https://studio.example.com',
      now: () => new Date(),
      log: () => undefined,
    },
    ...(options.metrics ? { metrics: { scrape: async () => '', token: 'unit-test-metrics-token' } } : {}),
  });
}

/** The routers the app dispatches to, read off its middleware (router.routes() carries its router). */
export function routersOf(app: ReturnType<typeof createApp>): Router[] {
  return app.middleware
    .map((mw) => (mw as { router?: Router }).router)
    .filter((router): router is Router => router !== undefined);
}
