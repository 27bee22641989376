// GET /metrics: Prometheus text format, no auth (bind it privately: it tells how busy the service is, never who).
import Router from '@koa/router';
import { METRICS_CONTENT_TYPE } from '../../observability/metrics';

export function metricsRouter(scrape: () => Promise<string>): Router {
  const router = new Router();
  router.get('/metrics', async (ctx) => {
    ctx.set('cache-control', 'no-store');
    ctx.type = METRICS_CONTENT_TYPE;
    ctx.body = await scrape();
  });
  return router;
}
