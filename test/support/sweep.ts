// The sweep activities on one database, as the worker registers them, for the sweep test and bench:sweep: the
// stores built on that database, a clock stopped at `now`, the default episode options.
import type { Client } from '@temporalio/client';
import type { Db } from 'mongodb';
import { createSweepActivities } from '../../activities/sweep';
import { callbackExhaustedRaiser } from '../../client/operator';
import type { SweepFamilies } from '../../domain/sweep';
import { createCallbackAttemptStore } from '../../store/callback/attempts';
import { createClaimStore, type ClaimStore } from '../../store/claims';
import { createInteractionStore } from '../../store/interactions';
import { createPushDeliveryStore } from '../../store/push/deliveries';
import { createRateLimitStore } from '../../store/rateLimits';
import { createRunStore, type RunStore } from '../../store/runs';
import { DEFAULT_EPISODE_OPTIONS } from '../../contract/workflows';

export interface SweepOnDbOptions {
  client: Client;
  /** Where the sweep starts the episodes it finds owed. */
  taskQueue: string;
  families: SweepFamilies;
  graceSeconds: number;
  lookbackSeconds: number;
  pageSize: number;
  now: Date;
  /** The questions' phases too (their workflows started, their closes replayed). */
  questions?: boolean;
  /**
   * The operator family on: a callback given up past the sweep's reach raises its callback_exhausted alert (through
   * `throttle` first, when given: what Temporal answers a start it throttles, before the real start).
   */
  opsAlerts?: true | { throttle: () => void };
}

export interface SweepOnDb {
  sweep: ReturnType<typeof createSweepActivities>;
  /** The stores the sweep reads, for a caller that checks the same rows another way. */
  runs: RunStore;
  claims: ClaimStore;
}

export function sweepActivitiesOn(db: Db, options: SweepOnDbOptions): SweepOnDb {
  const { client, taskQueue, families, graceSeconds, lookbackSeconds, pageSize, now, questions, opsAlerts } =
    options;
  const runs = createRunStore(db);
  const claims = createClaimStore(db, { graceSeconds, now: () => now });
  const sweep = createSweepActivities({
    runs,
    claims,
    pushDeliveries: createPushDeliveryStore(db),
    callbackAttempts: createCallbackAttemptStore(db),
    rateLimits: createRateLimitStore(db),
    client,
    taskQueue,
    episodeOptions: DEFAULT_EPISODE_OPTIONS,
    families,
    lookbackSeconds,
    pageSize,
    now: () => now,
    ...(questions ? { interactions: createInteractionStore(db) } : {}),
    ...(opsAlerts ? { callbackExhausted: raiser(client, taskQueue, now, opsAlerts) } : {}),
  });
  return { sweep, runs, claims };
}

function raiser(client: Client, taskQueue: string, now: Date, opsAlerts: true | { throttle: () => void }) {
  const raise = callbackExhaustedRaiser(client, taskQueue, () => now);
  if (opsAlerts === true) return raise;
  return async (...args: Parameters<typeof raise>): Promise<void> => {
    opsAlerts.throttle();
    return raise(...args);
  };
}
