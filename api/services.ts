// What the API's entry connects and builds once: the servers' clients, the stores, the runs service. Each router's
// wiring (api/routes/*Wiring.ts) takes what its router needs from it.
import { Client, Connection } from '@temporalio/client';
import type { Config } from '../config';
import { temporalConnectionOptions } from '../client/connection';
import { createOutcomeEmitter, episodeOptions, type OutcomeEmitter } from '../client/emitter';
import { createInteractionSignaler } from '../client/interaction';
import { createHealthSignaler, healthBatchMs, healthOptions, type HealthSignaler } from '../client/health';
import { assertSearchAttributes } from '../client/searchAttributeCheck';
import type { PushSender } from '../delivery/push/sender';
import type { Log } from '../platform/log';
import type { Metrics } from '../platform/metrics';
import type { Tracing } from '../platform/tracing';
import { createRunsService, type RunsService } from '../runs/service';
import { createStores, ensureAllIndexes, type Stores } from '../store';
import { connectMongo, type Mongo } from '../store/mongo';

export interface ApiServices {
  config: Config;
  connection: Connection;
  client: Client;
  mongo: Mongo;
  stores: Stores;
  emitter: OutcomeEmitter;
  runsService: RunsService;
  /** Holds run events for run health a moment: flushed before the API exits. */
  health: HealthSignaler;
  /** Web push's sender; undefined: web push is off. */
  pushSender?: PushSender;
  metrics: Metrics;
  log: Log;
  now: () => Date;
}

/** Connects to Temporal (its search attributes checked) and Mongo (its indexes ensured), and builds on them. */
export async function connectServices(
  config: Config,
  options: {
    log: Log;
    metrics: Metrics;
    pushSender?: PushSender;
    tracing?: Pick<Tracing, 'clientInterceptors'>;
    /** The stores as the API sees them (a store held on purpose, in tests); by default as built. */
    stores?: (stores: Stores) => Stores;
  },
): Promise<ApiServices> {
  const { log, metrics, pushSender } = options;
  const connection = await Connection.connect(temporalConnectionOptions(config));
  try {
    await assertSearchAttributes(connection, config.temporalNamespace);
  } catch (err) {
    await connection.close();
    throw err;
  }
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureAllIndexes(mongo.db);
  const client = new Client({
    connection,
    namespace: config.temporalNamespace,
    ...(options.tracing ? { interceptors: options.tracing.clientInterceptors } : {}),
  });
  const built = createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds });
  const stores = options.stores?.(built) ?? built;
  const emitter = createOutcomeEmitter({
    client,
    taskQueue: config.temporalTaskQueue,
    runs: stores.runs,
    options: episodeOptions(config),
    metrics,
    emitter: 'api',
    questions: stores,
  });
  const health = createHealthSignaler({
    client,
    taskQueue: config.temporalTaskQueue,
    options: healthOptions(config),
    batchMs: healthBatchMs(config),
    onError: (runId, err) => log(`run health signal failed: ${String(err)}`, { runId }),
  });
  const runsService = createRunsService({
    ...stores,
    emitter,
    health,
    metrics,
    interactionSignals: createInteractionSignaler(client, config.temporalTaskQueue),
    onEmitError: (runId, err) =>
      log(`after the operation, a step failed: ${String(err)}`, { runId }),
  });
  return {
    config,
    connection,
    client,
    mongo,
    stores,
    emitter,
    runsService,
    health,
    pushSender,
    metrics,
    log,
    now: () => new Date(),
  };
}
