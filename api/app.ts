// createApp(deps): the Koa app. Everything it talks to is passed in; only api/server.ts builds the deps, each
// router's through that router's wiring.
import { bodyParser } from '@koa/bodyparser';
import Koa from 'koa';
import { createAuthenticator, requireAuth, type AuthOptions, type AuthState } from './auth';
import { allowedMethodsOf, errorMiddleware, onBodyError } from '../platform/http/httpErrors';
import { callbacksRouter, type CallbacksRouterDeps } from './routes/callbacks';
import { endpointsRouter, type EndpointsRouterDeps } from './routes/endpoints';
import { healthRouter, type HealthProbes } from '../platform/http/healthRoutes';
import { interactionsRouter, type InteractionsRouterDeps } from './routes/interactions';
import { metricsRouter } from '../platform/http/metricsRoutes';
import { notificationsRouter, type NotificationRouteDeps } from './routes/notifications';
import { receiptsRouter, type ReceiptsRouterDeps } from './routes/receipts';
import { openApiRouter } from './openapi';
import { runsRouter, type RunsRouterDeps } from './routes/runs';
import { securityHeaders } from './securityHeaders';
import { absentFeature, catchAllRouter, serveStudio } from './studio';
import { teamsRouter, type TeamsRouterDeps } from './routes/teams';
import { watchesRouter, type WatchesRouterDeps } from './routes/watches';
import { requestSpan } from './requestSpan';

export interface AppDeps {
  auth: AuthOptions;
  /** Each router's own dependencies, built by its wiring (api/routes/*Wiring.ts) from what the API's entry built. */
  runs: RunsRouterDeps;
  callbacks: CallbacksRouterDeps;
  watches: WatchesRouterDeps;
  teams: TeamsRouterDeps;
  endpoints: EndpointsRouterDeps;
  /** The routes that answer without a session (a notification's action token). */
  interactions: InteractionsRouterDeps;
  /** Absent when web push is off: no push carries a receipt token. */
  receipts?: ReceiptsRouterDeps;
  health: HealthProbes;
  /** Present only when web push is enabled (webPushEnabled): otherwise the notification routes do not exist. */
  notifications?: NotificationRouteDeps;
  /** Where the studio's files are; by default the checkout's (or the build's) studio folder. */
  studio?: { dir: string };
  log?: (line: string) => void;
  /** GET /metrics on the API port answers `scrape` (Prometheus text) to the bearer of `token`; undefined: 404. */
  metrics?: { scrape: () => Promise<string>; token: string };
  /** A TLS-terminating proxy sits in front (TRUST_PROXY): X-Forwarded-* are believed, answers carry HSTS. */
  trustProxy?: boolean;
  /** One debug line per request (method, path, status, duration: never headers, bodies or the query). */
  logRequest?: (fields: { method: string; path: string; status: number; ms: number }) => void;
  /**
   * One server span per request, named by its route (tracing on; off, no middleware at all). It continues the
   * caller's trace only on an authenticated request, or on any behind trustProxy.
   */
  traceRequests?: boolean;
}

export function createApp(deps: AppDeps): Koa<AuthState> {
  const app = new Koa<AuthState>();
  app.proxy = deps.trustProxy ?? false;
  // One proxy: the address it appended to X-Forwarded-For is the caller's; entries before it are the caller's word.
  app.maxIpsCount = 1;
  const authenticate = createAuthenticator(deps.auth);
  if (deps.traceRequests) app.use(requestSpan({ proxy: app.proxy, authenticate }));
  if (deps.logRequest) {
    const logRequest = deps.logRequest;
    app.use(async (ctx, next) => {
      const started = performance.now();
      try {
        await next();
      } finally {
        logRequest({
          method: ctx.method,
          path: ctx.path,
          status: ctx.status,
          ms: Math.round(performance.now() - started),
        });
      }
    });
  }
  app.use(securityHeaders({ trustProxy: app.proxy }));
  app.use(errorMiddleware(deps.log ?? ((line) => console.error(line))));
  app.use(
    bodyParser({
      enableTypes: ['json'],
      jsonLimit: '1mb',
      encoding: 'utf-8',
      parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'],
      onError: onBodyError,
    }),
  );

  const health = healthRouter(deps.health, { log: deps.log });
  const callerRouters = [
    runsRouter(deps.runs),
    callbacksRouter(deps.callbacks),
    watchesRouter(deps.watches),
    teamsRouter(deps.teams),
    endpointsRouter(deps.endpoints),
    ...(deps.notifications ? [notificationsRouter(deps.notifications)] : []),
  ];
  // Authenticated by the token in the body, not by a bearer.
  const tokenRouters = [
    interactionsRouter(deps.interactions),
    ...(deps.receipts ? [receiptsRouter(deps.receipts)] : []),
  ];
  app.use(health.routes());
  for (const router of tokenRouters) {
    app.use(router.routes());
    app.use(allowedMethodsOf(router));
  }
  // Metrics on the API port only when the operator asked for them there (METRICS_TOKEN): else a 404, token or not.
  if (deps.metrics) app.use(metricsRouter(deps.metrics.scrape, { token: deps.metrics.token }).routes());
  else app.use(absentFeature('/metrics'));
  app.use(openApiRouter({ open: [health, ...tokenRouters], caller: callerRouters }).routes());
  app.use(serveStudio(deps.studio?.dir));

  // Web push off (no VAPID keys): the notification routes do not exist, token or not.
  if (!deps.notifications) app.use(absentFeature('/api/v1/notifications'));

  // Everything below needs a caller.
  app.use(requireAuth(authenticate));
  for (const router of [...callerRouters, catchAllRouter()]) {
    app.use(router.routes());
    app.use(allowedMethodsOf(router));
  }
  return app;
}
