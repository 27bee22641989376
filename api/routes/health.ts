// GET /healthz (liveness: the process serves; nothing it depends on is asked) and GET /readyz (readiness: 200
// when Temporal and Mongo answer, the search attributes exist and the web push keys are loaded when push is on;
// 503 naming what is not, and while the process is shutting down, so a load balancer drains it first).
import Router from '@koa/router';
import { validate } from '../validate';

export type Probe = () => Promise<void>;

const PROBE_TIMEOUT_MS = 2000;

export async function check(probe: Probe): Promise<'ok' | string> {
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

export interface HealthProbes {
  temporal: Probe;
  mongo: Probe;
  /** The workflows' search attributes are registered on the namespace. */
  searchAttributes?: Probe;
  /** undefined: web push is off (nothing to check); else whether the VAPID keys are loaded. */
  pushKeys?: Probe;
  /** True once shutdown began: readiness fails so traffic drains, liveness still answers. */
  draining?: () => boolean;
}

export function healthRouter(probes: HealthProbes) {
  const router = new Router();
  const liveness = validate({
    summary: 'liveness: 200 while the process serves (nothing it depends on is asked)',
  });
  router.get('/healthz', liveness, (ctx) => {
    ctx.body = { status: 'ok' };
  });
  const readiness = validate({
    summary:
      'readiness: 200 when Temporal, MongoDB, the search attributes and the push keys are there, else 503',
  });
  router.get('/readyz', readiness, async (ctx) => {
    const named: [string, Probe | undefined][] = [
      ['temporal', probes.temporal],
      ['mongo', probes.mongo],
      ['searchAttributes', probes.searchAttributes],
      ['pushKeys', probes.pushKeys],
    ];
    const results = await Promise.all(
      named.filter(([, probe]) => probe).map(async ([name, probe]) => [name, await check(probe!)] as const),
    );
    const body: Record<string, string> = Object.fromEntries(results);
    if (probes.draining?.()) body.shutdown = 'in progress';
    ctx.status = results.every(([, r]) => r === 'ok') && !body.shutdown ? 200 : 503;
    ctx.body = body;
  });
  return router;
}
