// The worker's composition root: config → Mongo, Temporal → push sink → createActivities → Worker.
// First: holds the young generation while the modules below load (see there).
import {
  withWorkflowThreadYoungGenerationCapped,
  youngGenerationForTraffic,
} from './platform/youngGeneration';
import { existsSync } from 'node:fs';
import type { Server } from 'node:http';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import {
  NativeConnection,
  Runtime,
  Worker,
  type WorkflowBundle,
  type WorkflowBundleOption,
} from '@temporalio/worker';
import { activityContext } from './activities/activityContext';
import type { Metrics } from './platform/metrics';
import { startTracing, tracingWorkflowInterceptors, type Tracing } from './platform/tracing';
import {
  createLogger,
  logAt,
  temporalLevel,
  temporalLogger,
  workflowFields,
  type Log,
  type Logger,
} from './platform/log';
import { createActivities } from './activities';
import { temporalConnectionOptions } from './client/connection';
import { searchAttributesProbe } from './client/searchAttributeCheck';
import { assertSearchAttributes } from './client/searchAttributeCheck';
import { episodeOptions } from './client/emitter';
import { healthOptions } from './client/health';
import { ensureSweepSchedule } from './client/schedules';
import { exitOnConfigError, loadConfigOrExit, type Config } from './config';
import { freePort } from './platform/freePort';
import { pushSenderFor, type PushSender } from './delivery/push/sender';
import { createOriginPacing, type OriginPacing } from './delivery/callback/pacing';
import type { HostLookup } from './delivery/ssrfGuard';
import { sweepRepairs } from './runs/sweepRepairs';
import { createStores, ensureAllIndexes, type Stores } from './store';
import { connectMongo, pingMongo, type Mongo } from './store/mongo';

export interface WorkerDeps {
  config: Config;
  connection: NativeConnection;
  client: Client;
  stores: Stores;
  pushSender?: PushSender;
  /** Tests inject a resolver for callbacks here (the push sender carries its own). */
  callbackLookup?: HostLookup;
  /** Tests and benchmarks bundle the workflows once and share the bundle between workers. */
  workflowBundle?: WorkflowBundle;
  log: Log;
  /** Undefined: no application metrics (WORKER_METRICS_PORT unset). */
  metrics?: Metrics;
  /** Tests hand one in to look at it; default: one built from the config, for this worker. */
  callbackPacing?: OriginPacing;
  /** Undefined: no traces. Given, a given workflowBundle must have been built with the tracing interceptors. */
  tracing?: Tracing;
}

/**
 * The worker's pacing of callback attempts per receiver origin (CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN, and a breaker
 * per origin and team after CALLBACK_BREAKER_FAILURES failures in a row of the team's callbacks): one per worker
 * process, its breakers' changes logged and in the callback_breaker_open gauge (teams held at the origin).
 */
function callbackPacingFor(
  config: Pick<
    Config,
    'callbackMaxInFlightPerOrigin' | 'callbackBreakerFailures' | 'callbackBreakerCooldownSeconds'
  >,
  log: Log,
  metrics?: Metrics,
): OriginPacing {
  return createOriginPacing({
    maxInFlight: config.callbackMaxInFlightPerOrigin,
    breakerFailures: config.callbackBreakerFailures,
    cooldownMs: config.callbackBreakerCooldownSeconds * 1000,
    maxCooldownMs: config.callbackBreakerCooldownSeconds * 20 * 1000,
    onBreakerChange: (change) => {
      if (change.state === 'open')
        log(
          `callback: breaker open for ${change.origin} after ${change.failures} failures in a row of team ` +
            `${change.tenant}'s callbacks; they are held for ${Math.round(change.cooldownMs / 1000)} s, then one ` +
            'probe goes',
          { origin: change.origin, teamId: change.tenant, breaker: 'open' },
        );
      else if (change.state === 'closed')
        log(
          `callback: breaker closed for ${change.origin} (team ${change.tenant}): it answered again after ` +
            `${Math.round(change.openForMs / 1000)} s held`,
          { origin: change.origin, teamId: change.tenant, breaker: 'closed' },
        );
      metrics?.callbackBreaker(change.origin, change.state === 'forgotten' ? undefined : change.openAtOrigin);
    },
  });
}

export const WORKFLOWS_PATH = require.resolve('./workflows');

/**
 * `npm run build` bundles the workflows ahead of time into these files beside the compiled worker (dist/): one
 * plain, one with the tracing workflow interceptors (a worker with tracing on loads that one).
 */
export const WORKFLOW_BUNDLE_FILE = 'workflow-bundle.js';
export const TRACED_WORKFLOW_BUNDLE_FILE = 'workflow-bundle-traced.js';

/** Workflow interceptor modules of a bundle: the tracing ones when traced (resolved from `from`), none otherwise. */
export const workflowInterceptorModules = (traced: boolean, from?: string): string[] =>
  traced ? [tracingWorkflowInterceptors(from)] : [];

const prebuiltBundle = (traced: boolean, dir = __dirname): string =>
  path.join(dir, traced ? TRACED_WORKFLOW_BUNDLE_FILE : WORKFLOW_BUNDLE_FILE);

/**
 * The workflow code: a bundle given in, else the prebuilt one of WORKFLOW_BUNDLE_DIR (which must hold it) or of a
 * build, else the sources, bundled at start.
 */
export function workflowCode(
  traced: boolean,
  given: WorkflowBundle | undefined,
  bundleDir: string | undefined,
):
  | { workflowBundle: WorkflowBundleOption }
  | { workflowsPath: string; interceptors: { workflowModules: string[] } } {
  if (given) return { workflowBundle: given };
  const prebuilt = prebuiltBundle(traced, bundleDir);
  if (bundleDir !== undefined && !existsSync(prebuilt))
    throw new Error(`WORKFLOW_BUNDLE_DIR holds no ${path.basename(prebuilt)} (npm run build writes it)`);
  return existsSync(prebuilt)
    ? { workflowBundle: { codePath: prebuilt } }
    : {
        workflowsPath: WORKFLOWS_PATH,
        interceptors: { workflowModules: workflowInterceptorModules(traced) },
      };
}

export async function createWorker(deps: WorkerDeps): Promise<Worker> {
  const { config } = deps;
  await assertSearchAttributes(deps.client.connection, config.temporalNamespace);
  await ensureSweepSchedule(deps.client, config.temporalTaskQueue, config.sweepIntervalSeconds);
  const code = workflowCode(deps.tracing !== undefined, deps.workflowBundle, config.workflowBundleDir);
  return Worker.create({
    connection: deps.connection,
    namespace: config.temporalNamespace,
    taskQueue: config.temporalTaskQueue,
    ...code,
    ...(deps.tracing
      ? {
          interceptors: {
            ...('interceptors' in code ? code.interceptors : {}),
            ...deps.tracing.workerOptions.interceptors,
          },
          sinks: deps.tracing.workerOptions.sinks,
        }
      : {}),
    // The SDK sends a heartbeat at most every 0.8 × the heartbeat timeout (8 s of the fan-out's 10 s), leaving a
    // busy worker 2 s to get it through; a fan-out starved for CPU then timed out and was sent again. Every 2 s
    // leaves it 8.
    maxHeartbeatThrottleInterval: '2 seconds',
    // On SIGTERM the worker stops polling and gives the activities in flight this long; then it cancels them (a
    // fan-out stops starting sends, its deliveries so far recorded) and, if one still hangs, gives up 15 s later.
    shutdownGraceTime: `${config.shutdownGraceSeconds} seconds`,
    shutdownForceTime: `${config.shutdownGraceSeconds + 15} seconds`,
    ...(config.workerMaxConcurrentActivities
      ? { maxConcurrentActivityTaskExecutions: config.workerMaxConcurrentActivities }
      : {}),
    ...(config.workerMaxConcurrentWorkflowTasks
      ? { maxConcurrentWorkflowTaskExecutions: config.workerMaxConcurrentWorkflowTasks }
      : {}),
    activities: createActivities({
      config,
      stores: deps.stores,
      client: deps.client,
      pushSender: deps.pushSender,
      callbackLookup: deps.callbackLookup,
      callbackPacing: deps.callbackPacing ?? callbackPacingFor(config, deps.log, deps.metrics),
      log: deps.log,
      metrics: deps.metrics,
      repairs: sweepRepairs({
        stores: deps.stores,
        client: deps.client,
        taskQueue: config.temporalTaskQueue,
        healthOptions: healthOptions(config),
        episodeOptions: episodeOptions(config),
        onError: (runId, err) => deps.log(`sweep: finishing what a request began: ${String(err)}`, { runId }),
      }),
    }),
  });
}

/** The activities' lines: at warn (they report what went wrong), with what the running activity tells. */
function activityLog(logger: Logger): Log {
  return (line, fields) => {
    const info = activityContext()?.info;
    const known = info
      ? workflowFields({
          workflowId: info.workflowExecution?.workflowId,
          workflowType: info.workflowType,
          activityType: info.activityType,
        })
      : {};
    logger.warn({ ...known, ...fields }, line);
  };
}

/**
 * The worker's /metrics on WORKER_METRICS_PORT: the application's registry, then the Temporal SDK's own metrics,
 * read from its exporter on a loopback port nobody else is told of, so one target serves both. Loaded only then
 * (Koa and its router stay out of a worker without the port).
 */
async function startWorkerMetrics(config: Config, metrics: Metrics, sdkMetricsUrl: string): Promise<Server> {
  const { listenMetrics } = await import('./platform/http/metricsRoutes');
  const { readSdkMetrics } = await import('./platform/sdkMetrics');
  return listenMetrics(
    async () => {
      const [own, sdk] = await Promise.all([metrics.registry.metrics(), readSdkMetrics(sdkMetricsUrl)]);
      return `${own}\n${sdk}`;
    },
    config.workerMetricsPort ?? 0,
    config,
  );
}

/**
 * The worker's own probes on WORKER_HEALTH_PORT: /healthz (the process serves) and /readyz (the worker polls,
 * Temporal and Mongo answer, the search attributes exist; 503 once shutdown began). Koa is loaded only then.
 */
async function startWorkerHealth(
  config: Config,
  worker: Worker,
  clientConnection: Connection,
  mongo: Mongo,
  log: Log,
): Promise<Server> {
  const { default: Koa } = await import('koa');
  const { healthRouter } = await import('./platform/http/healthRoutes');
  const app = new Koa();
  const router = healthRouter(
    {
      temporal: async () => {
        if (worker.getState() !== 'RUNNING') throw new Error(`worker ${worker.getState().toLowerCase()}`);
        await clientConnection.workflowService.getSystemInfo({});
      },
      mongo: () => pingMongo(mongo.db),
      searchAttributes: searchAttributesProbe(clientConnection, config.temporalNamespace),
      draining: () => ['STOPPING', 'DRAINING', 'DRAINED', 'STOPPED', 'FAILED'].includes(worker.getState()),
    },
    { log },
  );
  app.use(router.routes());
  return new Promise((resolve, reject) => {
    const server = app.listen(config.workerHealthPort ?? 0, config.host, () => resolve(server));
    server.once('error', reject);
  });
}

async function loadMetrics(): Promise<Metrics> {
  const [{ Registry }, { createMetrics }] = await Promise.all([
    import('prom-client'),
    import('./platform/metrics'),
  ]);
  return createMetrics(new Registry());
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, name: 'worker' });
  const tracing = await startTracing(config.tracing, 'flow-notify-worker');
  // Application metrics (prom-client) are loaded only when WORKER_METRICS_PORT asks for them.
  const metrics = config.workerMetricsPort === undefined ? undefined : await loadMetrics();
  // The SDK's exporter on a free loopback port (its own server, in the native core); /metrics reads it.
  const sdkMetricsAddress = metrics ? `127.0.0.1:${await freePort()}` : undefined;
  // Before any connection: the runtime is the process's one, and its logger takes the SDK's lines, the native
  // core's included (forwarded, filtered at LOG_LEVEL, never below DEBUG).
  Runtime.install({
    logger: temporalLogger(logger),
    telemetryOptions: {
      logging: { forward: {}, filter: { core: temporalLevel(config.logLevel), other: 'ERROR' } },
      ...(sdkMetricsAddress ? { metrics: { prometheus: { bindAddress: sdkMetricsAddress } } } : {}),
    },
  });
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureAllIndexes(mongo.db);
  const stores = createStores(mongo.db, {
    claimGraceSeconds: config.claimGraceSeconds,
    onClaimTakeover: metrics && ((key) => metrics.claimTakeover(key)),
  });
  const connection = await NativeConnection.connect(temporalConnectionOptions(config));
  const clientConnection = await Connection.connect(temporalConnectionOptions(config));
  const client = new Client({
    connection: clientConnection,
    namespace: config.temporalNamespace,
    ...(tracing ? { interceptors: tracing.clientInterceptors } : {}),
  });
  const pushSender = pushSenderFor(config);
  const worker = await withWorkflowThreadYoungGenerationCapped(() =>
    createWorker({
      config,
      connection,
      client,
      stores,
      pushSender,
      metrics,
      tracing,
      log: activityLog(logger),
    }),
  );
  // The probes listen before the start line: whoever waits for that line may probe at once.
  const health =
    config.workerHealthPort === undefined
      ? undefined
      : await startWorkerHealth(config, worker, clientConnection, mongo, logAt(logger));
  if (health)
    logger.info(`flow-notify worker: probes on http://${config.host}:${config.workerHealthPort}/readyz`);
  const metricsServer =
    metrics && sdkMetricsAddress
      ? await startWorkerMetrics(config, metrics, `http://${sdkMetricsAddress}/metrics`)
      : undefined;
  if (metricsServer)
    logger.info(
      `flow-notify worker: metrics on http://${config.metricsHost}:${config.workerMetricsPort}/metrics`,
    );
  logger.info(
    `flow-notify worker: task queue ${config.temporalTaskQueue} on ${config.temporalAddress}; ` +
      `web push ${pushSender ? 'on' : 'off (no VAPID keys)'}; sweep every ${config.sweepIntervalSeconds}s; ` +
      `workflows ${existsSync(prebuiltBundle(tracing !== undefined, config.workflowBundleDir)) ? 'prebuilt bundle' : 'bundled at start'}; ` +
      `traces ${tracing ? 'on' : 'off'}`,
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () =>
      logger.info(
        `flow-notify worker: ${signal}: no new tasks; up to ${config.shutdownGraceSeconds}s for those in flight`,
      ),
    );
  }
  youngGenerationForTraffic();
  try {
    await worker.run(); // returns after SIGINT/SIGTERM once in-flight tasks are done (or cancelled past the grace)
  } finally {
    health?.close();
    metricsServer?.close();
    pushSender?.close();
    await clientConnection.close();
    await connection.close();
    await mongo.client.close();
    await tracing?.shutdown();
  }
}

if (require.main === module) {
  main().catch((err) => {
    exitOnConfigError(err);
    console.error(`flow-notify worker: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
