// A system whose worker is a child process (a SIGKILL is a real crash; its CPU is its own, as `npm start` runs
// it), with the stores, a Temporal client and the API in this process, on the variables `vars` (processStackVars).
// Started in that order and stopped in reverse, the worker's sweep schedule deleted.
import type { Client } from '@temporalio/client';
import type { ApiHandle } from '../../api/server';
import { loadConfig, type Config } from '../../config';
import type { Stores } from '../../store';
import type { Mongo } from '../../store/mongo';
import { openStores, startTestApi, temporalClient, type ApiClient } from './harness';
import { startInOrder } from './familyStack';
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
  return startInOrder(async (started, stop) => {
    // The worker starts beside the rest (its start is the longest step), and is stopped however the rest goes.
    const starting = WorkerProcess.start({ ...worker, vars });
    const startedWorker = starting.catch(() => undefined); // its failure is thrown below, where it is awaited
    started(async () => {
      await (await startedWorker)?.stop();
    });
    const { mongo, stores } = await openStores(config);
    started(() => mongo.client.close());
    const { client, close } = await temporalClient(config);
    started(close);
    started(() => deleteSweepSchedule(client, config.temporalTaskQueue));
    const workerProcess = await starting;
    const { api, client: anonymous } = await startTestApi(config);
    started(() => api.close());
    return { config, mongo, stores, client, worker: workerProcess, api, anonymous, stop };
  });
}
