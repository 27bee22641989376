// config.ts without servers: every variable's default, and for each one a bad value refused with its exact
// one-line message (the line an entry point prints before exit 78).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  ConfigError,
  launcherEnv,
  loadConfig,
  loadEmitterConfig,
  loadOperatorConfig,
  loadTemporalConnectionConfig,
} from '../../config';
import { episodeOptions } from '../../client/emitter';
import { DEFAULT_EPISODE_OPTIONS } from '../../contract/workflows';

const base = { MONGO_URL: 'mongodb://127.0.0.1:1/', AUTH_JWT_SECRET: 'x'.repeat(32) };
const jwksBase = {
  ...base,
  AUTH_JWKS_URL: 'https://idp.example.com/jwks',
  AUTH_ISSUER: 'https://idp.example.com/',
  AUTH_AUDIENCE: 'flow-notify',
};
const vapidBase = {
  ...base,
  VAPID_PUBLIC_KEY: Buffer.alloc(65, 4).toString('base64url'),
  VAPID_PRIVATE_KEY: Buffer.alloc(32, 7).toString('base64url'),
};

/** The message `load` refuses `env` with (and that it is a ConfigError). */
function refusal(
  env: Record<string, string>,
  load: (env: Record<string, string>) => unknown = loadConfig,
): string {
  try {
    load(env);
  } catch (err) {
    assert.ok(err instanceof ConfigError, `not a ConfigError: ${String(err)}`);
    return err.message;
  }
  assert.fail(`accepted ${JSON.stringify(env)}`);
}

const plain = (value: unknown): unknown => JSON.parse(JSON.stringify(value));

type Refusal = [name: string, env: Record<string, string>, message: string];
const seconds = (name: string, bad = '0'): Refusal => [
  name,
  { [name]: bad },
  `${name} must be a positive whole number of seconds, got "${bad}"`,
];
const count = (name: string, bad = '1.5'): Refusal => [
  name,
  { [name]: bad },
  `${name} must be a positive whole number, got "${bad}"`,
];

describe('config', () => {
  let dir: string;
  let pem: string;
  let notPem: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'config-test-'));
    pem = path.join(dir, 'a.pem');
    writeFileSync(pem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    notPem = path.join(dir, 'a.txt');
    writeFileSync(notPem, 'not a certificate');
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('the defaults of every variable', () => {
    assert.deepEqual(plain(loadConfig(base)), {
      host: '127.0.0.1',
      port: 8080,
      mongoUrl: 'mongodb://127.0.0.1:1/',
      mongoDb: 'flow',
      temporalAddress: '127.0.0.1:7233',
      temporalNamespace: 'default',
      temporalTaskQueue: 'flow-notify',
      callbackRetrySeconds: [5, 300, 1800, 7200, 18_000, 36_000, 36_000],
      callbackTimeoutSeconds: 10,
      sweepIntervalSeconds: 120,
      stallAfterSeconds: 900,
      healthReapSeconds: 1800,
      healthBatchMs: 1500,
      authJwtSecret: 'x'.repeat(32),
      authMaxTokenLifetimeSeconds: 604800,
      authClockSkewSeconds: 60,
      studioUrl: 'http://127.0.0.1:8080',
      callbackAllowPrivate: false,
      callbackSecretOverlapSeconds: 86400,
      pushAllowPrivate: false,
      actionTokenTtlSeconds: 86400,
      endpointsPerTeam: 20,
      endpointDisableAfterSeconds: 432000,
      pushEndpointAllowlist: [],
      pushPruneMinHours: 24,
      pushConfigFaultMinSubscriptions: 3,
      pushConfigFaultWindowSeconds: 3600,
      claimGraceSeconds: 300,
      pushMaxSubscriptionsPerUser: 20,
      pushTestRate: { limit: 5, windowSeconds: 60 },
      pushBurstRate: { limit: 5, windowSeconds: 600 },
      callbackTestRate: { limit: 5, windowSeconds: 60 },
      callbackRedeliverRate: { limit: 5, windowSeconds: 60 },
      callbackTestRatePerUser: { limit: 10, windowSeconds: 60 },
      callbackTestRatePerTeam: { limit: 30, windowSeconds: 60 },
      callbackRedeliverRatePerUser: { limit: 20, windowSeconds: 60 },
      callbackRedeliverRatePerTeam: { limit: 60, windowSeconds: 60 },
      callbackRecoverRatePerTeam: { limit: 10, windowSeconds: 3600 },
      callbackRecoverResendAfterSeconds: 3600,
      callbackRecoverMax: 10_000,
      callbackRotateRate: { limit: 5, windowSeconds: 3600 },
      runCreateRate: { limit: 120, windowSeconds: 60 },
      routeErrorRatePerRun: { limit: 20, windowSeconds: 3600 },
      routeErrorRatePerTeam: { limit: 200, windowSeconds: 3600 },
      opsAlertRetryHours: 24,
      callbackMaxInFlightPerOrigin: 8,
      callbackBreakerFailures: 20,
      callbackBreakerCooldownSeconds: 30,
      shutdownGraceSeconds: 30,
      metricsHost: '127.0.0.1',
      trustProxy: false,
      logLevel: 'info',
    });
    const config = loadConfig(base);
    for (const absent of [
      'authJwks',
      'authIssuer',
      'authAudience',
      'vapid',
      'opsAlertWebhookUrl',
      'temporalTls',
      'temporalApiKey',
      'workerHealthPort',
      'workerMetricsPort',
      'metricsPort',
      'metricsToken',
      'logFormat',
      'workerMaxConcurrentActivities',
      'workerMaxConcurrentWorkflowTasks',
    ] as const) {
      assert.equal(config[absent], undefined, absent);
    }
  });

  it("the config's defaults start an episode with DEFAULT_EPISODE_OPTIONS", () => {
    assert.deepEqual(episodeOptions(loadConfig(base)), DEFAULT_EPISODE_OPTIONS);
  });

  it('every variable set to a good value is read (trimmed; blank is unset)', () => {
    const config = loadConfig({
      ...jwksBase,
      ...vapidBase,
      HOST: ' 0.0.0.0 ',
      PORT: '9000',
      MONGO_DB: 'other',
      TEMPORAL_ADDRESS: 'temporal.example.com:7233',
      TEMPORAL_NAMESPACE: 'ns',
      TEMPORAL_TASK_QUEUE: 'q',
      CALLBACK_RETRY_SECONDS: '1, 2,3',
      CALLBACK_TIMEOUT_SECONDS: '11',
      SWEEP_INTERVAL_SECONDS: '5',
      STALL_AFTER_SECONDS: '6',
      HEALTH_REAP_SECONDS: '7',
      HEALTH_BATCH_MS: '250',
      OPS_ALERT_WEBHOOK_URL: 'https://ops.example.com/hook',
      AUTH_USER_CLAIM: 'email',
      AUTH_TEAM_CLAIM: 'org',
      AUTH_JWKS_COOLDOWN_SECONDS: '1',
      AUTH_JWKS_CACHE_SECONDS: '2',
      AUTH_JWKS_MAX_STALE_SECONDS: '3',
      AUTH_MAX_TOKEN_LIFETIME_SECONDS: '3600',
      AUTH_CLOCK_SKEW_SECONDS: '300',
      VAPID_SUBJECT: 'https://example.com',
      STUDIO_URL: 'https://studio.example.com//',
      CALLBACK_ALLOW_PRIVATE: '1',
      PUSH_ALLOW_PRIVATE: '1',
      PUSH_ENDPOINT_ALLOWLIST: ' Push.Example.com, ,b.org ',
      PUSH_PRUNE_MIN_HOURS: '0.5',
      PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS: '5',
      PUSH_CONFIG_FAULT_WINDOW_SECONDS: '7200',
      CLAIM_GRACE_SECONDS: '8',
      PUSH_MAX_SUBSCRIPTIONS_PER_USER: '3',
      PUSH_TEST_RATE_LIMIT: '11',
      PUSH_TEST_RATE_WINDOW_SECONDS: '12',
      PUSH_BURST_LIMIT: '28',
      PUSH_BURST_WINDOW_SECONDS: '29',
      CALLBACK_TEST_RATE_LIMIT: '13',
      CALLBACK_TEST_RATE_WINDOW_SECONDS: '14',
      CALLBACK_REDELIVER_RATE_LIMIT: '15',
      CALLBACK_REDELIVER_RATE_WINDOW_SECONDS: '16',
      CALLBACK_TEST_RATE_LIMIT_PER_USER: '17',
      CALLBACK_TEST_RATE_LIMIT_PER_TEAM: '18',
      CALLBACK_REDELIVER_RATE_LIMIT_PER_USER: '19',
      CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM: '20',
      CALLBACK_RECOVER_RATE_LIMIT_PER_TEAM: '3',
      CALLBACK_RECOVER_RATE_WINDOW_SECONDS: '120',
      CALLBACK_RECOVER_RESEND_AFTER_SECONDS: '600',
      CALLBACK_RECOVER_MAX: '500',
      CALLBACK_ROTATE_RATE_LIMIT: '26',
      CALLBACK_ROTATE_RATE_WINDOW_SECONDS: '27',
      CALLBACK_SECRET_OVERLAP_SECONDS: '604800',
      ACTION_TOKEN_TTL_SECONDS: '3600',
      ENDPOINTS_PER_TEAM: '7',
      ENDPOINT_DISABLE_AFTER_SECONDS: '3600',
      RUN_CREATE_RATE_LIMIT: '21',
      ROUTE_ERROR_LIMIT_PER_RUN: '22',
      ROUTE_ERROR_LIMIT_PER_TEAM: '23',
      ROUTE_ERROR_WINDOW_SECONDS: '24',
      OPS_ALERT_RETRY_HOURS: '1.5',
      CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN: '2',
      CALLBACK_BREAKER_FAILURES: '3',
      CALLBACK_BREAKER_COOLDOWN_SECONDS: '4',
      SHUTDOWN_GRACE_SECONDS: '25',
      WORKER_HEALTH_PORT: '0',
      WORKER_METRICS_PORT: '9464',
      METRICS_PORT: '65535',
      METRICS_HOST: '0.0.0.0',
      METRICS_TOKEN: 't'.repeat(16),
      TRUST_PROXY: '1',
      LOG_LEVEL: 'WARN',
      LOG_FORMAT: 'Pretty',
      WORKER_MAX_CONCURRENT_ACTIVITIES: '10000',
      WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '1',
      TEMPORAL_API_KEY: 'key.with-printable~chars',
      TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
    });
    assert.deepEqual(plain(config), {
      host: '0.0.0.0',
      port: 9000,
      mongoUrl: 'mongodb://127.0.0.1:1/',
      mongoDb: 'other',
      temporalAddress: 'temporal.example.com:7233',
      temporalTls: { serverName: 'temporal.internal' },
      temporalApiKey: 'key.with-printable~chars',
      temporalNamespace: 'ns',
      temporalTaskQueue: 'q',
      callbackRetrySeconds: [1, 2, 3],
      callbackTimeoutSeconds: 11,
      sweepIntervalSeconds: 5,
      stallAfterSeconds: 6,
      healthReapSeconds: 7,
      healthBatchMs: 250,
      opsAlertWebhookUrl: 'https://ops.example.com/hook',
      authJwtSecret: 'x'.repeat(32),
      authJwks: {
        url: 'https://idp.example.com/jwks',
        issuer: 'https://idp.example.com/',
        audience: 'flow-notify',
        userClaim: 'email',
        teamClaim: 'org',
        cooldownSeconds: 1,
        cacheSeconds: 2,
        maxStaleSeconds: 3,
      },
      authIssuer: 'https://idp.example.com/',
      authAudience: 'flow-notify',
      authMaxTokenLifetimeSeconds: 3600,
      authClockSkewSeconds: 300,
      vapid: {
        publicKey: vapidBase.VAPID_PUBLIC_KEY,
        privateKey: vapidBase.VAPID_PRIVATE_KEY,
        subject: 'https://example.com',
      },
      studioUrl: 'https://studio.example.com',
      callbackAllowPrivate: true,
      pushAllowPrivate: true,
      actionTokenTtlSeconds: 3600,
      endpointsPerTeam: 7,
      endpointDisableAfterSeconds: 3600,
      pushEndpointAllowlist: ['push.example.com', 'b.org'],
      pushPruneMinHours: 0.5,
      pushConfigFaultMinSubscriptions: 5,
      pushConfigFaultWindowSeconds: 7200,
      claimGraceSeconds: 8,
      pushMaxSubscriptionsPerUser: 3,
      pushTestRate: { limit: 11, windowSeconds: 12 },
      pushBurstRate: { limit: 28, windowSeconds: 29 },
      callbackTestRate: { limit: 13, windowSeconds: 14 },
      callbackRedeliverRate: { limit: 15, windowSeconds: 16 },
      callbackTestRatePerUser: { limit: 17, windowSeconds: 14 },
      callbackTestRatePerTeam: { limit: 18, windowSeconds: 14 },
      callbackRedeliverRatePerUser: { limit: 19, windowSeconds: 16 },
      callbackRedeliverRatePerTeam: { limit: 20, windowSeconds: 16 },
      callbackRecoverRatePerTeam: { limit: 3, windowSeconds: 120 },
      callbackRecoverResendAfterSeconds: 600,
      callbackRecoverMax: 500,
      callbackRotateRate: { limit: 26, windowSeconds: 27 },
      callbackSecretOverlapSeconds: 604800,
      runCreateRate: { limit: 21, windowSeconds: 60 },
      routeErrorRatePerRun: { limit: 22, windowSeconds: 24 },
      routeErrorRatePerTeam: { limit: 23, windowSeconds: 24 },
      opsAlertRetryHours: 1.5,
      callbackMaxInFlightPerOrigin: 2,
      callbackBreakerFailures: 3,
      callbackBreakerCooldownSeconds: 4,
      shutdownGraceSeconds: 25,
      workerHealthPort: 0,
      workerMetricsPort: 9464,
      metricsPort: 65535,
      metricsHost: '0.0.0.0',
      metricsToken: 't'.repeat(16),
      trustProxy: true,
      logLevel: 'warn',
      logFormat: 'pretty',
      workerMaxConcurrentActivities: 10000,
      workerMaxConcurrentWorkflowTasks: 1,
    });
    assert.equal(loadConfig({ ...base, LOG_LEVEL: '  ', PORT: '', AUTH_JWKS_URL: ' ' }).port, 8080);
    assert.equal(loadConfig({ ...base, HOST: 'example.com', PORT: '81' }).studioUrl, 'http://example.com:81');
    // An IPv6 address goes in brackets (a URL's host), so listening on every interface starts.
    assert.equal(loadConfig({ ...base, HOST: '::', PORT: '81' }).studioUrl, 'http://[::]:81');
    assert.equal(loadConfig({ ...base, HOST: '::1' }).studioUrl, 'http://[::1]:8080');
  });

  it('a HOST that is no host name or address, and a MONGO_DB MongoDB would refuse, are refused naming them', () => {
    for (const host of ['localhost:8080', 'http://example.com', 'exa mple.com', '-bad.example'])
      assert.match(refusal({ ...base, HOST: host }), /HOST/, host);
    for (const db of ['flow.prod', 'flow/prod', 'flow prod', 'a$b', 'x'.repeat(64)])
      assert.match(refusal({ ...base, MONGO_DB: db }), /MONGO_DB/, db);
    for (const host of ['localhost', '0.0.0.0', 'api-1.internal.example', 'fe80::1'])
      assert.equal(loadConfig({ ...base, HOST: host }).host, host);
    assert.equal(loadConfig({ ...base, MONGO_DB: 'flow_prod-2' }).mongoDb, 'flow_prod-2');
  });

  it('a PUSH_ENDPOINT_ALLOWLIST entry that is no host name is refused naming it: matching no push host, it would prune every device', () => {
    for (const entry of [
      'https://fcm.googleapis.com',
      '.fcm.googleapis.com',
      '*.push.services.mozilla.com',
      'fcm.googleapis.com:443',
      'push.apple.com.',
      'fcm.googleapis.com/fcm',
      '[::1',
      '[not-an-address]',
    ])
      assert.match(
        refusal({ ...base, PUSH_ENDPOINT_ALLOWLIST: `push.apple.com,${entry}` }),
        /^PUSH_ENDPOINT_ALLOWLIST /,
        entry,
      );
    assert.deepEqual(
      loadConfig({
        ...base,
        PUSH_ENDPOINT_ALLOWLIST: 'FCM.googleapis.com, 127.0.0.1,web.push.apple.com,[::1]',
      }).pushEndpointAllowlist,
      ['fcm.googleapis.com', '127.0.0.1', 'web.push.apple.com', '[::1]'],
    );
  });

  it("an operator alert's retries must fit one workflow history: OPS_ALERT_RETRY_HOURS against CLAIM_GRACE_SECONDS", () => {
    assert.equal(loadConfig({ ...base, OPS_ALERT_RETRY_HOURS: '72' }).opsAlertRetryHours, 72);
    assert.equal(
      loadConfig({ ...base, CLAIM_GRACE_SECONDS: '60', OPS_ALERT_RETRY_HOURS: '12' }).claimGraceSeconds,
      60,
    );
    for (const vars of [{ OPS_ALERT_RETRY_HOURS: '120' }, { CLAIM_GRACE_SECONDS: '60' }])
      assert.throws(
        () => loadConfig({ ...base, ...vars }),
        /^ConfigError: OPS_ALERT_RETRY_HOURS must allow at most 3000 tries/,
      );
  });

  it('AUTH_CLOCK_SKEW_SECONDS=0 (strict expiry) and CALLBACK_SECRET_OVERLAP_SECONDS=0 (no overlap after a rotation) are taken', () => {
    const config = loadConfig({
      ...base,
      AUTH_CLOCK_SKEW_SECONDS: '0',
      CALLBACK_SECRET_OVERLAP_SECONDS: '0',
    });
    assert.equal(config.authClockSkewSeconds, 0);
    assert.equal(config.callbackSecretOverlapSeconds, 0);
  });

  it('PUSH_BURST_LIMIT=0 switches the burst bound off', () => {
    assert.equal(loadConfig({ ...base, PUSH_BURST_LIMIT: '0' }).pushBurstRate, undefined);
    assert.deepEqual(loadConfig({ ...base, PUSH_BURST_LIMIT: '1' }).pushBurstRate, {
      limit: 1,
      windowSeconds: 600,
    });
  });

  it('auth: a JWKS makes the secret optional; a secret beside it is still held to 32 bytes', () => {
    const jwksOnly = loadConfig({ ...jwksBase, AUTH_JWT_SECRET: '' });
    assert.equal(jwksOnly.authJwtSecret, undefined);
    assert.deepEqual(jwksOnly.authJwks, {
      url: 'https://idp.example.com/jwks',
      issuer: 'https://idp.example.com/',
      audience: 'flow-notify',
      userClaim: 'sub',
      teamClaim: 'team',
      cooldownSeconds: 30,
      cacheSeconds: 600,
      maxStaleSeconds: 86400,
    });
    assert.equal(
      loadConfig({ ...jwksBase, AUTH_JWKS_URL: 'http://127.0.0.1:9/jwks' }).authJwks?.url,
      'http://127.0.0.1:9/jwks',
    );
    assert.equal(
      loadConfig({ ...jwksBase, AUTH_JWKS_URL: 'http://localhost/jwks' }).authJwks?.url,
      'http://localhost/jwks',
    );
    assert.equal(
      loadConfig({ ...jwksBase, AUTH_JWKS_URL: 'http://[::1]:9/jwks' }).authJwks?.url,
      'http://[::1]:9/jwks',
    );
    assert.equal(
      refusal({ ...jwksBase, AUTH_JWT_SECRET: 'short' }),
      'AUTH_JWT_SECRET must be at least 32 bytes (e.g. openssl rand -base64 32), got 5',
    );
    // Without a JWKS its settings are not read at all.
    assert.equal(loadConfig({ ...base, AUTH_JWKS_COOLDOWN_SECONDS: 'x' }).authJwks, undefined);
  });

  it('takes a MongoDB connection string of several hosts (a replica set) as it is written', () => {
    for (const mongoUrl of [
      'mongodb://flow:s3cret@db1:27017,db2:27017,db3:27017/flow?replicaSet=rs0&authSource=admin',
      'mongodb://db1,db2/',
      'mongodb+srv://flow:s3cret@cluster0.example.net/flow?retryWrites=true',
    ])
      assert.equal(loadConfig({ ...base, MONGO_URL: mongoUrl }).mongoUrl, mongoUrl);
  });

  const refusals: Refusal[] = [
    ['PORT', { PORT: 'x' }, 'PORT must be a TCP port number, got "x"'],
    ['PORT', { PORT: '65536' }, 'PORT must be a TCP port number, got "65536"'],
    ['MONGO_URL', { MONGO_URL: '' }, 'MONGO_URL is required'],
    [
      'MONGO_URL',
      { MONGO_URL: 'postgres://x' },
      'MONGO_URL is not a MongoDB connection string: "postgres://x" (Invalid scheme, expected connection string to start with "mongodb://" or "mongodb+srv://")',
    ],
    // A refusal names the URL without its credentials: the line goes to stderr and the logs.
    [
      'MONGO_URL',
      { MONGO_URL: 'mongodb://flow:s3cret@db:99999/' },
      'MONGO_URL is not a MongoDB connection string: "mongodb://…@db:99999/" (Unable to parse db:99999 with URL)',
    ],
    [
      'MONGO_URL',
      { MONGO_URL: 'mongodb://flow:s3cret@/' },
      'MONGO_URL is not a MongoDB connection string: "mongodb://…@/" (Protocol and host list are required in "mongodb://…@/")',
    ],
    [
      'OPS_ALERT_WEBHOOK_URL',
      { OPS_ALERT_WEBHOOK_URL: 'https://ops:s3cret@hooks example/' },
      'OPS_ALERT_WEBHOOK_URL is not a valid URL: "https://…@hooks example/"',
    ],
    // Node's fetch refuses a URL with credentials at every call: refused at start-up, not a day of failed alerts.
    [
      'OPS_ALERT_WEBHOOK_URL',
      { OPS_ALERT_WEBHOOK_URL: 'https://ops:s3cret@alerts.example/hook' },
      'OPS_ALERT_WEBHOOK_URL must not carry a user or password (fetch refuses it), got "https://…@alerts.example/hook"',
    ],
    [
      'AUTH_JWKS_URL',
      { ...jwksBase, AUTH_JWKS_URL: 'https://idp:s3cret@idp.example.com/jwks' },
      'AUTH_JWKS_URL must not carry a user or password (fetch refuses it), got "https://…@idp.example.com/jwks"',
    ],
    ['TEMPORAL_ADDRESS', { TEMPORAL_ADDRESS: 'nope' }, 'TEMPORAL_ADDRESS must be host:port, got "nope"'],
    ['TEMPORAL_TLS', { TEMPORAL_TLS: 'Maybe' }, 'TEMPORAL_TLS must be on or off (1/0), got "maybe"'],
    [
      'TEMPORAL_TLS_SERVER_NAME',
      { TEMPORAL_TLS_SERVER_NAME: 'bad name' },
      'TEMPORAL_TLS_SERVER_NAME must be a host name, got "bad name"',
    ],
    [
      'TEMPORAL_API_KEY',
      { TEMPORAL_API_KEY: 'two words' },
      'TEMPORAL_API_KEY must be one word of printable ASCII (up to 8 KiB)',
    ],
    [
      'TEMPORAL_API_KEY',
      { TEMPORAL_API_KEY: 'k'.repeat(8193) },
      'TEMPORAL_API_KEY must be one word of printable ASCII (up to 8 KiB)',
    ],
    [
      'TEMPORAL_TLS',
      { TEMPORAL_TLS: 'off', TEMPORAL_TLS_SERVER_NAME: 'a', TEMPORAL_API_KEY: 'k' },
      'TEMPORAL_TLS_SERVER_NAME is set while TEMPORAL_TLS is off',
    ],
    [
      'TEMPORAL_TLS',
      { TEMPORAL_TLS: '0', TEMPORAL_API_KEY: 'k' },
      'TEMPORAL_API_KEY is set while TEMPORAL_TLS is off',
    ],
    [
      'CALLBACK_RETRY_SECONDS',
      { CALLBACK_RETRY_SECONDS: '1,x' },
      'CALLBACK_RETRY_SECONDS must be up to 10 comma-separated positive whole numbers of seconds, got "1,x"',
    ],
    [
      'CALLBACK_RETRY_SECONDS',
      { CALLBACK_RETRY_SECONDS: '1,2,3,4,5,6,7,8,9,10,11' },
      'CALLBACK_RETRY_SECONDS must be up to 10 comma-separated positive whole numbers of seconds, got "1,2,3,4,5,6,7,8,9,10,11"',
    ],
    [
      'CALLBACK_RETRY_SECONDS',
      { CALLBACK_RETRY_SECONDS: '1,0' },
      'CALLBACK_RETRY_SECONDS must be up to 10 comma-separated positive whole numbers of seconds, got "1,0"',
    ],
    seconds('CALLBACK_TIMEOUT_SECONDS'),
    seconds('SWEEP_INTERVAL_SECONDS', '1.5'),
    seconds('STALL_AFTER_SECONDS', '-1'),
    seconds('HEALTH_REAP_SECONDS', 'x'),
    [
      'HEALTH_BATCH_MS',
      { HEALTH_BATCH_MS: '10001' },
      'HEALTH_BATCH_MS must be a whole number of ms from 0 to 10000, got "10001"',
    ],
    [
      'OPS_ALERT_WEBHOOK_URL',
      { OPS_ALERT_WEBHOOK_URL: 'nope' },
      'OPS_ALERT_WEBHOOK_URL is not a valid URL: "nope"',
    ],
    [
      'OPS_ALERT_WEBHOOK_URL',
      { OPS_ALERT_WEBHOOK_URL: 'ftp://x' },
      'OPS_ALERT_WEBHOOK_URL must use http: or https:, got "ftp:"',
    ],
    ['AUTH_JWT_SECRET', { AUTH_JWT_SECRET: '' }, 'AUTH_JWT_SECRET is required'],
    [
      'AUTH_JWT_SECRET',
      { AUTH_JWT_SECRET: 'é'.repeat(15) },
      'AUTH_JWT_SECRET must be at least 32 bytes (e.g. openssl rand -base64 32), got 30',
    ],
    [
      'AUTH_MAX_TOKEN_LIFETIME_SECONDS',
      { AUTH_MAX_TOKEN_LIFETIME_SECONDS: '2592001' },
      'AUTH_MAX_TOKEN_LIFETIME_SECONDS must be at most 2592000 seconds, got "2592001"',
    ],
    seconds('AUTH_MAX_TOKEN_LIFETIME_SECONDS'),
    [
      'AUTH_CLOCK_SKEW_SECONDS',
      { AUTH_CLOCK_SKEW_SECONDS: '0301' },
      'AUTH_CLOCK_SKEW_SECONDS must be at most 300 seconds, got "301"',
    ],
    [
      'AUTH_CLOCK_SKEW_SECONDS',
      { AUTH_CLOCK_SKEW_SECONDS: 'x' },
      'AUTH_CLOCK_SKEW_SECONDS must be a whole number of seconds, got "x"',
    ],
    [
      'AUTH_ISSUER',
      { AUTH_JWKS_URL: 'https://idp/jwks', AUTH_AUDIENCE: 'a' },
      'AUTH_ISSUER is required when AUTH_JWKS_URL is set',
    ],
    [
      'AUTH_AUDIENCE',
      { AUTH_JWKS_URL: 'https://idp/jwks', AUTH_ISSUER: 'i' },
      'AUTH_AUDIENCE is required when AUTH_JWKS_URL is set',
    ],
    ['AUTH_ISSUER', { AUTH_JWKS_URL: 'nope' }, 'AUTH_ISSUER is required when AUTH_JWKS_URL is set'],
    ['AUTH_JWKS_URL', { ...jwksBase, AUTH_JWKS_URL: 'nope' }, 'AUTH_JWKS_URL is not a valid URL: "nope"'],
    [
      'AUTH_JWKS_URL',
      { ...jwksBase, AUTH_JWKS_URL: 'ftp://x' },
      'AUTH_JWKS_URL must use https: or http:, got "ftp:"',
    ],
    [
      'AUTH_JWKS_URL',
      { ...jwksBase, AUTH_JWKS_URL: 'http://idp.example.com/jwks' },
      'AUTH_JWKS_URL must use https: (http only on loopback), got "http://idp.example.com/jwks"',
    ],
    [
      'AUTH_JWKS_COOLDOWN_SECONDS',
      { ...jwksBase, AUTH_JWKS_COOLDOWN_SECONDS: '0' },
      'AUTH_JWKS_COOLDOWN_SECONDS must be a positive whole number of seconds, got "0"',
    ],
    [
      'AUTH_JWKS_CACHE_SECONDS',
      { ...jwksBase, AUTH_JWKS_CACHE_SECONDS: 'x' },
      'AUTH_JWKS_CACHE_SECONDS must be a positive whole number of seconds, got "x"',
    ],
    [
      'AUTH_JWKS_MAX_STALE_SECONDS',
      { ...jwksBase, AUTH_JWKS_MAX_STALE_SECONDS: '1e3' },
      'AUTH_JWKS_MAX_STALE_SECONDS must be a positive whole number of seconds, got "1e3"',
    ],
    [
      'VAPID_PRIVATE_KEY',
      { VAPID_PUBLIC_KEY: vapidBase.VAPID_PUBLIC_KEY },
      'VAPID_PRIVATE_KEY is missing while VAPID_PUBLIC_KEY is set',
    ],
    [
      'VAPID_PUBLIC_KEY',
      { VAPID_PRIVATE_KEY: vapidBase.VAPID_PRIVATE_KEY },
      'VAPID_PUBLIC_KEY is missing while VAPID_PRIVATE_KEY is set',
    ],
    [
      'VAPID_PUBLIC_KEY',
      { ...vapidBase, VAPID_PUBLIC_KEY: Buffer.alloc(64).toString('base64url') },
      'VAPID_PUBLIC_KEY must be a base64url uncompressed P-256 point (65 bytes)',
    ],
    [
      'VAPID_PUBLIC_KEY',
      { ...vapidBase, VAPID_PUBLIC_KEY: Buffer.alloc(65).toString('base64') },
      'VAPID_PUBLIC_KEY must be a base64url uncompressed P-256 point (65 bytes)',
    ],
    [
      'VAPID_PRIVATE_KEY',
      { ...vapidBase, VAPID_PRIVATE_KEY: 'not+base64url' },
      'VAPID_PRIVATE_KEY must be a base64url P-256 private key (32 bytes)',
    ],
    [
      'VAPID_SUBJECT',
      { ...vapidBase, VAPID_SUBJECT: 'http://x' },
      'VAPID_SUBJECT must start with mailto: or https://, got "http://x"',
    ],
    ['STUDIO_URL', { STUDIO_URL: 'nope' }, 'STUDIO_URL is not a valid URL: "nope"'],
    ['STUDIO_URL', { STUDIO_URL: 'ftp://x' }, 'STUDIO_URL must use http: or https:, got "ftp:"'],
    ['HOST', { HOST: 'a b' }, 'HOST must be a host name or an IP address, without a port'],
    [
      'STUDIO_URL',
      { STUDIO_URL: `https://studio.example/${'p'.repeat(200)}` },
      'STUDIO_URL must be at most 200 characters',
    ],
    [
      'CALLBACK_ALLOW_PRIVATE',
      { CALLBACK_ALLOW_PRIVATE: 'yes' },
      'CALLBACK_ALLOW_PRIVATE must be 0 or 1, got "yes"',
    ],
    ['PUSH_ALLOW_PRIVATE', { PUSH_ALLOW_PRIVATE: 'true' }, 'PUSH_ALLOW_PRIVATE must be 0 or 1, got "true"'],
    [
      'PUSH_PRUNE_MIN_HOURS',
      { PUSH_PRUNE_MIN_HOURS: '0' },
      'PUSH_PRUNE_MIN_HOURS must be a positive number, got "0"',
    ],
    [
      'PUSH_PRUNE_MIN_HOURS',
      { PUSH_PRUNE_MIN_HOURS: '.5' },
      'PUSH_PRUNE_MIN_HOURS must be a positive number, got ".5"',
    ],
    [
      'PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS',
      { PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS: '1' },
      'PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS must be a whole number from 2 to 20, got "1"',
    ],
    [
      'PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS',
      { PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS: '21' },
      'PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS must be a whole number from 2 to 20, got "21"',
    ],
    [
      'PUSH_CONFIG_FAULT_WINDOW_SECONDS',
      { PUSH_CONFIG_FAULT_WINDOW_SECONDS: '86401' },
      'PUSH_CONFIG_FAULT_WINDOW_SECONDS must be at most 86400 seconds, got "86401"',
    ],
    seconds('CLAIM_GRACE_SECONDS'),
    count('PUSH_MAX_SUBSCRIPTIONS_PER_USER', '0'),
    count('PUSH_TEST_RATE_LIMIT'),
    [
      'PUSH_BURST_LIMIT',
      { PUSH_BURST_LIMIT: '-1' },
      'PUSH_BURST_LIMIT must be a whole number (0: off), got "-1"',
    ],
    seconds('PUSH_BURST_WINDOW_SECONDS'),
    seconds('PUSH_TEST_RATE_WINDOW_SECONDS'),
    count('CALLBACK_TEST_RATE_LIMIT'),
    seconds('CALLBACK_TEST_RATE_WINDOW_SECONDS'),
    count('CALLBACK_REDELIVER_RATE_LIMIT'),
    seconds('CALLBACK_REDELIVER_RATE_WINDOW_SECONDS'),
    count('CALLBACK_TEST_RATE_LIMIT_PER_USER'),
    count('CALLBACK_TEST_RATE_LIMIT_PER_TEAM'),
    count('CALLBACK_REDELIVER_RATE_LIMIT_PER_USER'),
    count('CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM'),
    count('CALLBACK_RECOVER_RATE_LIMIT_PER_TEAM'),
    seconds('CALLBACK_RECOVER_RATE_WINDOW_SECONDS'),
    seconds('CALLBACK_RECOVER_RESEND_AFTER_SECONDS'),
    count('CALLBACK_RECOVER_MAX'),
    count('CALLBACK_ROTATE_RATE_LIMIT'),
    seconds('CALLBACK_ROTATE_RATE_WINDOW_SECONDS'),
    [
      'CALLBACK_SECRET_OVERLAP_SECONDS',
      { CALLBACK_SECRET_OVERLAP_SECONDS: '-1' },
      'CALLBACK_SECRET_OVERLAP_SECONDS must be a whole number of seconds, got "-1"',
    ],
    seconds('ACTION_TOKEN_TTL_SECONDS'),
    seconds('ENDPOINT_DISABLE_AFTER_SECONDS'),
    [
      'ENDPOINT_DISABLE_AFTER_SECONDS',
      { ENDPOINT_DISABLE_AFTER_SECONDS: '2592001' },
      'ENDPOINT_DISABLE_AFTER_SECONDS must be at most 2592000 seconds, got "2592001"',
    ],
    [
      'ACTION_TOKEN_TTL_SECONDS',
      { ACTION_TOKEN_TTL_SECONDS: '604801' },
      'ACTION_TOKEN_TTL_SECONDS must be at most 604800 seconds, got "604801"',
    ],
    [
      'CALLBACK_SECRET_OVERLAP_SECONDS',
      { CALLBACK_SECRET_OVERLAP_SECONDS: '604801' },
      'CALLBACK_SECRET_OVERLAP_SECONDS must be at most 604800 seconds, got "604801"',
    ],
    count('RUN_CREATE_RATE_LIMIT', 'x'),
    count('ROUTE_ERROR_LIMIT_PER_RUN'),
    count('ROUTE_ERROR_LIMIT_PER_TEAM'),
    seconds('ROUTE_ERROR_WINDOW_SECONDS'),
    [
      'OPS_ALERT_RETRY_HOURS',
      { OPS_ALERT_RETRY_HOURS: '-1' },
      'OPS_ALERT_RETRY_HOURS must be a positive number, got "-1"',
    ],
    [
      'CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN',
      { CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN: '0' },
      'CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN must be a whole number from 1 to 10000, got "0"',
    ],
    count('CALLBACK_BREAKER_FAILURES'),
    seconds('CALLBACK_BREAKER_COOLDOWN_SECONDS'),
    [
      'CALLBACK_BREAKER_COOLDOWN_SECONDS',
      { CALLBACK_BREAKER_COOLDOWN_SECONDS: '3601' },
      'CALLBACK_BREAKER_COOLDOWN_SECONDS must be at most 3600 seconds, got "3601"',
    ],
    seconds('SHUTDOWN_GRACE_SECONDS'),
    [
      'WORKER_HEALTH_PORT',
      { WORKER_HEALTH_PORT: '-1' },
      'WORKER_HEALTH_PORT must be a TCP port number, got "-1"',
    ],
    [
      'WORKER_METRICS_PORT',
      { WORKER_METRICS_PORT: 'x' },
      'WORKER_METRICS_PORT must be a TCP port number, got "x"',
    ],
    ['METRICS_PORT', { METRICS_PORT: '99999' }, 'METRICS_PORT must be a TCP port number, got "99999"'],
    [
      'METRICS_TOKEN',
      { METRICS_TOKEN: 'short' },
      'METRICS_TOKEN must be one word of 16 to 4096 printable ASCII characters',
    ],
    [
      'METRICS_TOKEN',
      { METRICS_TOKEN: 'sixteen chars or more' },
      'METRICS_TOKEN must be one word of 16 to 4096 printable ASCII characters',
    ],
    ['TRUST_PROXY', { TRUST_PROXY: 'on' }, 'TRUST_PROXY must be 0 or 1, got "on"'],
    [
      'LOG_LEVEL',
      { LOG_LEVEL: 'Verbose' },
      'LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent, got "verbose"',
    ],
    ['LOG_FORMAT', { LOG_FORMAT: 'XML' }, 'LOG_FORMAT must be one of json, pretty, got "xml"'],
    [
      'WORKER_MAX_CONCURRENT_ACTIVITIES',
      { WORKER_MAX_CONCURRENT_ACTIVITIES: '10001' },
      'WORKER_MAX_CONCURRENT_ACTIVITIES must be a whole number from 1 to 10000, got "10001"',
    ],
    [
      'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS',
      { WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: '0' },
      'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS must be a whole number from 1 to 10000, got "0"',
    ],
  ];
  for (const [name, env, message] of refusals) {
    const value = env[name] === undefined ? 'unset' : JSON.stringify(env[name].slice(0, 24));
    it(`${name} ${value}: ${message.slice(message.startsWith(`${name} `) ? name.length + 1 : 0).slice(0, 70)}`, () => {
      assert.equal(refusal({ ...base, ...env }), message);
    });
  }

  it('the TEMPORAL_TLS_* files: unreadable, not PEM, half a client pair', () => {
    const missing = path.join(dir, 'missing.pem');
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS_CA: missing }),
      `TEMPORAL_TLS_CA cannot be read: "${missing}" (ENOENT)`,
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS_CERT: notPem, TEMPORAL_TLS_KEY: pem }),
      `TEMPORAL_TLS_CERT must name a PEM file, "${notPem}" is not one`,
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS_CERT: pem }),
      'TEMPORAL_TLS_KEY is missing while TEMPORAL_TLS_CERT is set',
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS_KEY: pem }),
      'TEMPORAL_TLS_CERT is missing while TEMPORAL_TLS_KEY is set',
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS: 'off', TEMPORAL_TLS_CA: pem }),
      'TEMPORAL_TLS_CA is set while TEMPORAL_TLS is off',
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS: 'off', TEMPORAL_TLS_CERT: pem, TEMPORAL_TLS_KEY: pem }),
      'TEMPORAL_TLS_CERT is set while TEMPORAL_TLS is off',
    );
  });

  it('Temporal TLS: on by flag, by any setting or by an API key; off by default', () => {
    const content = Buffer.from('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    assert.deepEqual(loadTemporalConnectionConfig({}), {
      temporalAddress: '127.0.0.1:7233',
      temporalTls: undefined,
    });
    assert.deepEqual(loadTemporalConnectionConfig({ TEMPORAL_TLS: 'ON' }).temporalTls, {});
    assert.deepEqual(
      loadTemporalConnectionConfig({ TEMPORAL_TLS: 'true', TEMPORAL_TLS_CA: pem }).temporalTls,
      {
        ca: content,
      },
    );
    assert.deepEqual(
      loadTemporalConnectionConfig({ TEMPORAL_TLS_CERT: pem, TEMPORAL_TLS_KEY: pem }).temporalTls,
      { clientCert: { crt: content, key: content } },
    );
    assert.deepEqual(loadTemporalConnectionConfig({ TEMPORAL_API_KEY: 'k' }), {
      temporalAddress: '127.0.0.1:7233',
      temporalTls: {},
      temporalApiKey: 'k',
    });
    assert.equal(loadTemporalConnectionConfig({ TEMPORAL_TLS: '0' }).temporalTls, undefined);
    assert.equal(loadTemporalConnectionConfig({ TEMPORAL_TLS: '1' }).temporalTls !== undefined, true);
  });

  it('the first refusal is of the first variable read (server, servers, auth, push, the rest)', () => {
    assert.equal(refusal({ PORT: 'x' }), 'PORT must be a TCP port number, got "x"');
    assert.equal(refusal({}), 'MONGO_URL is required');
    assert.equal(refusal({ MONGO_URL: base.MONGO_URL }), 'AUTH_JWT_SECRET is required');
    assert.equal(refusal({ AUTH_JWKS_URL: 'nope', VAPID_PUBLIC_KEY: 'x' }), 'MONGO_URL is required');
    assert.equal(
      refusal({ ...base, AUTH_JWKS_URL: 'nope', AUTH_JWT_SECRET: '' }),
      'AUTH_ISSUER is required when AUTH_JWKS_URL is set',
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_ADDRESS: 'x', SWEEP_INTERVAL_SECONDS: 'x' }),
      'TEMPORAL_ADDRESS must be host:port, got "x"',
    );
    assert.equal(
      refusal({ ...base, TEMPORAL_TLS_CA: path.join(dir, 'missing'), TEMPORAL_TLS: 'x' }),
      'TEMPORAL_TLS must be on or off (1/0), got "x"',
    );
    assert.equal(
      refusal({ ...base, AUTH_JWT_SECRET: 'short', HEALTH_REAP_SECONDS: '0' }),
      'HEALTH_REAP_SECONDS must be a positive whole number of seconds, got "0"',
    );
    assert.equal(
      refusal({ ...base, AUTH_JWT_SECRET: 'short', AUTH_CLOCK_SKEW_SECONDS: '0', VAPID_PUBLIC_KEY: 'x' }),
      'AUTH_JWT_SECRET must be at least 32 bytes (e.g. openssl rand -base64 32), got 5',
    );
    assert.equal(
      refusal({ ...base, TRUST_PROXY: 'x', VAPID_PUBLIC_KEY: 'x', LOG_LEVEL: 'x' }),
      'VAPID_PRIVATE_KEY is missing while VAPID_PUBLIC_KEY is set',
    );
    assert.equal(
      refusal({ ...base, TRUST_PROXY: 'x', CALLBACK_ALLOW_PRIVATE: 'x', LOG_LEVEL: 'x' }),
      'CALLBACK_ALLOW_PRIVATE must be 0 or 1, got "x"',
    );
    assert.equal(
      refusal({ ...base, WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: 'x', LOG_FORMAT: 'x', METRICS_TOKEN: 'x' }),
      'METRICS_TOKEN must be one word of 16 to 4096 printable ASCII characters',
    );
  });

  it('the emitter and the operator read only the servers (and the Temporal UI)', () => {
    const emitter = { MONGO_URL: base.MONGO_URL, PORT: 'x', AUTH_JWT_SECRET: '' };
    assert.equal(loadEmitterConfig(emitter).mongoDb, 'flow');
    assert.equal(refusal({}, loadEmitterConfig), 'MONGO_URL is required');
    assert.equal(loadOperatorConfig(emitter).temporalUiUrl, 'http://localhost:8233');
    assert.equal(
      loadOperatorConfig({ ...emitter, TEMPORAL_UI_URL: 'https://ui.example.com/ns//' }).temporalUiUrl,
      'https://ui.example.com/ns',
    );
    assert.equal(
      refusal({ ...emitter, TEMPORAL_UI_URL: 'ftp://x' }, loadOperatorConfig),
      'TEMPORAL_UI_URL must use http: or https:, got "ftp:"',
    );
    assert.equal(
      refusal({ ...emitter, TEMPORAL_UI_URL: 'nope' }, loadOperatorConfig),
      'TEMPORAL_UI_URL is not a valid URL: "nope"',
    );
  });

  it('the launcher reads what it needs before a full config exists, never refusing', () => {
    assert.deepEqual(launcherEnv({ PORT: 'x', MONGO_URL: ' ' }), {
      mongoUrl: undefined,
      temporalAddress: undefined,
      temporalNamespace: 'default',
      temporalUiUrl: undefined,
      stackStateFile: undefined,
      authJwtSecret: undefined,
      authIssuer: undefined,
      authAudience: undefined,
      vapidPublicKey: undefined,
      vapidPrivateKey: undefined,
      host: '127.0.0.1',
      port: 'x',
    });
    assert.deepEqual(
      launcherEnv({
        MONGO_URL: 'm',
        TEMPORAL_ADDRESS: 't',
        TEMPORAL_NAMESPACE: 'n',
        TEMPORAL_UI_URL: 'u',
        FLOW_NOTIFY_STACK_FILE: 'f',
        AUTH_JWT_SECRET: 's',
        AUTH_ISSUER: 'i',
        AUTH_AUDIENCE: 'a',
        VAPID_PUBLIC_KEY: 'p',
        VAPID_PRIVATE_KEY: 'k',
        HOST: 'h',
        PORT: '1',
      }),
      {
        mongoUrl: 'm',
        temporalAddress: 't',
        temporalNamespace: 'n',
        temporalUiUrl: 'u',
        stackStateFile: 'f',
        authJwtSecret: 's',
        authIssuer: 'i',
        authAudience: 'a',
        vapidPublicKey: 'p',
        vapidPrivateKey: 'k',
        host: 'h',
        port: '1',
      },
    );
  });
});
