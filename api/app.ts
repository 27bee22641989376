// createApp(deps): the Koa app. Everything it talks to is passed in; only api/server.ts builds the deps.
import { bodyParser } from '@koa/bodyparser';
import Koa from 'koa';
import type { RunEngine } from '../engine/runEngine';
import type { RunStore } from '../store/runs';
import type { WatchStore } from '../store/watches';
import { requireAuth, type AuthState } from './auth';
import type { EpisodeView } from './episodesView';
import { errorMiddleware, HttpError } from './errors';
import { healthRouter, type Probe } from './routes/health';
import { runsRouter } from './routes/runs';
import { watchesRouter } from './routes/watches';

export interface AppDeps {
  authJwtSecret: string;
  engine: RunEngine;
  runs: RunStore;
  watches: WatchStore;
  episodes: EpisodeView;
  probes: { temporal: Probe; mongo: Probe };
  now?: () => Date;
  log?: (line: string) => void;
}

export function createApp(deps: AppDeps): Koa<AuthState> {
  const now = deps.now ?? (() => new Date());
  const app = new Koa<AuthState>();
  app.use(errorMiddleware(deps.log ?? ((line) => console.error(line))));
  app.use(bodyParser({ enableTypes: ['json'], jsonLimit: '1mb', encoding: 'utf-8' }));

  const health = healthRouter(deps.probes);
  app.use(health.routes());

  // Everything below needs a caller.
  app.use(requireAuth(deps.authJwtSecret));
  for (const router of [
    runsRouter({ engine: deps.engine, episodes: deps.episodes }),
    watchesRouter({ runs: deps.runs, watches: deps.watches, now }),
  ]) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  app.use(() => {
    throw new HttpError(404, 'not found');
  });
  return app;
}
