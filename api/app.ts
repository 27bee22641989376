// createApp(deps): the Koa app. Everything it talks to is passed in; only api/server.ts builds the deps.
import { bodyParser } from '@koa/bodyparser';
import Koa from 'koa';
import type { RunsService } from '../runs/service';
import type { RunStore } from '../store/runs';
import type { WatchStore } from '../store/watches';
import { createAuthenticator, requireAuth, type AuthOptions, type AuthState } from './auth';
import type { EpisodeView } from './episodesView';
import { errorMiddleware, onBodyError } from '../platform/http/httpErrors';
import { callbacksRouter, type CallbacksRouterDeps } from './routes/callbacks';
import { healthRouter, type HealthProbes } from '../platform/http/healthRoutes';
import { metricsRouter } from '../platform/http/metricsRoutes';
import { notificationsRouter, type NotificationRouteDeps } from './routes/notifications';
import { openApiRouter } from './openapi';
import { runsRouter, type RunsRouterDeps } from './routes/runs';
import { securityHeaders } from './securityHeaders';
import { absentFeature, catchAllRouter, serveStudio } from './studio';
import { watchesRouter } from './routes/watches';
import { requestSpan } from './requestSpan';

export interface AppDeps {
  auth: AuthOptions;
  runsService: RunsService;
  runs: RunStore;
  watches: WatchStore;
  /** Starts a run's current episode again (the watches router: a pause whose veto ended). */
  replayOutcome: (runId: string, teamId: string) => Promise<unknown>;
  episodes: EpisodeView;
  runHealth: RunsRouterDeps['runHealth'];
  notifyOperator: RunsRouterDeps['notifyOperator'];
  testCallback: CallbacksRouterDeps['testCallback'];
  rateLimits: RunsRouterDeps['rateLimits'];
  routeErrorLimits: RunsRouterDeps['routeErrorLimits'];
  callbackTestLimits: CallbacksRouterDeps['callbackTestLimits'];
  redeliverCallback: CallbacksRouterDeps['redeliverCallback'];
  callbackRedeliverLimits: CallbacksRouterDeps['callbackRedeliverLimits'];
  runCreateLimit: RunsRouterDeps['runCreateLimit'];
  callbackRecovers: CallbacksRouterDeps['callbackRecovers'];
  startRecover: CallbacksRouterDeps['startRecover'];
  recoverLimit: CallbacksRouterDeps['recoverLimit'];
  recoverBounds: CallbacksRouterDeps['recoverBounds'];
  callbackRotateLimit: CallbacksRouterDeps['callbackRotateLimit'];
  probes: HealthProbes;
  /** Present only when web push is enabled (webPushEnabled): otherwise the notification routes do not exist. */
  notifications?: NotificationRouteDeps;
  studioDir?: string;
  now?: () => Date;
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
  const now = deps.now ?? (() => new Date());
  const app = new Koa<AuthState>();
  app.proxy = deps.trustProxy ?? false;
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

  const health = healthRouter(deps.probes, { log: deps.log });
  const callerRouters = [
    runsRouter({ ...deps, now }),
    callbacksRouter({ ...deps, now }),
    watchesRouter({ runs: deps.runs, watches: deps.watches, replayOutcome: deps.replayOutcome, now }),
    ...(deps.notifications ? [notificationsRouter(deps.notifications)] : []),
  ];
  app.use(health.routes());
  // Metrics on the API port only when the operator asked for them there (METRICS_TOKEN): else a 404, token or not.
  if (deps.metrics) app.use(metricsRouter(deps.metrics.scrape, { token: deps.metrics.token }).routes());
  else app.use(absentFeature('/metrics'));
  app.use(openApiRouter([health, ...callerRouters]).routes());
  app.use(serveStudio(deps.studioDir));

  // Web push off (no VAPID keys): the notification routes do not exist, token or not.
  if (!deps.notifications) app.use(absentFeature('/api/v1/notifications'));

  // Everything below needs a caller.
  app.use(requireAuth(authenticate));
  for (const router of [...callerRouters, catchAllRouter()]) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }
  return app;
}
