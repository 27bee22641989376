// GET /metrics: Prometheus text format. It tells how busy the service is (never who), which is still not for
// everyone: the API serves it on its own port (METRICS_PORT, on METRICS_HOST like the worker's) or, on the API
// port, only to the bearer of METRICS_TOKEN; otherwise the API port has no such route.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Server } from 'node:http';
import Router from '@koa/router';
import Koa from 'koa';
import { isLoopbackHost, type Config } from '../../config';
import { METRICS_CONTENT_TYPE } from '../metrics';
import { HttpError } from './httpErrors';

const digest = (value: string): Buffer => createHash('sha256').update(value).digest();

/** `token`: the bearer the scrape must show (compared in constant time); absent, none is asked. */
export function metricsRouter(scrape: () => Promise<string>, options: { token?: string } = {}): Router {
  const router = new Router();
  const expected = options.token === undefined ? undefined : digest(options.token);
  router.get('/metrics', async (ctx) => {
    if (expected) {
      const shown = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'))?.[1];
      if (shown === undefined || !timingSafeEqual(digest(shown), expected))
        throw new HttpError(401, 'metrics need the METRICS_TOKEN bearer', { 'www-authenticate': 'Bearer' });
    }
    ctx.set('cache-control', 'no-store');
    ctx.type = METRICS_CONTENT_TYPE;
    ctx.body = await scrape();
  });
  return router;
}

/**
 * A server of its own that answers GET /metrics (the worker's WORKER_METRICS_PORT, the API's METRICS_PORT), on
 * METRICS_HOST: on loopback to anyone there, beyond it only to the METRICS_TOKEN bearer (config refuses it without).
 */
export function listenMetrics(
  scrape: () => Promise<string>,
  port: number,
  config: Pick<Config, 'metricsHost' | 'metricsToken'>,
): Promise<Server> {
  const { metricsHost: host, metricsToken } = config;
  const app = new Koa();
  app.use(metricsRouter(scrape, isLoopbackHost(host) ? {} : { token: metricsToken }).routes());
  return new Promise((resolve, reject) => {
    const server = app.listen(port, host, () => resolve(server));
    server.once('error', reject);
  });
}
