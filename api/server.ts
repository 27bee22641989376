// The API's composition root: config → Mongo, Temporal client → stores, runs service → Koa.
// First: holds the young generation while the modules below load (see there).
import { youngGenerationForTraffic } from './youngGeneration';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import { Client, Connection } from '@temporalio/client';
import { exitOnConfigError, loadConfigOrExit, type Config } from '../config';
import { temporalConnectionOptions } from '../client/connection';
import { assertSearchAttributes } from '../client/searchAttributes';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { searchAttributesProbe } from '../client/searchAttributes';
import { createHealthSignaler, healthOptions } from '../client/health';
import { notifyOperator } from '../client/operator';
import { sendTestCallback } from '../activities/callback';
import { fanOut } from '../activities/push';
import { startCallbackRedelivery } from '../client/redeliver';
import { startCallbackRecover } from '../client/recover';
import { digestPrefsChanged } from '../client/digest';
import { createRunsService } from '../runs/service';
import { withDeadline } from '../lib/deadline';
import { pushSenderFor, type PushSender } from '../net/pushSender';
import { connectMongo, pingMongo, type Mongo } from '../store/mongo';
import { createStores, ensureAllIndexes } from '../store';
import { createApp } from './app';
import { listenMetrics } from './routes/metrics';
import { createEpisodeView } from './episodesView';
import { Registry } from 'prom-client';
import { createMetrics, type Metrics } from '../observability/metrics';
import { createLogger, logAt, type Log, type Logger } from '../observability/log';
import { startTracing, type Tracing } from '../observability/tracing';

export interface ApiHandle {
  server: Server;
  url: string;
  /** METRICS_PORT's /metrics; undefined: off. */
  metricsUrl?: string;
  close(graceMs?: number): Promise<void>;
}

export interface ApiOptions {
  /** Where the API's lines go; by default the logger's (LOG_LEVEL, LOG_FORMAT), at warn. */
  log?: Log;
  /** The structured logger; by default one from the config, on stdout. */
  logger?: Logger;
  /** The registry GET /metrics shows; by default a new one, without process metrics. */
  metrics?: Metrics;
  /** The push sink for the test route; by default the one the config asks for. */
  pushSender?: PushSender;
  /** The process's started tracing SDK; undefined: no traces (requests get no spans, starts carry none). */
  tracing?: Pick<Tracing, 'clientInterceptors'>;
}

/** Builds every dependency from config and listens. Tests call this with their own config. */
export async function startApi(config: Config, options: ApiOptions = {}): Promise<ApiHandle> {
  const logger =
    options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat, name: 'api' });
  const log = options.log ?? logAt(logger);
  const metrics = options.metrics ?? createMetrics(new Registry(), { processMetrics: false });
  let draining = false;
  const pushSender = options.pushSender ?? pushSenderFor(config);
  const connection = await Connection.connect(temporalConnectionOptions(config));
  try {
    await assertSearchAttributes(connection, config.temporalNamespace);
  } catch (err) {
    await connection.close();
    throw err;
  }
  const mongo: Mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureAllIndexes(mongo.db);
  const client = new Client({
    connection,
    namespace: config.temporalNamespace,
    ...(options.tracing ? { interceptors: options.tracing.clientInterceptors } : {}),
  });
  const stores = createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds });
  const emitter = createOutcomeEmitter({
    client,
    taskQueue: config.temporalTaskQueue,
    runs: stores.runs,
    options: episodeOptions(config),
    metrics,
    emitter: 'api',
  });
  const runsService = createRunsService({
    ...stores,
    emitter,
    health: createHealthSignaler({
      client,
      taskQueue: config.temporalTaskQueue,
      options: healthOptions(config),
    }),
    onEmitError: (runId, err) =>
      log(`outcome emit failed, the sweep will replay it: ${String(err)}`, { runId }),
  });
  const scrape = (): Promise<string> => metrics.registry.metrics();
  const app = createApp({
    auth: {
      jwtSecret: config.authJwtSecret,
      jwks: config.authJwks,
      issuer: config.authIssuer,
      audience: config.authAudience,
      maxLifetimeSeconds: config.authMaxTokenLifetimeSeconds,
      clockSkewSeconds: config.authClockSkewSeconds,
      log,
    },
    runsService,
    runs: stores.runs,
    watches: stores.watches,
    replayOutcome: (runId, teamId) => emitter.emitRunOutcome(runId, undefined, teamId, 'ALLOW_DUPLICATE'),
    episodes: createEpisodeView(stores),
    runHealth: stores.runHealth,
    notifyOperator: (report) => notifyOperator(client, config.temporalTaskQueue, report, new Date()),
    testCallback: (run) =>
      sendTestCallback(
        {
          allowPrivate: config.callbackAllowPrivate,
          timeoutMs: config.callbackTimeoutSeconds * 1000,
          secretOverlapSeconds: config.callbackSecretOverlapSeconds,
          now: () => new Date(),
        },
        run,
        `${run._id}:test:${randomUUID()}`,
      ),
    rateLimits: stores.rateLimits,
    routeErrorLimits: { perRun: config.routeErrorRatePerRun, perTeam: config.routeErrorRatePerTeam },
    callbackTestLimits: {
      perRun: config.callbackTestRate,
      perUser: config.callbackTestRatePerUser,
      perTeam: config.callbackTestRatePerTeam,
    },
    redeliverCallback: (input) => startCallbackRedelivery(client, config.temporalTaskQueue, input),
    callbackRedeliverLimits: {
      perRun: config.callbackRedeliverRate,
      perUser: config.callbackRedeliverRatePerUser,
      perTeam: config.callbackRedeliverRatePerTeam,
    },
    runCreateLimit: config.runCreateRate,
    callbackRecovers: stores.callbackRecovers,
    startRecover: (input) => startCallbackRecover(client, config.temporalTaskQueue, input),
    recoverLimit: config.callbackRecoverRatePerTeam,
    recoverBounds: {
      maxSends: config.callbackRecoverMax,
      resendAfterSeconds: config.callbackRecoverResendAfterSeconds,
    },
    callbackRotateLimit: config.callbackRotateRate,
    probes: {
      temporal: async () => void (await connection.workflowService.getSystemInfo({})),
      mongo: () => pingMongo(mongo.db),
      searchAttributes: searchAttributesProbe(connection, config.temporalNamespace),
      pushKeys: config.vapid
        ? async () => {
            if (!pushSender) throw new Error('web push is on but its sender is not loaded');
          }
        : undefined,
      draining: () => draining,
    },
    notifications: config.vapid
      ? {
          vapidPublicKey: config.vapid.publicKey,
          subscriptions: stores.pushSubscriptions,
          prefs: stores.notificationPrefs,
          deliveries: stores.pushDeliveries,
          // The worker's fan-out over the API's sender: a test push prunes and counts toward pruning as an
          // episode's does.
          fanOut: pushSender
            ? (subs, payload, { width, signal, onDelivered }) =>
                fanOut(
                  {
                    subscriptions: stores.pushSubscriptions,
                    sender: pushSender,
                    width,
                    log,
                    signal,
                    now: () => new Date(),
                    pruneMinHours: config.pushPruneMinHours,
                    // No operator family here: a fault it weighs is logged, and the worker's next one pages.
                    pushServices: stores.pushServices,
                    configFaultRule: {
                      minSubscriptions: config.pushConfigFaultMinSubscriptions,
                      windowSeconds: config.pushConfigFaultWindowSeconds,
                    },
                  },
                  subs,
                  payload,
                  onDelivered,
                )
            : undefined,
          endpointRules: { allowInsecure: config.pushAllowPrivate, allowlist: config.pushEndpointAllowlist },
          rateLimits: stores.rateLimits,
          maxSubscriptionsPerUser: config.pushMaxSubscriptionsPerUser,
          testPushRate: config.pushTestRate,
          studioUrl: config.studioUrl,
          prefsChanged: (teamId, userId) => digestPrefsChanged(client, teamId, userId),
          now: () => new Date(),
          log,
        }
      : undefined,
    log,
    trustProxy: config.trustProxy,
    metrics: config.metricsToken ? { scrape, token: config.metricsToken } : undefined,
    logRequest: (fields) => logger.debug(fields, 'request'),
    traceRequests: options.tracing !== undefined,
  });
  const metricsServer =
    config.metricsPort === undefined ? undefined : await listenMetrics(scrape, config.metricsPort, config);
  const server = await new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
    s.once('error', reject);
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const metricsAddress = metricsServer?.address();
  return {
    server,
    url: `http://${config.host}:${port}`,
    metricsUrl:
      typeof metricsAddress === 'object' && metricsAddress
        ? `http://${config.host}:${metricsAddress.port}/metrics`
        : undefined,
    /**
     * Stops accepting, lets the requests in flight finish (at most `graceMs`, SHUTDOWN_GRACE_SECONDS by
     * default), then cuts what is left and closes the connections to the servers.
     */
    async close(graceMs = config.shutdownGraceSeconds * 1000) {
      draining = true;
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // Keep-alive connections with nothing in flight go now; the busy ones once their answer is out.
      const idle = setInterval(() => server.closeIdleConnections(), 50);
      server.closeIdleConnections();
      await withDeadline(closed, graceMs, () => undefined);
      clearInterval(idle);
      server.closeAllConnections();
      await closed;
      if (metricsServer) {
        metricsServer.closeAllConnections();
        await new Promise((resolve) => metricsServer.close(resolve));
      }
      pushSender?.close();
      await connection.close();
      await mongo.client.close();
    },
  };
}

async function main(): Promise<void> {
  const config = loadConfigOrExit();
  const logger = createLogger({ level: config.logLevel, format: config.logFormat, name: 'api' });
  const tracing = await startTracing(config.tracing, 'flow-notify-api');
  const api = await startApi(config, { logger, metrics: createMetrics(new Registry()), tracing });
  youngGenerationForTraffic();
  if (api.metricsUrl) logger.info(`flow-notify api: metrics on ${api.metricsUrl}`);
  logger.info(`flow-notify api: listening on ${api.url}${tracing ? '; traces on' : ''}`);
  const stop = (signal: string): void => {
    logger.info(`flow-notify api: ${signal}: no new connections; finishing the requests in flight`);
    api
      .close()
      .then(() => tracing?.shutdown())
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

if (require.main === module) {
  main().catch((err) => {
    exitOnConfigError(err);
    console.error(`flow-notify api: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
}
