// One suite's system on the shared test servers: its config (its own database and task queue), stores, a Temporal
// client, a test worker and an API, started in that order and stopped in reverse.
import type { Client } from '@temporalio/client';
import type { ApiHandle } from '../../api/server';
import type { Config } from '../../config';
import type { OriginPacing } from '../../delivery/callback/pacing';
import { pushSenderFor } from '../../delivery/push/sender';
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

export interface FamilyStackOptions {
  /** A loopback push service: the worker and the API each get a sender of their own that trusts it. */
  push?: PushService;
  /** What the worker logs (default: nothing). */
  workerLog?: (line: string) => void;
  /** The worker's pacing of callback attempts (default: one built from the config). */
  callbackPacing?: OriginPacing;
}

export interface FamilyStack {
  config: Config;
  mongo: Mongo;
  stores: Stores;
  worker: RunningWorker;
  api: ApiHandle;
  /** The API without a token; `.as(user, team)` for a caller. */
  anonymous: ApiClient;
  client: Client;
  closeClient(): Promise<void>;
  /** Stops the API, the worker, the Temporal client and the store, in that order; a second call does nothing. */
  stop(): Promise<void>;
}

/** testConfig(vars), then the system on it; if a part fails to start, what did start is stopped. */
export async function startFamilyStack(
  vars: Record<string, string>,
  options: FamilyStackOptions = {},
): Promise<FamilyStack> {
  const config = testConfig(vars);
  const { push, workerLog, callbackPacing } = options;
  const sender = () => (push ? { pushSender: pushSenderFor(config, { ca: push.ca }) } : {});
  const stoppers: (() => Promise<void>)[] = [];
  const stop = async (): Promise<void> => {
    for (const step of stoppers.splice(0).reverse()) await step();
  };
  try {
    const { mongo, stores } = await openStores(config);
    stoppers.push(() => mongo.client.close());
    const { client, close: closeClient } = await temporalClient(config);
    stoppers.push(closeClient);
    const worker = await startTestWorker(config, stores, {
      ...sender(),
      ...(workerLog ? { log: workerLog } : {}),
      ...(callbackPacing ? { callbackPacing } : {}),
    });
    stoppers.push(() => worker.stop());
    const { api, client: anonymous } = await startTestApi(config, sender());
    stoppers.push(() => api.close());
    return { config, mongo, stores, worker, api, anonymous, client, closeClient, stop };
  } catch (err) {
    await stop().catch(() => undefined);
    throw err;
  }
}
