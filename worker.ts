// The worker's composition root: config → Mongo, Temporal → push sink → createActivities → Worker.
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { createActivities } from './activities';
import { assertSearchAttributes } from './client/searchAttributes';
import { ensureSweepSchedule } from './client/schedules';
import { ConfigError, loadConfigOrExit, type Config } from './config';
import { pushSenderFor, type PushSender } from './net/pushSender';
import { createStores, ensureAllIndexes, type Stores } from './store';
import { connectMongo } from './store/mongo';

export interface WorkerDeps {
  config: Config;
  connection: NativeConnection;
  client: Client;
  stores: Stores;
  pushSender?: PushSender;
  /** Tests and benchmarks bundle the workflows once and share the bundle between workers. */
  workflowBundle?: WorkflowBundle;
  log?: (line: string) => void;
}

export const WORKFLOWS_PATH = require.resolve('./workflows');

export async function createWorker(deps: WorkerDeps): Promise<Worker> {
  const { config } = deps;
  await assertSearchAttributes(deps.client.connection, config.temporalNamespace);
  await ensureSweepSchedule(deps.client, config.temporalTaskQueue, config.sweepIntervalSeconds);
  return Worker.create({
    connection: deps.connection,
    namespace: config.temporalNamespace,
    taskQueue: config.temporalTaskQueue,
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    // The SDK sends a heartbeat at most every 0.8 × the heartbeat timeout (8 s of the fan-out's 10 s), leaving a
    // busy worker 2 s to get it through; a fan-out starved for CPU then timed out and was sent again. Every 2 s
    // leaves it 8.
    maxHeartbeatThrottleInterval: '2 seconds',
    activities: createActivities({
      config,
      stores: deps.stores,
      client: deps.client,
      pushSender: deps.pushSender,
      log: deps.log,
    }),
  });
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureAllIndexes(mongo.db);
  const stores = createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds });
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  const clientConnection = await Connection.connect({ address: config.temporalAddress });
  const client = new Client({ connection: clientConnection, namespace: config.temporalNamespace });
  const pushSender = pushSenderFor(config);
  const worker = await createWorker({ config, connection, client, stores, pushSender });
  console.log(
    `flow-notify worker: task queue ${config.temporalTaskQueue} on ${config.temporalAddress}; ` +
      `web push ${pushSender ? 'on' : 'off (no VAPID keys)'}; sweep every ${config.sweepIntervalSeconds}s`,
  );
  try {
    await worker.run(); // returns after SIGINT/SIGTERM once in-flight tasks are done
  } finally {
    pushSender?.close();
    await clientConnection.close();
    await connection.close();
    await mongo.client.close();
  }
}

if (require.main === module) {
  main().catch((err) => {
    if (err instanceof ConfigError) {
      console.error(`flow-notify: configuration error: ${err.message}`);
      process.exit(78);
    }
    console.error(`flow-notify worker: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
