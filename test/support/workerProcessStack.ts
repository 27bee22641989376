// A system whose worker is a child process (a SIGKILL is a real crash; its CPU is its own, as `npm start` runs
// it), with the stores, a Temporal client and the API in this process, on the variables `vars` (processStackVars).
// Started in that order and stopped in reverse, the worker's sweep schedule deleted.
import type { Client } from '@temporalio/client';
import type { ApiHandle } from '../../api/server';
import { loadConfig, type Config } from '../../config';
import type { Stores } from '../../store';
import type { Mongo } from '../../store/mongo';
import { openStores, startTestApi, temporalClient, type ApiClient } from './harness';
import { deleteSweepSchedule } from './processStack';
import { WorkerProcess, type WorkerProcessOptions } from './workerProcess';

export interface WorkerProcessStack {
  config: Config;
  mongo: Mongo;
  stores: Stores;
  client: Client;
  worker: WorkerProcess;
  api: ApiHandle;
  /** The API without a token; `.as(user, team)` for a caller. */
  anonymous: ApiClient;
  /** Stops what started, in reverse order; a second call does nothing. */
  stop(): Promise<void>;
}

export async function startWorkerProcessStack(
  vars: Record<string, string>,
  worker: Omit<WorkerProcessOptions, 'vars'> = {},
): Promise<WorkerProcessStack> {
  const config = loadConfig(vars);
  const stoppers: (() => Promise<unknown>)[] = [];
  const stop = async (): Promise<void> => {
    for (const step of stoppers.splice(0).reverse()) await step().catch(() => undefined);
  };
  // The worker starts beside the rest (its start is the longest step).
  const starting = WorkerProcess.start({ ...worker, vars });
  starting.catch(() => undefined); // handled: awaited below, or stopped on the way out
  try {
    const { mongo, stores } = await openStores(config);
    stoppers.push(() => mongo.client.close());
    const { client, close } = await temporalClient(config);
    stoppers.push(close, () => deleteSweepSchedule(client, config.temporalTaskQueue));
    const workerProcess = await starting;
    stoppers.push(() => workerProcess.stop());
    const { api, client: anonymous } = await startTestApi(config);
    stoppers.push(() => api.close());
    return { config, mongo, stores, client, worker: workerProcess, api, anonymous, stop };
  } catch (err) {
    await stop();
    await starting.then((started) => started.stop()).catch(() => undefined);
    throw err;
  }
}
