// The worker's composition root: config → Mongo → createActivities → Worker.
import { NativeConnection, Worker, type WorkflowBundle } from '@temporalio/worker';
import { loadConfigOrExit, type Config } from './config';
import { createActivities } from './activities';
import { connectMongo, ensureIndexes } from './store/mongo';
import { createStores, type Stores } from './store';

export interface WorkerDeps {
  config: Config;
  connection: NativeConnection;
  stores: Stores;
  /** Tests and benchmarks bundle the workflows once and share the bundle between workers. */
  workflowBundle?: WorkflowBundle;
}

export const WORKFLOWS_PATH = require.resolve('./workflows');

export async function createWorker(deps: WorkerDeps): Promise<Worker> {
  const { config } = deps;
  return Worker.create({
    connection: deps.connection,
    namespace: config.temporalNamespace,
    taskQueue: config.temporalTaskQueue,
    ...(deps.workflowBundle ? { workflowBundle: deps.workflowBundle } : { workflowsPath: WORKFLOWS_PATH }),
    activities: createActivities({ episodes: deps.stores.episodes }),
  });
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureIndexes(mongo.db);
  const stores = createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds });
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  const worker = await createWorker({ config, connection, stores });
  console.log(`flow-notify worker: task queue ${config.temporalTaskQueue} on ${config.temporalAddress}`);
  try {
    await worker.run(); // returns after SIGINT/SIGTERM once in-flight tasks are done
  } finally {
    await connection.close();
    await mongo.client.close();
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(`flow-notify worker: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
