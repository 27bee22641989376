// GET /healthz: 200 when Temporal and Mongo both answer, 503 naming the one that does not.
import Router from '@koa/router';
import { validate } from '../validate';

export type Probe = () => Promise<void>;

const PROBE_TIMEOUT_MS = 2000;

async function check(probe: Probe): Promise<'ok' | string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      probe(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timed out')), PROBE_TIMEOUT_MS);
      }),
    ]);
    return 'ok';
  } catch (err) {
    return `down: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`;
  } finally {
    clearTimeout(timer);
  }
}

export function healthRouter(probes: { temporal: Probe; mongo: Probe }) {
  const router = new Router();
  const spec = validate({
    summary: 'liveness and readiness: 200 when Temporal and MongoDB answer, else 503',
  });
  router.get('/healthz', spec, async (ctx) => {
    const [temporal, mongo] = await Promise.all([check(probes.temporal), check(probes.mongo)]);
    ctx.status = temporal === 'ok' && mongo === 'ok' ? 200 : 503;
    ctx.body = { temporal, mongo };
  });
  return router;
}
