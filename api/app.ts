// createApp(deps): the Koa app. Everything it talks to is passed in; only api/server.ts builds the deps.
import { bodyParser } from '@koa/bodyparser';
import Koa from 'koa';
import type { RunEngine } from '../engine/runEngine';
import type { RunStore } from '../store/runs';
import type { WatchStore } from '../store/watches';
import { requireAuth, type AuthState } from './auth';
import type { EpisodeView } from './episodesView';
import { errorMiddleware, onBodyError } from './errors';
import { healthRouter, type HealthProbes } from './routes/health';
import { notificationsRouter, type NotificationRouteDeps } from './routes/notifications';
import { runsRouter, type RunsRouterDeps } from './routes/runs';
import { catchAllRouter, serveStudio } from './studio';
import { watchesRouter } from './routes/watches';

export interface AppDeps {
  authJwtSecret: string;
  engine: RunEngine;
  runs: RunStore;
  watches: WatchStore;
  episodes: EpisodeView;
  runHealth: RunsRouterDeps['runHealth'];
  notifyOperator: RunsRouterDeps['notifyOperator'];
  probes: HealthProbes;
  /** Present only when web push is enabled (webPushEnabled): otherwise the notification routes do not exist. */
  notifications?: NotificationRouteDeps;
  studioDir?: string;
  now?: () => Date;
  log?: (line: string) => void;
}

export function createApp(deps: AppDeps): Koa<AuthState> {
  const now = deps.now ?? (() => new Date());
  const app = new Koa<AuthState>();
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

  app.use(healthRouter(deps.probes).routes());
  app.use(serveStudio(deps.studioDir));

  // Everything below needs a caller.
  app.use(requireAuth(deps.authJwtSecret));
  const routers = [
    runsRouter(deps),
    watchesRouter({ runs: deps.runs, watches: deps.watches, now }),
    ...(deps.notifications ? [notificationsRouter(deps.notifications)] : []),
    catchAllRouter(),
  ];
  for (const router of routers) {
    app.use(router.routes());
    app.use(router.allowedMethods({ throw: true }));
  }
  return app;
}
