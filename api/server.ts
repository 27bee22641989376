// The API's composition root: config → Mongo, Temporal client → stores, runs service (services.ts) → each router's
// dependencies (its wiring) → Koa.
// First: holds the young generation while the modules below load (see there).
import { youngGenerationForTraffic } from '../platform/youngGeneration';
import type { Server } from 'node:http';
import { Registry } from 'prom-client';
import { exitOnConfigError, loadConfigOrExit, type Config } from '../config';
import { pushSenderFor, type PushSender } from '../delivery/push/sender';
import { withDeadline } from '../platform/deadline';
import { listenMetrics } from '../platform/http/metricsRoutes';
import { createLogger, logAt, type Log, type Logger } from '../platform/log';
import { createMetrics, type Metrics } from '../platform/metrics';
import { startTracing, type Tracing } from '../platform/tracing';
import type { Stores } from '../store';
import { createApp, type AppDeps } from './app';
import { wireHealthProbes } from './healthWiring';
import { wireCallbacksRouter } from './routes/callbacksWiring';
import { wireEndpointsRouter } from './routes/endpointsWiring';
import { wireNotificationsRouter } from './routes/notificationsWiring';
import { wireRunsRouter } from './routes/runsWiring';
import { wireInteractionsRouter } from './routes/interactionsWiring';
import { wireReceiptsRouter } from './routes/receiptsWiring';
import { wireTeamsRouter } from './routes/teamsWiring';
import { wireWatchesRouter } from './routes/watchesWiring';
import { connectServices } from './services';

export interface ApiHandle {
  server: Server;
  url: string;
  /** METRICS_PORT's /metrics; undefined: off. */
  metricsUrl?: string;
  /** Drains the server (at most `graceMs`), then closes the metrics server and the connections to the servers. */
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
  /** The stores as the API sees them (a store held on purpose, in tests); by default as built. */
  stores?: (stores: Stores) => Stores;
}

/** Builds every dependency from config and listens. Tests call this with their own config. */
export async function startApi(config: Config, options: ApiOptions = {}): Promise<ApiHandle> {
  const logger =
    options.logger ?? createLogger({ level: config.logLevel, format: config.logFormat, name: 'api' });
  const log = options.log ?? logAt(logger);
  const metrics = options.metrics ?? createMetrics(new Registry(), { processMetrics: false });
  const pushSender = options.pushSender ?? pushSenderFor(config);
  const services = await connectServices(config, {
    log,
    metrics,
    pushSender,
    tracing: options.tracing,
    stores: options.stores,
  });
  let draining = false;
  const scrape = (): Promise<string> => metrics.registry.metrics();
  const app = createApp({
    ...appOptions(config, logger, log, options),
    metrics: config.metricsToken ? { scrape, token: config.metricsToken } : undefined,
    health: wireHealthProbes(services, () => draining),
    runs: wireRunsRouter(services),
    callbacks: wireCallbacksRouter(services),
    endpoints: wireEndpointsRouter(services),
    watches: wireWatchesRouter(services),
    teams: wireTeamsRouter(services),
    interactions: wireInteractionsRouter(services),
    notifications: wireNotificationsRouter(services),
    receipts: wireReceiptsRouter(services),
  });
  const metricsServer =
    config.metricsPort === undefined ? undefined : await listenMetrics(scrape, config.metricsPort, config);
  const server = await listen(app, config);
  const metricsPort = metricsServer && portOf(metricsServer);
  return {
    server,
    url: `http://${config.host}:${portOf(server) ?? config.port}`,
    metricsUrl: metricsPort === undefined ? undefined : `http://${config.host}:${metricsPort}/metrics`,
    async close(graceMs = config.shutdownGraceSeconds * 1000) {
      draining = true;
      await drain(server, graceMs);
      // What the last requests observed reaches run health before the connection goes.
      await services.health.flushAll();
      if (metricsServer) {
        metricsServer.closeAllConnections();
        await new Promise((resolve) => metricsServer.close(resolve));
      }
      services.pushSender?.close();
      await services.connection.close();
      await services.mongo.client.close();
    },
  };
}

/** The app's settings that are not a router's: who is let in, what is logged and traced, the proxy in front. */
function appOptions(
  config: Config,
  logger: Logger,
  log: Log,
  options: ApiOptions,
): Pick<AppDeps, 'auth' | 'log' | 'trustProxy' | 'logRequest' | 'traceRequests'> {
  return {
    auth: {
      jwtSecret: config.authJwtSecret,
      jwks: config.authJwks,
      issuer: config.authIssuer,
      audience: config.authAudience,
      maxLifetimeSeconds: config.authMaxTokenLifetimeSeconds,
      clockSkewSeconds: config.authClockSkewSeconds,
      log,
    },
    log,
    trustProxy: config.trustProxy,
    logRequest: (fields) => logger.debug(fields, 'request'),
    traceRequests: options.tracing !== undefined,
  };
}

function listen(app: ReturnType<typeof createApp>, config: Pick<Config, 'port' | 'host'>): Promise<Server> {
  return new Promise<Server>((resolve, reject) => {
    const s = app.listen(config.port, config.host, () => resolve(s));
    s.once('error', reject);
  });
}

function portOf(server: Server): number | undefined {
  const address = server.address();
  return typeof address === 'object' && address ? address.port : undefined;
}

/**
 * Stops accepting, lets the requests in flight finish (at most `graceMs`, SHUTDOWN_GRACE_SECONDS by default), then
 * cuts what is left.
 */
async function drain(server: Server, graceMs: number): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // Keep-alive connections with nothing in flight go now; the busy ones once their answer is out.
  const idle = setInterval(() => server.closeIdleConnections(), 50);
  server.closeIdleConnections();
  await withDeadline(closed, graceMs, () => undefined);
  clearInterval(idle);
  server.closeAllConnections();
  await closed;
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
