// One suite's system on the shared test servers: its config (its own database and task queue), stores, a Temporal
// client, a test worker and (startFamilyStack) an API, started in that order and stopped in reverse.
import type { Client } from '@temporalio/client';
import type { ApiHandle, ApiOptions } from '../../api/server';
import type { Config } from '../../config';
import type { OriginPacing } from '../../delivery/callback/pacing';
import { pushSenderFor } from '../../delivery/push/sender';
import type { HostLookup } from '../../delivery/ssrfGuard';
import type { Metrics } from '../../platform/metrics';
import type { Stores } from '../../store';
import type { Mongo } from '../../store/mongo';
import {
  openStores,
  startTestApi,
  startTestWorker,
  temporalClient,
  type ApiClient,
  type RunningWorker,
} from './harness';
import type { PushService } from './pushService';
import { testConfig } from './stack';
import { createSweepActivities, type SweepDeps } from '../../activities/sweep';
import { DEFAULT_EPISODE_OPTIONS } from '../../contract/workflows';
import { episodeOptions } from '../../client/emitter';
import { healthOptions } from '../../client/health';
import { sweepRepairs } from '../../runs/sweepRepairs';

export interface WorkerStackOptions {
  /** A loopback push service: the worker (and the API) each get a sender of their own that trusts it. */
  push?: PushService;
  /** How the worker resolves push and callback hosts (default: the system's resolver). */
  lookup?: HostLookup;
  /** The worker's whole deadline for one push (default: the sender's). */
  pushTimeoutMs?: number;
  /** What the worker logs (default: nothing). */
  workerLog?: (line: string) => void;
  /** The worker's application metrics (default: none). */
  metrics?: Metrics;
  /** The worker's pacing of callback attempts (default: one built from the config). */
  callbackPacing?: OriginPacing;
  /** Temporal's activity retry backoff a tenth as long (support/fastRetries.ts). */
  fastRetries?: boolean;
  /** The stores as the worker's activities see them (a store made slow on purpose); default: the stack's. */
  workerStores?: (stores: Stores) => Stores;
}

export interface WorkerStack {
  config: Config;
  mongo: Mongo;
  stores: Stores;
  worker: RunningWorker;
  client: Client;
  closeClient(): Promise<void>;
  /** Stops what started, in reverse order; a second call does nothing. */
  stop(): Promise<void>;
}

export interface FamilyStack extends WorkerStack {
  api: ApiHandle;
  /** The API without a token; `.as(user, team)` for a caller. */
  anonymous: ApiClient;
}

/** Starts each step in turn; if one fails, what did start is stopped. */
export async function startInOrder<T>(
  start: (started: (stop: () => Promise<void>) => void, stop: () => Promise<void>) => Promise<T>,
): Promise<T> {
  const stoppers: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const step of stoppers.splice(0).reverse()) await step();
  };
  try {
    return await start((step) => stoppers.push(step), stop);
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}

/** testConfig(vars), then stores, a Temporal client and a worker on it (a suite that needs no API). */
export function startWorkerStack(
  vars: Record<string, string>,
  options: WorkerStackOptions = {},
): Promise<WorkerStack> {
  return startInOrder(async (started, stop) => {
    const config = testConfig(vars);
    const { push, lookup, pushTimeoutMs, workerLog, metrics, callbackPacing, fastRetries, workerStores } =
      options;
    const { mongo, stores } = await openStores(config);
    started(() => mongo.client.close());
    const { client, close: closeClient } = await temporalClient(config);
    started(closeClient);
    const worker = await startTestWorker(config, workerStores?.(stores) ?? stores, {
      ...(push
        ? { pushSender: pushSenderFor(config, { ca: push.ca, lookup, timeoutMs: pushTimeoutMs }) }
        : {}),
      ...(lookup ? { callbackLookup: lookup } : {}),
      ...(workerLog ? { log: workerLog } : {}),
      ...(metrics ? { metrics } : {}),
      ...(callbackPacing ? { callbackPacing } : {}),
      fastRetries,
    });
    started(() => worker.stop());
    return { config, mongo, stores, client, closeClient, worker, stop };
  });
}

export interface FamilyStackOptions extends WorkerStackOptions {
  /** The API's logs and metrics (default: quiet but for a 5xx, metrics of its own). */
  api?: Pick<ApiOptions, 'log' | 'logger' | 'metrics'>;
}

/** startWorkerStack, then an API on the same config. */
export function startFamilyStack(
  vars: Record<string, string>,
  options: FamilyStackOptions = {},
): Promise<FamilyStack> {
  return startInOrder(async (started, stop) => {
    const workerStack = await startWorkerStack(vars, options);
    started(() => workerStack.stop());
    const { config } = workerStack;
    const pushSender = options.push ? pushSenderFor(config, { ca: options.push.ca }) : undefined;
    const { api, client: anonymous } = await startTestApi(config, {
      ...options.api,
      ...(pushSender ? { pushSender } : {}),
    });
    started(() => api.close());
    return { ...workerStack, api, anonymous, stop };
  });
}

/** The sweep's activities on the stack's stores and Temporal, as a test calls one pass by hand (an hour's window). */
export function sweepActivitiesOf(stack: WorkerStack, overrides: Partial<SweepDeps> = {}) {
  return createSweepActivities({
    ...stack.stores,
    client: stack.client,
    taskQueue: stack.config.temporalTaskQueue,
    ...sweepRepairs({
      stores: stack.stores,
      client: stack.client,
      taskQueue: stack.config.temporalTaskQueue,
      healthOptions: healthOptions(stack.config),
      episodeOptions: episodeOptions(stack.config),
      onError: (runId, err) => console.error(`finishing what a request of ${runId} began: ${String(err)}`),
    }),
    episodeOptions: DEFAULT_EPISODE_OPTIONS,
    families: { ops: false },
    lookbackSeconds: 3600,
    pageSize: 100,
    now: () => new Date(),
    ...overrides,
  });
}
