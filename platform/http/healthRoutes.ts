// GET /healthz (liveness: the process serves; nothing it depends on is asked) and GET /readyz (readiness: 200
// when Temporal and Mongo answer, the search attributes exist and the web push keys are loaded when push is on;
// 503 naming what is not, and while the process is shutting down, so a load balancer drains it first).
// Readiness says ok or down and never why (an error carries internal addresses and ports): why goes to the log.
// Its answer is kept READINESS_CACHE_MS and shared by the requests meanwhile, so a busy prober costs the servers
// one Temporal call and one ping a second, not one per hit.
import Router from '@koa/router';
import { withDeadline } from '../deadline';
import { validate } from './validate';

export type Probe = () => Promise<void>;

const PROBE_TIMEOUT_MS = 2000;
export const READINESS_CACHE_MS = 1000;

/** 'ok', or why the probe failed (for the log). */
export async function check(probe: Probe): Promise<'ok' | string> {
  try {
    await withDeadline(probe(), PROBE_TIMEOUT_MS, () => {
      throw new Error('timed out');
    });
    return 'ok';
  } catch (err) {
    return err instanceof Error ? err.message.split('\n')[0] : String(err);
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

export interface HealthOptions {
  /** Where why a probe is down goes. */
  log?: (line: string) => void;
  now?: () => number;
}

export function healthRouter(probes: HealthProbes, options: HealthOptions = {}) {
  const now = options.now ?? Date.now;
  const router = new Router();
  const liveness = validate({
    summary: 'liveness: 200 while the process serves (nothing it depends on is asked)',
  });
  router.get('/healthz', liveness, (ctx) => {
    ctx.body = { status: 'ok' };
  });

  const named = (
    [
      ['temporal', probes.temporal],
      ['mongo', probes.mongo],
      ['searchAttributes', probes.searchAttributes],
      ['pushKeys', probes.pushKeys],
    ] as [string, Probe | undefined][]
  ).filter((entry): entry is [string, Probe] => entry[1] !== undefined);
  let kept: { at: number; answer: Promise<Record<string, 'ok' | 'down'>> } | undefined;

  async function probeAll(): Promise<Record<string, 'ok' | 'down'>> {
    const results = await Promise.all(
      named.map(async ([name, probe]) => [name, await check(probe)] as const),
    );
    for (const [name, result] of results)
      if (result !== 'ok') options.log?.(`readiness: ${name} down: ${result}`);
    return Object.fromEntries(results.map(([name, result]) => [name, result === 'ok' ? 'ok' : 'down']));
  }

  const readiness = validate({
    summary:
      'readiness: 200 when Temporal, MongoDB, the search attributes and the push keys are there, else 503 ' +
      '(each "ok" or "down"; no token)',
  });
  router.get('/readyz', readiness, async (ctx) => {
    if (!kept || now() - kept.at >= READINESS_CACHE_MS) kept = { at: now(), answer: probeAll() };
    const body: Record<string, string> = { ...(await kept.answer) };
    // Shutdown is read live: a kept answer must not hold traffic on a process that is draining.
    if (probes.draining?.()) body.shutdown = 'in progress';
    ctx.status = Object.values(body).every((r) => r === 'ok') ? 200 : 503;
    ctx.set('cache-control', 'no-store');
    ctx.body = body;
  });
  return router;
}
