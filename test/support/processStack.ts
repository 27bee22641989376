// What the suites that run the worker or the API as child processes share: the variables that put a process on
// the test servers in a database and task queue of its own, and the teardown of the sweep schedule the worker
// creates on that task queue (a schedule left behind would keep starting sweeps on a queue nobody polls).
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { sweepScheduleId } from '../../client/schedules';
import type { Config } from '../../config';
import { temporalClient } from './harness';
import { TEST_JWT_SECRET, testStack } from './stack';

export interface ProcessStackNames {
  /** MONGO_DB is `<db>_<suffix>`. */
  db: string;
  /** TEMPORAL_TASK_QUEUE is `flow-notify-<queue>-<suffix>`. */
  queue: string;
  /** Default: 8 random hex digits. */
  suffix?: string;
  /** Default: the shared test servers (testStack()). */
  stack?: { mongoUrl: string; temporalAddress: string };
}

/** MONGO_URL, MONGO_DB, TEMPORAL_ADDRESS, TEMPORAL_TASK_QUEUE and AUTH_JWT_SECRET, then `extra` (which wins). */
export function processStackVars(
  names: ProcessStackNames,
  extra: Record<string, string> = {},
): Record<string, string> {
  const suffix = names.suffix ?? randomBytes(4).toString('hex');
  const stack = names.stack ?? testStack();
  return {
    MONGO_URL: stack.mongoUrl,
    MONGO_DB: `${names.db}_${suffix}`,
    TEMPORAL_ADDRESS: stack.temporalAddress,
    TEMPORAL_TASK_QUEUE: `flow-notify-${names.queue}-${suffix}`,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    ...extra,
  };
}

/** Deletes the sweep schedule of `taskQueue` through `client`; one that is not there is fine. */
export async function deleteSweepSchedule(client: Client, taskQueue: string): Promise<void> {
  await client.schedule
    .getHandle(sweepScheduleId(taskQueue))
    .delete()
    .catch(() => undefined);
}

/** The same through a Temporal client of its own on `config`, closed after. */
export async function deleteSweepScheduleOf(config: Config): Promise<void> {
  const { client, close } = await temporalClient(config);
  try {
    await deleteSweepSchedule(client, config.temporalTaskQueue);
  } finally {
    await close();
  }
}
