// The fuzzer's callback routes (api/routes/callbacks.ts): a run's test ping, secret rotation and redelivery of a
// settled callback, on runs that call back the fuzzer's loopback receiver.
import { none, type RouteSpec } from './spec';

export const CALLBACK_ROUTES: RouteSpec[] = [
  {
    name: 'POST /api/v1/runs/:id/callback/test',
    method: 'POST',
    template: '/api/v1/runs/:id/callback/test',
    // The caller's runs call back the fuzzer's loopback receiver: a 200 is a real signed POST to it, nothing else.
    runs: { callback: true },
    valid: () => ({}),
    onSuccess: none,
    // Nothing inserted: its three rate-limit bounds (per run, user and team) are counted in their window rows,
    // updates.
    inserts: 0,
  },
  {
    name: 'POST /api/v1/runs/:id/callback/rotate-secret',
    method: 'POST',
    template: '/api/v1/runs/:id/callback/rotate-secret',
    // A 200 replaces the run's secret (an update of the run, no document added) and sends nothing.
    runs: { callback: true },
    valid: () => ({}),
    onSuccess: none,
    // Nothing inserted: its rate-limit bound (per run) is counted in its window row, an update.
    inserts: 0,
  },
  {
    name: 'POST /api/v1/runs/:id/episodes/:episodeId/callback/redeliver',
    method: 'POST',
    template: '/api/v1/runs/:id/episodes/:episodeId/callback/redeliver',
    paramKinds: { episodeId: 'episode' },
    runs: { callback: true, settled: true },
    preferred: ['finished', 'failed', 'cancelled'],
    valid: () => ({}),
    onSuccess: none,
    // Nothing inserted (its three rate-limit bounds, per run, user and team, are updates of their window rows); its
    // workflow starts on the fuzz API's task queue, where no worker polls (so nothing is sent and no
    // callback_attempts row is written). It stays running: the episode is in progress.
    inserts: 0,
    givesBackSlots: 3,
    // Half the redelivered runs are replaced (fresh 202s later), half kept (a 409: in progress, slot given back).
    consumes: (fx, req, c) => {
      if (c.body.k === 'valid' && c.body.variant % 2 === 0) for (const id of req.runIds) fx.forget(id);
    },
  },
];

/** The recover routes (api/routes/callbacks.ts). */
export const RECOVER_ROUTES: RouteSpec[] = [
  {
    name: 'POST /api/v1/callbacks/recover',
    method: 'POST',
    template: '/api/v1/callbacks/recover',
    valid: (_ctx, variant) => {
      const now = Date.now();
      const since = new Date(now - (1 + (variant % 24)) * 3_600_000).toISOString();
      return variant % 2 ? { since } : { since, until: new Date(now - 60_000).toISOString() };
    },
    onSuccess: none,
    // Nothing inserted (the team's rate-limit bound is an update of its window row; the recover's own row an
    // upsert). Its workflow starts on the fuzz API's task queue, where no worker polls: it stays running, and later
    // recovers of the team are refused (409, its count given back).
    inserts: 0,
    givesBackSlots: 1,
  },
  {
    name: 'GET /api/v1/callbacks/recover/:id',
    method: 'GET',
    template: '/api/v1/callbacks/recover/:id',
    onSuccess: none,
  },
];
