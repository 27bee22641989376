// The one place that reads the environment. Every variable of the contract, typed, read once;
// a bad value throws a ConfigError whose message is one line naming the variable.
import { readFileSync } from 'node:fs';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export interface VapidConfig {
  publicKey: string;
  privateKey: string;
  subject: string;
}

export interface JwksConfig {
  url: string;
  issuer: string;
  audience: string;
  userClaim: string;
  teamClaim: string;
  cooldownSeconds: number;
  /** How long a fetched key set is fresh. */
  cacheSeconds: number;
  /** How long past its freshness the last good key set still serves while reloads fail. */
  maxStaleSeconds: number;
}

/** At most `limit` in any `windowSeconds`. */
export interface RateRule {
  limit: number;
  windowSeconds: number;
}

/** A secured Temporal frontend: TLS, optionally mTLS (a client pair) and/or a Temporal Cloud API key. */
export interface TemporalTlsConfig {
  /** The server CA (PEM); undefined: the system's trusted roots (e.g. Temporal Cloud). */
  ca?: Buffer;
  /** The mTLS client certificate and key (PEM). */
  clientCert?: { crt: Buffer; key: Buffer };
  /** The name the server certificate must carry, when it is not the host of TEMPORAL_ADDRESS. */
  serverName?: string;
}

/**
 * Traces over OTLP/HTTP. Only whether they are on and the protocol are decided here; the endpoint, headers,
 * timeout, sampler, batch delays and service name are the standard OTEL_* variables, read by the SDK itself.
 */
export interface TracingConfig {
  protocol: 'http/protobuf' | 'http/json';
}

/** Where Temporal is and how to reach it: what every process that connects needs. */
export interface TemporalConnectionConfig {
  temporalAddress: string;
  /** undefined: plaintext (the dev server). */
  temporalTls?: TemporalTlsConfig;
  /** Sent as `authorization: Bearer <key>` on every call (Temporal Cloud API keys). */
  temporalApiKey?: string;
}

export interface Config extends TemporalConnectionConfig {
  host: string;
  port: number;
  mongoUrl: string;
  mongoDb: string;
  temporalAddress: string;
  temporalNamespace: string;
  temporalTaskQueue: string;
  /** HS256 secret (at least 32 bytes); undefined only when a JWKS is configured. */
  authJwtSecret?: string;
  /** undefined: only HS256 tokens of authJwtSecret are accepted. */
  authJwks?: JwksConfig;
  /** When set, every token (HS256 included) must carry this iss / aud. */
  authIssuer?: string;
  authAudience?: string;
  authMaxTokenLifetimeSeconds: number;
  authClockSkewSeconds: number;
  /** undefined: web push is off. */
  vapid?: VapidConfig;
  studioUrl: string;
  callbackAllowPrivate: boolean;
  pushAllowPrivate: boolean;
  /** Host suffixes a push endpoint must match; empty = any public https host. */
  pushEndpointAllowlist: string[];
  /** An endpoint that keeps failing to be a push service is pruned after 3 episodes spanning at least this. */
  pushPruneMinHours: number;
  /** undefined: the operator family is off. */
  opsAlertWebhookUrl?: string;
  /** Abuse bounds on what users register and trigger. */
  pushMaxSubscriptionsPerUser: number;
  pushTestRate: RateRule;
  callbackTestRate: RateRule;
  callbackRedeliverRate: RateRule;
  /** The same outbound POSTs across every run of one user and of one team. */
  callbackTestRatePerUser: RateRule;
  callbackTestRatePerTeam: RateRule;
  callbackRedeliverRatePerUser: RateRule;
  callbackRedeliverRatePerTeam: RateRule;
  /** Runs with a callback one team may create per minute. */
  runCreateRate: RateRule;
  routeErrorRatePerRun: RateRule;
  routeErrorRatePerTeam: RateRule;
  /** Waits between callback attempts: n waits → n + 1 attempts. */
  callbackRetrySeconds: number[];
  /** One callback attempt's whole exchange, connect to last body byte. */
  callbackTimeoutSeconds: number;
  sweepIntervalSeconds: number;
  claimGraceSeconds: number;
  stallAfterSeconds: number;
  /** How long a terminal run's health state is kept before it is reaped. */
  healthReapSeconds: number;
  /** How long an operator alert keeps retrying before it settles as given up. */
  opsAlertRetryHours: number;
  /** On SIGTERM: how long in-flight work (API requests, the worker's activities) may take to finish. */
  shutdownGraceSeconds: number;
  /** The worker's own probe endpoint (/healthz, /readyz); undefined: off. */
  workerHealthPort?: number;
  /** The worker's Prometheus endpoint (/metrics, the SDK's metrics included); undefined: off. */
  workerMetricsPort?: number;
  /** The API's /metrics on a port of its own (on HOST); undefined: off. */
  metricsPort?: number;
  /** The API port serves /metrics to this bearer; undefined: it answers 404 there. */
  metricsToken?: string;
  /** A TLS-terminating proxy sits in front: its X-Forwarded-* headers are believed, and answers carry HSTS. */
  trustProxy: boolean;
  logLevel: LogLevel;
  /** undefined: pretty when stdout is a terminal, JSON otherwise. */
  logFormat?: 'json' | 'pretty';
  /** undefined: no tracing (neither OTLP endpoint variable is set). */
  tracing?: TracingConfig;
  /** Task slots of one worker process; undefined: the SDK's defaults. */
  workerMaxConcurrentActivities?: number;
  workerMaxConcurrentWorkflowTasks?: number;
}

type Env = Record<string, string | undefined>;

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

function oneOf<T extends string>(env: Env, name: string, values: readonly T[]): T | undefined {
  const raw = read(env, name)?.toLowerCase();
  if (raw === undefined) return undefined;
  if (!(values as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${values.join(', ')}, got "${raw}"`);
  }
  return raw as T;
}

function read(env: Env, name: string): string | undefined {
  const value = env[name]?.trim();
  return value === '' ? undefined : value;
}

function required(env: Env, name: string): string {
  const value = read(env, name);
  if (value === undefined) throw new ConfigError(`${name} is required`);
  return value;
}

/** A positive whole number; `unit` only words the refusal (" of seconds" for durations). */
function positiveInt(env: Env, name: string, fallback: number, unit = ' of seconds'): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) <= 0) {
    throw new ConfigError(`${name} must be a positive whole number${unit}, got "${raw}"`);
  }
  return Number(raw);
}

const positiveCount = (env: Env, name: string, fallback: number): number =>
  positiveInt(env, name, fallback, '');

function optionalPort(env: Env, name: string): number | undefined {
  const raw = read(env, name);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) {
    throw new ConfigError(`${name} must be a TCP port number, got "${raw}"`);
  }
  return Number(raw);
}

function positiveNumber(env: Env, name: string, fallback: number): number {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  if (!/^\d+(\.\d+)?$/.test(raw) || Number(raw) <= 0) {
    throw new ConfigError(`${name} must be a positive number, got "${raw}"`);
  }
  return Number(raw);
}

function optionalCount(env: Env, name: string, max: number): number | undefined {
  const raw = read(env, name);
  if (raw === undefined) return undefined;
  if (!/^\d+$/.test(raw) || Number(raw) <= 0 || Number(raw) > max) {
    throw new ConfigError(`${name} must be a whole number from 1 to ${max}, got "${raw}"`);
  }
  return Number(raw);
}

function secondsList(env: Env, name: string, fallback: number[]): number[] {
  const raw = read(env, name);
  if (raw === undefined) return fallback;
  const parts = raw.split(',').map((p) => p.trim());
  if (!parts.every((p) => /^\d+$/.test(p) && Number(p) > 0) || parts.length > 10) {
    throw new ConfigError(
      `${name} must be up to 10 comma-separated positive whole numbers of seconds, got "${raw}"`,
    );
  }
  return parts.map(Number);
}

function flag(env: Env, name: string): boolean {
  const raw = read(env, name) ?? '0';
  if (raw !== '0' && raw !== '1') throw new ConfigError(`${name} must be 0 or 1, got "${raw}"`);
  return raw === '1';
}

function url(env: Env, name: string, protocols: string[], fallback?: string): string {
  const raw = read(env, name) ?? fallback;
  if (raw === undefined) throw new ConfigError(`${name} is required`);
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a valid URL: "${raw}"`);
  }
  if (!protocols.includes(parsed.protocol)) {
    throw new ConfigError(`${name} must use ${protocols.join(' or ')}, got "${parsed.protocol}"`);
  }
  return raw;
}

function optionalUrl(env: Env, name: string): string | undefined {
  return read(env, name) === undefined ? undefined : url(env, name, ['http:', 'https:']);
}

const BASE64URL = /^[A-Za-z0-9_-]+$/;

function vapid(env: Env): VapidConfig | undefined {
  const publicKey = read(env, 'VAPID_PUBLIC_KEY');
  const privateKey = read(env, 'VAPID_PRIVATE_KEY');
  if (publicKey === undefined && privateKey === undefined) return undefined;
  if (publicKey === undefined)
    throw new ConfigError('VAPID_PUBLIC_KEY is missing while VAPID_PRIVATE_KEY is set');
  if (privateKey === undefined)
    throw new ConfigError('VAPID_PRIVATE_KEY is missing while VAPID_PUBLIC_KEY is set');
  if (!BASE64URL.test(publicKey) || Buffer.from(publicKey, 'base64url').length !== 65) {
    throw new ConfigError('VAPID_PUBLIC_KEY must be a base64url uncompressed P-256 point (65 bytes)');
  }
  if (!BASE64URL.test(privateKey) || Buffer.from(privateKey, 'base64url').length !== 32) {
    throw new ConfigError('VAPID_PRIVATE_KEY must be a base64url P-256 private key (32 bytes)');
  }
  const subject = read(env, 'VAPID_SUBJECT') ?? 'mailto:flow-notify@localhost';
  if (!/^(mailto:|https:\/\/)/.test(subject)) {
    throw new ConfigError(`VAPID_SUBJECT must start with mailto: or https://, got "${subject}"`);
  }
  return { publicKey, privateKey, subject };
}

/** Below this an HS256 secret can be brute-forced offline from one token (RFC 7518 §3.2 asks for 256 bits). */
const MIN_SECRET_BYTES = 32;

/** A positive whole number of seconds no larger than `max`. */
function boundedSeconds(env: Env, name: string, fallback: number, max: number): number {
  const value = positiveInt(env, name, fallback);
  if (value > max) throw new ConfigError(`${name} must be at most ${max} seconds, got "${value}"`);
  return value;
}

function auth(
  env: Env,
): Pick<
  Config,
  | 'authJwtSecret'
  | 'authJwks'
  | 'authIssuer'
  | 'authAudience'
  | 'authMaxTokenLifetimeSeconds'
  | 'authClockSkewSeconds'
> {
  const jwksUrl = read(env, 'AUTH_JWKS_URL');
  const authJwks = jwksUrl === undefined ? undefined : jwks(env);
  const authJwtSecret = authJwks ? read(env, 'AUTH_JWT_SECRET') : required(env, 'AUTH_JWT_SECRET');
  if (authJwtSecret !== undefined && Buffer.byteLength(authJwtSecret, 'utf8') < MIN_SECRET_BYTES) {
    throw new ConfigError(
      `AUTH_JWT_SECRET must be at least ${MIN_SECRET_BYTES} bytes (e.g. openssl rand -base64 32), got ${Buffer.byteLength(authJwtSecret, 'utf8')}`,
    );
  }
  return {
    authJwtSecret,
    authJwks,
    authIssuer: read(env, 'AUTH_ISSUER'),
    authAudience: read(env, 'AUTH_AUDIENCE'),
    // Past these a stolen token lives for months, or an expired one is honoured for hours.
    authMaxTokenLifetimeSeconds: boundedSeconds(
      env,
      'AUTH_MAX_TOKEN_LIFETIME_SECONDS',
      7 * 24 * 3600,
      30 * 24 * 3600,
    ),
    authClockSkewSeconds: boundedSeconds(env, 'AUTH_CLOCK_SKEW_SECONDS', 60, 300),
  };
}

function jwks(env: Env): JwksConfig {
  const issuer = read(env, 'AUTH_ISSUER');
  const audience = read(env, 'AUTH_AUDIENCE');
  // An identity provider signs tokens for every application it serves: without both, another app's token would do.
  if (issuer === undefined) throw new ConfigError('AUTH_ISSUER is required when AUTH_JWKS_URL is set');
  if (audience === undefined) throw new ConfigError('AUTH_AUDIENCE is required when AUTH_JWKS_URL is set');
  const jwksUrl = url(env, 'AUTH_JWKS_URL', ['https:', 'http:']);
  // Keys fetched over plain http could be swapped on the way: only a loopback provider (tests, a sidecar) may use it.
  const { protocol, hostname } = new URL(jwksUrl);
  if (protocol === 'http:' && !['127.0.0.1', 'localhost', '[::1]'].includes(hostname))
    throw new ConfigError(`AUTH_JWKS_URL must use https: (http only on loopback), got "${jwksUrl}"`);
  return {
    url: jwksUrl,
    issuer,
    audience,
    userClaim: read(env, 'AUTH_USER_CLAIM') ?? 'sub',
    teamClaim: read(env, 'AUTH_TEAM_CLAIM') ?? 'team',
    cooldownSeconds: positiveInt(env, 'AUTH_JWKS_COOLDOWN_SECONDS', 30),
    cacheSeconds: positiveInt(env, 'AUTH_JWKS_CACHE_SECONDS', 600),
    maxStaleSeconds: positiveInt(env, 'AUTH_JWKS_MAX_STALE_SECONDS', 86400),
  };
}

/** Long enough not to be guessed, one word of printable ASCII (it travels in an Authorization header). */
function metricsToken(env: Env): string | undefined {
  const token = read(env, 'METRICS_TOKEN');
  if (token !== undefined && (token.length < 16 || token.length > 4096 || !/^[\x21-\x7e]+$/.test(token)))
    throw new ConfigError('METRICS_TOKEN must be one word of 16 to 4096 printable ASCII characters');
  return token;
}

function pemFile(env: Env, name: string): Buffer | undefined {
  const file = read(env, name);
  if (file === undefined) return undefined;
  let content: Buffer;
  try {
    content = readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new ConfigError(`${name} cannot be read: "${file}" (${code})`);
  }
  if (content.length > 1_000_000 || !content.includes('-----BEGIN ')) {
    throw new ConfigError(`${name} must name a PEM file, "${file}" is not one`);
  }
  return content;
}

function onOff(env: Env, name: string): boolean | undefined {
  const raw = read(env, name)?.toLowerCase();
  if (raw === undefined) return undefined;
  if (['1', 'true', 'on'].includes(raw)) return true;
  if (['0', 'false', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be on or off (1/0), got "${raw}"`);
}

/**
 * On when OTEL_EXPORTER_OTLP_ENDPOINT (or its traces-only form) is set, unless the SDK is disabled or the traces
 * exporter is `none`, as the OpenTelemetry specification has it. Only OTLP over HTTP is built in.
 */
function tracing(env: Env): TracingConfig | undefined {
  const endpoints = ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', 'OTEL_EXPORTER_OTLP_ENDPOINT'].filter(
    (name) => read(env, name) !== undefined,
  );
  for (const name of endpoints) url(env, name, ['http:', 'https:']);
  if (endpoints.length === 0 || read(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') return undefined;
  const exporter = read(env, 'OTEL_TRACES_EXPORTER')?.toLowerCase();
  if (exporter === 'none') return undefined;
  if (exporter !== undefined && exporter !== 'otlp') {
    throw new ConfigError(`OTEL_TRACES_EXPORTER must be otlp or none, got "${exporter}"`);
  }
  const protocolVariable = read(env, 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL')
    ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL'
    : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = oneOf(env, protocolVariable, ['http/protobuf', 'http/json'] as const);
  return { protocol: protocol ?? 'http/protobuf' };
}

/**
 * TEMPORAL_TLS on, or any of the TLS settings or the API key set, turns TLS on (an API key is never sent in the
 * clear); TEMPORAL_TLS=off beside them is a contradiction, refused.
 */
export function loadTemporalConnectionConfig(env: Env = process.env): TemporalConnectionConfig {
  const temporalAddress = hostPort(env, 'TEMPORAL_ADDRESS', '127.0.0.1:7233');
  const tlsFlag = onOff(env, 'TEMPORAL_TLS');
  const ca = pemFile(env, 'TEMPORAL_TLS_CA');
  const crt = pemFile(env, 'TEMPORAL_TLS_CERT');
  const key = pemFile(env, 'TEMPORAL_TLS_KEY');
  if (crt && !key) throw new ConfigError('TEMPORAL_TLS_KEY is missing while TEMPORAL_TLS_CERT is set');
  if (key && !crt) throw new ConfigError('TEMPORAL_TLS_CERT is missing while TEMPORAL_TLS_KEY is set');
  const serverName = read(env, 'TEMPORAL_TLS_SERVER_NAME');
  if (serverName !== undefined && !/^[A-Za-z0-9.-]{1,253}$/.test(serverName)) {
    throw new ConfigError(`TEMPORAL_TLS_SERVER_NAME must be a host name, got "${serverName}"`);
  }
  const temporalApiKey = read(env, 'TEMPORAL_API_KEY');
  if (
    temporalApiKey !== undefined &&
    (temporalApiKey.length > 8192 || !/^[\x21-\x7e]+$/.test(temporalApiKey))
  ) {
    throw new ConfigError('TEMPORAL_API_KEY must be one word of printable ASCII (up to 8 KiB)');
  }
  const asked = (
    [
      ['TEMPORAL_TLS_CA', ca],
      ['TEMPORAL_TLS_CERT', crt],
      ['TEMPORAL_TLS_SERVER_NAME', serverName],
      ['TEMPORAL_API_KEY', temporalApiKey],
    ] as const
  ).find(([, value]) => value !== undefined);
  if (tlsFlag === false && asked) throw new ConfigError(`${asked[0]} is set while TEMPORAL_TLS is off`);
  const tlsOn = tlsFlag ?? asked !== undefined;
  return {
    temporalAddress,
    temporalTls: tlsOn
      ? {
          ...(ca ? { ca } : {}),
          ...(crt && key ? { clientCert: { crt, key } } : {}),
          ...(serverName ? { serverName } : {}),
        }
      : undefined,
    ...(temporalApiKey ? { temporalApiKey } : {}),
  };
}

function hostPort(env: Env, name: string, fallback: string): string {
  const raw = read(env, name) ?? fallback;
  if (!/^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/.test(raw)) {
    throw new ConfigError(`${name} must be host:port, got "${raw}"`);
  }
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const host = read(env, 'HOST') ?? '127.0.0.1';
  const portRaw = read(env, 'PORT') ?? '8080';
  if (!/^\d+$/.test(portRaw) || Number(portRaw) > 65535) {
    throw new ConfigError(`PORT must be a TCP port number, got "${portRaw}"`);
  }
  const port = Number(portRaw);
  return {
    host,
    port,
    ...loadEmitterConfig(env),
    ...auth(env),
    vapid: vapid(env),
    studioUrl: url(env, 'STUDIO_URL', ['http:', 'https:'], `http://${host}:${port}`).replace(/\/+$/, ''),
    callbackAllowPrivate: flag(env, 'CALLBACK_ALLOW_PRIVATE'),
    pushAllowPrivate: flag(env, 'PUSH_ALLOW_PRIVATE'),
    pushEndpointAllowlist: (read(env, 'PUSH_ENDPOINT_ALLOWLIST') ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
    pushPruneMinHours: positiveNumber(env, 'PUSH_PRUNE_MIN_HOURS', 24),
    sweepIntervalSeconds: positiveInt(env, 'SWEEP_INTERVAL_SECONDS', 120),
    claimGraceSeconds: positiveInt(env, 'CLAIM_GRACE_SECONDS', 300),
    pushMaxSubscriptionsPerUser: positiveCount(env, 'PUSH_MAX_SUBSCRIPTIONS_PER_USER', 20),
    pushTestRate: {
      limit: positiveCount(env, 'PUSH_TEST_RATE_LIMIT', 5),
      windowSeconds: positiveInt(env, 'PUSH_TEST_RATE_WINDOW_SECONDS', 60),
    },
    callbackTestRate: {
      limit: positiveCount(env, 'CALLBACK_TEST_RATE_LIMIT', 5),
      windowSeconds: positiveInt(env, 'CALLBACK_TEST_RATE_WINDOW_SECONDS', 60),
    },
    callbackRedeliverRate: {
      limit: positiveCount(env, 'CALLBACK_REDELIVER_RATE_LIMIT', 5),
      windowSeconds: positiveInt(env, 'CALLBACK_REDELIVER_RATE_WINDOW_SECONDS', 60),
    },
    callbackTestRatePerUser: {
      limit: positiveCount(env, 'CALLBACK_TEST_RATE_LIMIT_PER_USER', 10),
      windowSeconds: positiveInt(env, 'CALLBACK_TEST_RATE_WINDOW_SECONDS', 60),
    },
    callbackTestRatePerTeam: {
      limit: positiveCount(env, 'CALLBACK_TEST_RATE_LIMIT_PER_TEAM', 30),
      windowSeconds: positiveInt(env, 'CALLBACK_TEST_RATE_WINDOW_SECONDS', 60),
    },
    callbackRedeliverRatePerUser: {
      limit: positiveCount(env, 'CALLBACK_REDELIVER_RATE_LIMIT_PER_USER', 20),
      windowSeconds: positiveInt(env, 'CALLBACK_REDELIVER_RATE_WINDOW_SECONDS', 60),
    },
    callbackRedeliverRatePerTeam: {
      limit: positiveCount(env, 'CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM', 60),
      windowSeconds: positiveInt(env, 'CALLBACK_REDELIVER_RATE_WINDOW_SECONDS', 60),
    },
    runCreateRate: { limit: positiveCount(env, 'RUN_CREATE_RATE_LIMIT', 120), windowSeconds: 60 },
    routeErrorRatePerRun: {
      limit: positiveCount(env, 'ROUTE_ERROR_LIMIT_PER_RUN', 20),
      windowSeconds: positiveInt(env, 'ROUTE_ERROR_WINDOW_SECONDS', 3600),
    },
    routeErrorRatePerTeam: {
      limit: positiveCount(env, 'ROUTE_ERROR_LIMIT_PER_TEAM', 200),
      windowSeconds: positiveInt(env, 'ROUTE_ERROR_WINDOW_SECONDS', 3600),
    },
    opsAlertRetryHours: positiveNumber(env, 'OPS_ALERT_RETRY_HOURS', 24),
    shutdownGraceSeconds: positiveInt(env, 'SHUTDOWN_GRACE_SECONDS', 30),
    workerHealthPort: optionalPort(env, 'WORKER_HEALTH_PORT'),
    workerMetricsPort: optionalPort(env, 'WORKER_METRICS_PORT'),
    metricsPort: optionalPort(env, 'METRICS_PORT'),
    metricsToken: metricsToken(env),
    trustProxy: flag(env, 'TRUST_PROXY'),
    logLevel: oneOf(env, 'LOG_LEVEL', LOG_LEVELS) ?? 'info',
    logFormat: oneOf(env, 'LOG_FORMAT', ['json', 'pretty'] as const),
    workerMaxConcurrentActivities: optionalCount(env, 'WORKER_MAX_CONCURRENT_ACTIVITIES', 10_000),
    workerMaxConcurrentWorkflowTasks: optionalCount(env, 'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS', 10_000),
  };
}

/** What a runner pod's emitter needs (flow-notify emit): the servers, never the API's secrets. */
export type EmitterConfig = Pick<
  Config,
  | 'mongoUrl'
  | 'mongoDb'
  | 'temporalAddress'
  | 'temporalTls'
  | 'temporalApiKey'
  | 'temporalNamespace'
  | 'temporalTaskQueue'
  | 'callbackRetrySeconds'
  | 'callbackTimeoutSeconds'
  | 'sweepIntervalSeconds'
  | 'stallAfterSeconds'
  | 'healthReapSeconds'
  | 'opsAlertWebhookUrl'
  | 'tracing'
>;

export function loadEmitterConfig(env: Env = process.env): EmitterConfig {
  return {
    mongoUrl: url(env, 'MONGO_URL', ['mongodb:', 'mongodb+srv:']),
    mongoDb: read(env, 'MONGO_DB') ?? 'flow',
    ...loadTemporalConnectionConfig(env),
    temporalNamespace: read(env, 'TEMPORAL_NAMESPACE') ?? 'default',
    temporalTaskQueue: read(env, 'TEMPORAL_TASK_QUEUE') ?? 'flow-notify',
    callbackRetrySeconds: secondsList(env, 'CALLBACK_RETRY_SECONDS', [20, 60, 180, 540]),
    // Also an episode option: a callback attempt's start-to-close is this plus a margin.
    callbackTimeoutSeconds: positiveInt(env, 'CALLBACK_TIMEOUT_SECONDS', 10),
    // An episode's released push is retried after one sweep interval (EpisodeOptions.releasedRetrySeconds).
    sweepIntervalSeconds: positiveInt(env, 'SWEEP_INTERVAL_SECONDS', 120),
    stallAfterSeconds: positiveInt(env, 'STALL_AFTER_SECONDS', 900),
    healthReapSeconds: positiveInt(env, 'HEALTH_REAP_SECONDS', 1800),
    opsAlertWebhookUrl: optionalUrl(env, 'OPS_ALERT_WEBHOOK_URL'),
    tracing: tracing(env),
  };
}

/** What an operator's tools (flow-notify explain) need: the emitter's servers and where the Temporal UI is. */
export type OperatorConfig = EmitterConfig & { temporalUiUrl: string };

export function loadOperatorConfig(env: Env = process.env): OperatorConfig {
  return {
    ...loadEmitterConfig(env),
    temporalUiUrl: url(env, 'TEMPORAL_UI_URL', ['http:', 'https:'], 'http://localhost:8233').replace(
      /\/+$/,
      '',
    ),
  };
}

/** What the launcher (npm start), the test stack and the CLI's search for it need before a full config exists. */
export function launcherEnv(env: Env = process.env) {
  return {
    mongoUrl: read(env, 'MONGO_URL'),
    temporalAddress: read(env, 'TEMPORAL_ADDRESS'),
    temporalNamespace: read(env, 'TEMPORAL_NAMESPACE') ?? 'default',
    temporalUiUrl: read(env, 'TEMPORAL_UI_URL'),
    /** Where npm start records the embedded servers it runs (default .data/stack.json). */
    stackStateFile: read(env, 'FLOW_NOTIFY_STACK_FILE'),
    authJwtSecret: read(env, 'AUTH_JWT_SECRET'),
    authIssuer: read(env, 'AUTH_ISSUER'),
    authAudience: read(env, 'AUTH_AUDIENCE'),
    vapidPublicKey: read(env, 'VAPID_PUBLIC_KEY'),
    vapidPrivateKey: read(env, 'VAPID_PRIVATE_KEY'),
    host: read(env, 'HOST') ?? '127.0.0.1',
    port: read(env, 'PORT') ?? '8080',
  };
}

/** The environment for a child process: this one's, plus what the launcher filled in. */
export function childEnv(
  extra: Record<string, string>,
  env: Env = process.env,
): Record<string, string | undefined> {
  return { ...env, ...extra };
}

/** Entry points call this: a bad config prints one line and exits non-zero, never starts half-working. */
export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`flow-notify: configuration error: ${err.message}\n`);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
}
