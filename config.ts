// The one place that reads the environment. Every variable of the contract, typed, read once: one zod schema per
// section. A bad value throws a ConfigError whose message is one line naming the variable.
import { readFileSync } from 'node:fs';
import { isIP, isIPv6 } from 'node:net';
import { MongoClient } from 'mongodb';
import { z } from 'zod';
import { DEFAULT_CALLBACK_RETRY_SECONDS } from './domain/callback';
import { STUDIO_URL_MAX_LENGTH } from './domain/declarativePush';
import { OPS_ALERT_MAX_TRIES, opsAlertMaxWaitMs, opsAlertTries } from './domain/ops';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

// A section is one zod object keyed by variable name: an issue's path is its variable and its message the rest of
// the line, so every refusal reads `<VARIABLE> <what is wrong>`.

/** The environment as the sections read it: values trimmed, blank ones left out. */
function present(env: Env): Env {
  return Object.fromEntries(
    Object.entries(env).flatMap(([name, value]) => (value?.trim() ? [[name, value.trim()]] : [])),
  );
}

/** Fields that each read one variable through a schema: `{ field: [VARIABLE, schema] }`, in the order read. */
function section<F extends Record<string, readonly [string, z.ZodType]>>(fields: F) {
  // Every variable arrives as a string (or not at all).
  const shape = Object.fromEntries(Object.values(fields)) as Record<
    string,
    z.ZodType<unknown, string | undefined>
  >;
  return z.object(shape).transform(
    (vars) =>
      Object.fromEntries(
        Object.entries(fields).map(([field, [name]]) => [field, vars[name]]),
      ) as OptionalWhenUndefined<{
        [K in keyof F]: z.output<F[K][1]>;
      }>,
  );
}

/** A field that may be undefined is also one that may be left out (as an interface would write it). */
type OptionalWhenUndefined<T> = Flat<
  { [K in keyof T as undefined extends T[K] ? K : never]?: T[K] } & {
    [K in keyof T as undefined extends T[K] ? never : K]: T[K];
  }
>;
/** One object type instead of an intersection, for readable hovers and errors. */
type Flat<T> = { [K in keyof T]: T[K] } & {};

/** A section read from the environment, or its first refusal as a ConfigError. */
function parse<S extends z.ZodType>(schema: S, env: Env): z.output<S> {
  const result = schema.safeParse(env);
  if (result.success) return result.data;
  const [first] = result.error.issues;
  throw new ConfigError(`${first.path.join('.')} ${first.message}`);
}

/** A refusal that shows what was read: `<phrase>, got "<value>"`. */
const got = (phrase: string) => ({
  error: (issue: { input?: unknown }) => `${phrase}, got "${String(issue.input)}"`,
});

const isPositiveWhole = (raw: string) => /^\d*[1-9]\d*$/.test(raw);
const numeric = (accepts: (raw: string) => boolean, what: string) =>
  z
    .string()
    .refine(accepts, got(`must be ${what}`))
    .transform(Number);

const seconds = numeric(isPositiveWhole, 'a positive whole number of seconds');
const count = numeric(isPositiveWhole, 'a positive whole number');
const countOrOff = numeric((raw) => /^\d+$/.test(raw), 'a whole number (0: off)');
const positiveNumber = numeric((raw) => /^\d+(\.\d+)?$/.test(raw) && Number(raw) > 0, 'a positive number');
const port = numeric((raw) => /^\d+$/.test(raw) && Number(raw) <= 65535, 'a TCP port number');
const slots = numeric(
  (raw) => isPositiveWhole(raw) && Number(raw) <= 10_000,
  'a whole number from 1 to 10000',
);
const boundedSeconds = (fallback: number, max: number) =>
  seconds.default(fallback).refine((value) => value <= max, got(`must be at most ${max} seconds`));
/** As boundedSeconds, 0 included (none: strict expiry, no overlap). */
const boundedSecondsOrNone = (fallback: number, max: number) =>
  numeric((raw) => /^\d+$/.test(raw), 'a whole number of seconds')
    .default(fallback)
    .refine((value) => value <= max, got(`must be at most ${max} seconds`));
const secondsList = z
  .string()
  .refine(
    (raw) => raw.split(',').length <= 10 && raw.split(',').every((part) => isPositiveWhole(part.trim())),
    got('must be up to 10 comma-separated positive whole numbers of seconds'),
  )
  .transform((raw) => raw.split(',').map(Number));

const flag = z
  .enum(['0', '1'], got('must be 0 or 1'))
  .default('0')
  .transform((raw) => raw === '1');
const onOff = z
  .string()
  .toLowerCase()
  .pipe(z.enum(['1', 'true', 'on', '0', 'false', 'off'], got('must be on or off (1/0)')))
  .transform((raw) => ['1', 'true', 'on'].includes(raw));
const oneOf = <const T extends readonly [string, ...string[]]>(values: T) =>
  z
    .string()
    .toLowerCase()
    .pipe(z.enum(values, got(`must be one of ${values.join(', ')}`)));

/** One word of printable ASCII: it travels in an Authorization header. */
const printableWord = (min: number, max: number, refusal: string) =>
  z.string().regex(new RegExp(`^[\\x21-\\x7e]{${min},${max}}$`), refusal);

/** `text` with any URL's user and password left out: a refusal goes to stderr and the logs. */
const withoutCredentials = (text: string) => text.replace(/\/\/[^/@\s"]*@/g, '//…@');

/** A URL of one of `protocols`, kept as written. */
const url = (...protocols: string[]) =>
  z.string({ error: 'is required' }).superRefine((raw, ctx) => {
    if (!URL.canParse(raw)) return ctx.addIssue(`is not a valid URL: "${withoutCredentials(raw)}"`);
    const { protocol } = new URL(raw);
    if (!protocols.includes(protocol)) ctx.addIssue(`must use ${protocols.join(' or ')}, got "${protocol}"`);
  });
const httpUrl = url('http:', 'https:');
/** A URL this process fetches itself: Node's fetch refuses one with a user or password at every call. */
const withoutUserinfo = (raw: string, ctx: z.RefinementCtx) => {
  const { username, password } = new URL(raw);
  if (username || password)
    ctx.addIssue(`must not carry a user or password (fetch refuses it), got "${withoutCredentials(raw)}"`);
};
const fetchedUrl = httpUrl.superRefine(withoutUserinfo);
/**
 * A MongoDB connection string, kept as written, if the driver takes it: a replica set's seed list
 * (`mongodb://h1:27017,h2:27017/…`) is no WHATWG URL. The client is built, not connected.
 */
const mongoConnectionString = z.string({ error: 'is required' }).superRefine((raw, ctx) => {
  try {
    new MongoClient(raw);
  } catch (err) {
    const why = err instanceof Error ? err.message : String(err);
    ctx.addIssue(
      `is not a MongoDB connection string: "${withoutCredentials(raw)}" (${withoutCredentials(why)})`,
    );
  }
});
const withoutTrailingSlash = (value: string) => value.replace(/\/+$/, '');
const hostPort = z.string().regex(/^[A-Za-z0-9.\-[\]:]+:\d{1,5}$/, got('must be host:port'));
const hostName = z.string().regex(/^[A-Za-z0-9.-]{1,253}$/, got('must be a host name'));
/** A host name: its labels letters, digits and inner hyphens (what the API listens on, a push host). */
const HOST_NAME = /^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/;
/** A host as a URL's hostname spells it: a name, or an IPv6 address in brackets. */
const isHostSuffix = (suffix: string): boolean =>
  HOST_NAME.test(suffix) || (/^\[[0-9a-f:.]+\]$/.test(suffix) && isIPv6(suffix.slice(1, -1)));
/** Host suffixes, compared in lower case; one that is no host name would match no host at all. */
const suffixList = z
  .string()
  .transform((list) => list.split(',').flatMap((suffix) => suffix.trim().toLowerCase() || []))
  .refine((suffixes) => suffixes.every(isHostSuffix), {
    error: (issue: { input?: unknown }) => {
      const bad = (issue.input as string[]).find((suffix) => !isHostSuffix(suffix));
      return `must be host names separated by commas (no scheme, port, path or wildcard), got "${bad}"`;
    },
  });

/** The path of a PEM file, read now: a bad path is refused at start, not at the first connection. */
const pemFile = z
  .string()
  .transform((file, ctx) => {
    let content: Buffer;
    try {
      content = readFileSync(file);
    } catch (err) {
      ctx.addIssue(`cannot be read: "${file}" (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      return z.NEVER;
    }
    if (content.length > 1_000_000 || !content.includes('-----BEGIN ')) {
      ctx.addIssue(`must name a PEM file, "${file}" is not one`);
      return z.NEVER;
    }
    return content;
  })
  .optional();

const serverSection = section({
  host: [
    'HOST',
    z
      .string()
      .refine(
        (v) => isIP(v) !== 0 || HOST_NAME.test(v),
        'must be a host name or an IP address, without a port',
      )
      .default('127.0.0.1'),
  ],
  port: ['PORT', port.default(8080)],
});

/** What MongoDB takes as a database name (no / \ . " $ * < > : | ? or space, under 64 bytes). */
const DATABASE_NAME = /^[^/\\. "$*<>:|?\0]{1,63}$/;

const mongoSection = section({
  mongoUrl: ['MONGO_URL', mongoConnectionString],
  mongoDb: [
    'MONGO_DB',
    z
      .string()
      .regex(
        DATABASE_NAME,
        'must be a MongoDB database name: 1 to 63 characters, none of / \\ . " $ * < > : | ? or space',
      )
      .default('flow'),
  ],
});

/** Any of these turns TLS on (an API key is never sent in the clear); beside TEMPORAL_TLS=off they are refused. */
const TEMPORAL_TLS_SETTINGS = [
  'TEMPORAL_TLS_CA',
  'TEMPORAL_TLS_CERT',
  'TEMPORAL_TLS_SERVER_NAME',
  'TEMPORAL_API_KEY',
] as const;

// Keyed by variable name (not a `section`): its refusals between variables name them.
const temporalSection = z
  .object({
    TEMPORAL_ADDRESS: hostPort.default('127.0.0.1:7233'),
    TEMPORAL_TLS: onOff.optional(),
    TEMPORAL_TLS_CA: pemFile,
    TEMPORAL_TLS_CERT: pemFile,
    TEMPORAL_TLS_KEY: pemFile,
    TEMPORAL_TLS_SERVER_NAME: hostName.optional(),
    TEMPORAL_API_KEY: printableWord(1, 8192, 'must be one word of printable ASCII (up to 8 KiB)').optional(),
  })
  .superRefine((vars, ctx) => {
    const refuse = (name: string, message: string) => ctx.addIssue({ code: 'custom', path: [name], message });
    if (vars.TEMPORAL_TLS_CERT && !vars.TEMPORAL_TLS_KEY)
      return refuse('TEMPORAL_TLS_KEY', 'is missing while TEMPORAL_TLS_CERT is set');
    if (vars.TEMPORAL_TLS_KEY && !vars.TEMPORAL_TLS_CERT)
      return refuse('TEMPORAL_TLS_CERT', 'is missing while TEMPORAL_TLS_KEY is set');
    const set = TEMPORAL_TLS_SETTINGS.find((name) => vars[name] !== undefined);
    if (vars.TEMPORAL_TLS === false && set) refuse(set, 'is set while TEMPORAL_TLS is off');
  })
  .transform((vars) => {
    const { TEMPORAL_TLS_CA: ca, TEMPORAL_TLS_CERT: crt, TEMPORAL_TLS_KEY: key } = vars;
    const { TEMPORAL_TLS_SERVER_NAME: serverName, TEMPORAL_API_KEY: temporalApiKey } = vars;
    const tlsOn = vars.TEMPORAL_TLS ?? TEMPORAL_TLS_SETTINGS.some((name) => vars[name] !== undefined);
    /** A secured Temporal frontend: TLS, optionally mTLS (a client pair) and/or a Temporal Cloud API key. */
    const tls: {
      /** The server CA (PEM); undefined: the system's trusted roots (e.g. Temporal Cloud). */
      ca?: Buffer;
      /** The mTLS client certificate and key (PEM). */
      clientCert?: { crt: Buffer; key: Buffer };
      /** The name the server certificate must carry, when it is not the host of TEMPORAL_ADDRESS. */
      serverName?: string;
    } = {
      ...(ca && { ca }),
      ...(crt && key && { clientCert: { crt, key } }),
      ...(serverName && { serverName }),
    };
    const connection: {
      temporalAddress: string;
      /** undefined: plaintext (the dev server). */
      temporalTls?: typeof tls;
      /** Sent as `authorization: Bearer <key>` on every call (Temporal Cloud API keys). */
      temporalApiKey?: string;
    } = {
      temporalAddress: vars.TEMPORAL_ADDRESS,
      temporalTls: tlsOn ? tls : undefined,
      ...(temporalApiKey && { temporalApiKey }),
    };
    return connection;
  });

/** Where Temporal is and how to reach it: what every process that connects needs. */
export type TemporalConnectionConfig = z.output<typeof temporalSection>;
export type TemporalTlsConfig = NonNullable<TemporalConnectionConfig['temporalTls']>;

/** What the emitter hands the workflows beside the servers. */
const workflowSection = section({
  temporalNamespace: ['TEMPORAL_NAMESPACE', z.string().default('default')],
  temporalTaskQueue: ['TEMPORAL_TASK_QUEUE', z.string().default('flow-notify')],
  /** Waits between callback attempts: n waits → n + 1 attempts. */
  callbackRetrySeconds: [
    'CALLBACK_RETRY_SECONDS',
    secondsList.default(() => [...DEFAULT_CALLBACK_RETRY_SECONDS]),
  ],
  /**
   * One callback attempt's whole exchange, connect to last body byte. Also an episode option: a callback attempt's
   * start-to-close is this plus a margin.
   */
  callbackTimeoutSeconds: ['CALLBACK_TIMEOUT_SECONDS', seconds.default(10)],
  // An episode's released push is retried after one sweep interval (EpisodeOptions.releasedRetrySeconds).
  sweepIntervalSeconds: ['SWEEP_INTERVAL_SECONDS', seconds.default(120)],
  stallAfterSeconds: ['STALL_AFTER_SECONDS', seconds.default(900)],
  /** How long a terminal run's health state is kept before it is reaped. */
  healthReapSeconds: ['HEALTH_REAP_SECONDS', seconds.default(1800)],
  /**
   * How long a process holds a run's events before they reach its health workflow as one signal (a pause or an
   * end goes at once); 0: a signal per call, unbatched. Capped at a quarter of the stall time where it is used.
   */
  healthBatchMs: [
    'HEALTH_BATCH_MS',
    numeric(
      (raw) => /^\d+$/.test(raw) && Number(raw) <= 10_000,
      'a whole number of ms from 0 to 10000',
    ).default(1500),
  ],
  /** undefined: the operator family is off. */
  opsAlertWebhookUrl: ['OPS_ALERT_WEBHOOK_URL', fetchedUrl.optional()],
});

/** Read only when AUTH_JWKS_URL is set. */
const jwksSection = section({
  // An identity provider signs tokens for every application it serves: without both, another app's token would do.
  issuer: ['AUTH_ISSUER', z.string({ error: 'is required when AUTH_JWKS_URL is set' })],
  audience: ['AUTH_AUDIENCE', z.string({ error: 'is required when AUTH_JWKS_URL is set' })],
  // Keys fetched over plain http could be swapped on the way: only a loopback provider (tests, a sidecar) may use it.
  url: [
    'AUTH_JWKS_URL',
    url('https:', 'http:').pipe(
      z
        .string()
        .superRefine(withoutUserinfo)
        .refine((raw) => {
          const { protocol, hostname } = new URL(raw);
          return protocol === 'https:' || ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
        }, got('must use https: (http only on loopback)')),
    ),
  ],
  /** Claim names of the provider's tokens (sub and team unless configured). */
  userClaim: ['AUTH_USER_CLAIM', z.string().default('sub')],
  teamClaim: ['AUTH_TEAM_CLAIM', z.string().default('team')],
  /** After a good fetch, an unknown kid waits this long before the keys are fetched again (a rotation). */
  cooldownSeconds: ['AUTH_JWKS_COOLDOWN_SECONDS', seconds.default(30)],
  /** How long a fetched key set is fresh. */
  cacheSeconds: ['AUTH_JWKS_CACHE_SECONDS', seconds.default(600)],
  /** How long past its freshness the last good key set still serves while reloads fail. */
  maxStaleSeconds: ['AUTH_JWKS_MAX_STALE_SECONDS', seconds.default(86400)],
});

/** A deployment's identity provider: its tokens are verified against the key set at `url`. */
export type JwksConfig = z.output<typeof jwksSection>;

/** Below this an HS256 secret can be brute-forced offline from one token (RFC 7518 §3.2 asks for 256 bits). */
const MIN_SECRET_BYTES = 32;
const bytes = (value: unknown) => Buffer.byteLength(String(value), 'utf8');
const hs256Secret = z.string({ error: 'is required' }).refine((secret) => bytes(secret) >= MIN_SECRET_BYTES, {
  error: (issue) =>
    `must be at least ${MIN_SECRET_BYTES} bytes (e.g. openssl rand -base64 32), got ${bytes(issue.input)}`,
});

/** With a JWKS the HS256 secret is optional (the provider's tokens may be the only ones). */
const authSection = (withJwks: boolean) =>
  section({
    /** HS256 secret (at least 32 bytes); undefined only when a JWKS is configured. */
    authJwtSecret: ['AUTH_JWT_SECRET', withJwks ? hs256Secret.optional() : hs256Secret],
    /** When set, every token (HS256 included) must carry this iss / aud. */
    authIssuer: ['AUTH_ISSUER', z.string().optional()],
    authAudience: ['AUTH_AUDIENCE', z.string().optional()],
    // Past these a stolen token lives for months, or an expired one is honoured for hours.
    authMaxTokenLifetimeSeconds: [
      'AUTH_MAX_TOKEN_LIFETIME_SECONDS',
      boundedSeconds(7 * 24 * 3600, 30 * 24 * 3600),
    ],
    authClockSkewSeconds: ['AUTH_CLOCK_SKEW_SECONDS', boundedSecondsOrNone(60, 300)],
  });

const base64urlKey = (length: number, refusal: string) =>
  z
    .string()
    .refine(
      (key) => /^[A-Za-z0-9_-]+$/.test(key) && Buffer.from(key, 'base64url').length === length,
      refusal,
    );

/** Read only when either key is set: first both halves, then their shapes. */
const vapidSection = z
  .object({
    VAPID_PUBLIC_KEY: z.string({ error: 'is missing while VAPID_PRIVATE_KEY is set' }),
    VAPID_PRIVATE_KEY: z.string({ error: 'is missing while VAPID_PUBLIC_KEY is set' }),
  })
  .catchall(z.string())
  .transform((vars): Env => vars) // the whole environment goes on to the next stage
  .pipe(
    section({
      publicKey: [
        'VAPID_PUBLIC_KEY',
        base64urlKey(65, 'must be a base64url uncompressed P-256 point (65 bytes)'),
      ],
      privateKey: ['VAPID_PRIVATE_KEY', base64urlKey(32, 'must be a base64url P-256 private key (32 bytes)')],
      subject: [
        'VAPID_SUBJECT',
        z
          .string()
          .regex(/^(mailto:|https:\/\/)/, got('must start with mailto: or https://'))
          .default('mailto:flow-notify@localhost'),
      ],
    }),
  );

export type VapidConfig = z.output<typeof vapidSection>;

/** Where notifications go, and how long their records wait. STUDIO_URL's default is filled in from HOST and PORT. */
const deliverySection = section({
  studioUrl: [
    'STUDIO_URL',
    httpUrl
      .max(STUDIO_URL_MAX_LENGTH, `must be at most ${STUDIO_URL_MAX_LENGTH} characters`)
      .transform(withoutTrailingSlash),
  ],
  callbackAllowPrivate: ['CALLBACK_ALLOW_PRIVATE', flag],
  /**
   * After a rotation, how long callbacks carry the previous secret's signature beside the new one's. A week at
   * most: past that a leaked secret the rotation was meant to retire still signs.
   */
  callbackSecretOverlapSeconds: ['CALLBACK_SECRET_OVERLAP_SECONDS', boundedSecondsOrNone(86400, 604800)],
  pushAllowPrivate: ['PUSH_ALLOW_PRIVATE', flag],
  /** The longest a notification's action token answers (it also ends with its interaction); a week at most. */
  actionTokenTtlSeconds: ['ACTION_TOKEN_TTL_SECONDS', boundedSeconds(86400, 604800)],
  /** Team endpoints one team may register (each is an outbound POST per event it subscribes to). */
  endpointsPerTeam: ['ENDPOINTS_PER_TEAM', slots.default(20)],
  /** How long an endpoint may fail without one success before it is disabled; 30 days at most. */
  endpointDisableAfterSeconds: ['ENDPOINT_DISABLE_AFTER_SECONDS', boundedSeconds(432000, 30 * 86400)],
  /** Host suffixes a push endpoint must match; empty = any public https host. */
  pushEndpointAllowlist: ['PUSH_ENDPOINT_ALLOWLIST', suffixList.default([])],
  /** An endpoint that keeps failing to be a push service is pruned after 3 episodes spanning at least this. */
  pushPruneMinHours: ['PUSH_PRUNE_MIN_HOURS', positiveNumber.default(24)],
  /**
   * A known push service refuses our VAPID identity as a whole (push_config_fault) once this many distinct
   * subscriptions of at least two users were refused, with nothing accepted, within pushConfigFaultWindowSeconds.
   * At least 2 (one refused subscription is that subscription's problem); past 20 a broken key pages too late.
   */
  pushConfigFaultMinSubscriptions: [
    'PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS',
    numeric(
      (raw) => /^\d+$/.test(raw) && Number(raw) >= 2 && Number(raw) <= 20,
      'a whole number from 2 to 20',
    ).default(3),
  ],
  pushConfigFaultWindowSeconds: ['PUSH_CONFIG_FAULT_WINDOW_SECONDS', boundedSeconds(3600, 86400)],
  claimGraceSeconds: ['CLAIM_GRACE_SECONDS', seconds.default(300)],
  /** How long an operator alert keeps retrying before it settles as given up. */
  opsAlertRetryHours: ['OPS_ALERT_RETRY_HOURS', positiveNumber.default(24)],
  /**
   * Callback attempts one worker has open to one receiver origin at once; the others wait their turn. Per worker
   * process: each worker paces its own attempts (delivery/callback/pacing.ts).
   */
  callbackMaxInFlightPerOrigin: ['CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN', slots.default(8)],
  /** Failures in a row to one origin before the worker holds its callbacks for a cool-down (a circuit breaker). */
  callbackBreakerFailures: ['CALLBACK_BREAKER_FAILURES', count.default(20)],
  /** The breaker's first cool-down; each failed probe doubles it, up to 20 times this. */
  callbackBreakerCooldownSeconds: ['CALLBACK_BREAKER_COOLDOWN_SECONDS', boundedSeconds(30, 3600)],
}).superRefine((d, ctx) => {
  // Each of an alert's tries is about a dozen events of its one workflow history, which Temporal ends at 51,200.
  const tries = opsAlertTries(d.opsAlertRetryHours, d.claimGraceSeconds);
  if (tries > OPS_ALERT_MAX_TRIES)
    ctx.addIssue({
      code: 'custom',
      path: ['OPS_ALERT_RETRY_HOURS'],
      message:
        `must allow at most ${OPS_ALERT_MAX_TRIES} tries of an alert (its workflow's history), got ` +
        `${d.opsAlertRetryHours} hours of tries ${opsAlertMaxWaitMs(d.claimGraceSeconds) / 1000} s apart ` +
        `(CLAIM_GRACE_SECONDS / 3, at most 600): ${tries} tries; lower it or raise CLAIM_GRACE_SECONDS`,
    });
});

const rate = (limit: number, windowSeconds: number) => ({ limit, windowSeconds });
/** At most `limit` in any `windowSeconds`. */
export type RateRule = ReturnType<typeof rate>;

/** The abuse bounds. The per-user and per-team callback bounds share their run bound's window. */
const limitsSection = section({
  pushMaxSubscriptionsPerUser: ['PUSH_MAX_SUBSCRIPTIONS_PER_USER', count.default(20)],
  pushTest: ['PUSH_TEST_RATE_LIMIT', count.default(5)],
  pushTestWindow: ['PUSH_TEST_RATE_WINDOW_SECONDS', seconds.default(60)],
  /** 0 switches the burst bound off: every push goes at once, with no count kept. */
  pushBurst: ['PUSH_BURST_LIMIT', countOrOff.default(5)],
  pushBurstWindow: ['PUSH_BURST_WINDOW_SECONDS', seconds.default(600)],
  callbackTest: ['CALLBACK_TEST_RATE_LIMIT', count.default(5)],
  callbackTestWindow: ['CALLBACK_TEST_RATE_WINDOW_SECONDS', seconds.default(60)],
  callbackRedeliver: ['CALLBACK_REDELIVER_RATE_LIMIT', count.default(5)],
  callbackRedeliverWindow: ['CALLBACK_REDELIVER_RATE_WINDOW_SECONDS', seconds.default(60)],
  callbackTestPerUser: ['CALLBACK_TEST_RATE_LIMIT_PER_USER', count.default(10)],
  callbackTestPerTeam: ['CALLBACK_TEST_RATE_LIMIT_PER_TEAM', count.default(30)],
  callbackRedeliverPerUser: ['CALLBACK_REDELIVER_RATE_LIMIT_PER_USER', count.default(20)],
  callbackRedeliverPerTeam: ['CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM', count.default(60)],
  callbackRecoverPerTeam: ['CALLBACK_RECOVER_RATE_LIMIT_PER_TEAM', count.default(10)],
  callbackRecoverWindow: ['CALLBACK_RECOVER_RATE_WINDOW_SECONDS', seconds.default(3600)],
  // A recover must not re-send what one just re-sent (each recover would send every give-up again).
  callbackRecoverResendAfter: ['CALLBACK_RECOVER_RESEND_AFTER_SECONDS', seconds.default(3600)],
  callbackRecoverMax: ['CALLBACK_RECOVER_MAX', count.default(10_000)],
  callbackRotate: ['CALLBACK_ROTATE_RATE_LIMIT', count.default(5)],
  callbackRotateWindow: ['CALLBACK_ROTATE_RATE_WINDOW_SECONDS', seconds.default(3600)],
  runCreate: ['RUN_CREATE_RATE_LIMIT', count.default(120)],
  routeErrorPerRun: ['ROUTE_ERROR_LIMIT_PER_RUN', count.default(20)],
  routeErrorPerTeam: ['ROUTE_ERROR_LIMIT_PER_TEAM', count.default(200)],
  routeErrorWindow: ['ROUTE_ERROR_WINDOW_SECONDS', seconds.default(3600)],
}).transform((l) => {
  return {
    pushMaxSubscriptionsPerUser: l.pushMaxSubscriptionsPerUser,
    pushTestRate: rate(l.pushTest, l.pushTestWindow),
    /** Pushes one person gets from one team in a window before the rest fold into one digest; undefined: off. */
    pushBurstRate: l.pushBurst ? rate(l.pushBurst, l.pushBurstWindow) : undefined,
    callbackTestRate: rate(l.callbackTest, l.callbackTestWindow),
    callbackRedeliverRate: rate(l.callbackRedeliver, l.callbackRedeliverWindow),
    /** The same outbound POSTs across every run of one user and of one team. */
    callbackTestRatePerUser: rate(l.callbackTestPerUser, l.callbackTestWindow),
    callbackTestRatePerTeam: rate(l.callbackTestPerTeam, l.callbackTestWindow),
    callbackRedeliverRatePerUser: rate(l.callbackRedeliverPerUser, l.callbackRedeliverWindow),
    callbackRedeliverRatePerTeam: rate(l.callbackRedeliverPerTeam, l.callbackRedeliverWindow),
    /** Recovers of a team's callbacks that gave up, per team. */
    callbackRecoverRatePerTeam: rate(l.callbackRecoverPerTeam, l.callbackRecoverWindow),
    /** A give-up re-sent (a redelivery, manual or a recover's) this recently is skipped by a recover. */
    callbackRecoverResendAfterSeconds: l.callbackRecoverResendAfter,
    /** The most callbacks one recover sends; it stops there and says so. */
    callbackRecoverMax: l.callbackRecoverMax,
    /** Secret rotations per run (POST /runs/:id/callback/rotate-secret). */
    callbackRotateRate: rate(l.callbackRotate, l.callbackRotateWindow),
    /** Runs one team may create per minute, with a callback or without. */
    runCreateRate: rate(l.runCreate, 60),
    routeErrorRatePerRun: rate(l.routeErrorPerRun, l.routeErrorWindow),
    routeErrorRatePerTeam: rate(l.routeErrorPerTeam, l.routeErrorWindow),
  };
});

/** How the processes run: shutdown, probes and metrics, logs, task slots. */
const processSection = section({
  /** On SIGTERM: how long in-flight work (API requests, the worker's activities) may take to finish. */
  shutdownGraceSeconds: ['SHUTDOWN_GRACE_SECONDS', seconds.default(30)],
  /** The worker's own probe endpoint (/healthz, /readyz); undefined: off. */
  workerHealthPort: ['WORKER_HEALTH_PORT', port.optional()],
  /** The worker's Prometheus endpoint (/metrics, the SDK's metrics included); undefined: off. */
  workerMetricsPort: ['WORKER_METRICS_PORT', port.optional()],
  /** The API's /metrics on a port of its own (on metricsHost); undefined: off. */
  metricsPort: ['METRICS_PORT', port.optional()],
  /**
   * Where both metrics ports listen (METRICS_HOST, loopback by default, whatever HOST is); beyond loopback only
   * with metricsToken, which they then ask for.
   */
  metricsHost: ['METRICS_HOST', z.string().default('127.0.0.1')],
  /** The API port serves /metrics to this bearer; undefined: it answers 404 there. Long enough not to be guessed. */
  metricsToken: [
    'METRICS_TOKEN',
    printableWord(16, 4096, 'must be one word of 16 to 4096 printable ASCII characters').optional(),
  ],
  /** A TLS-terminating proxy sits in front: its X-Forwarded-* headers are believed, and answers carry HSTS. */
  trustProxy: ['TRUST_PROXY', flag],
  logLevel: ['LOG_LEVEL', oneOf(LOG_LEVELS).default('info')],
  /** undefined: pretty when stdout is a terminal, JSON otherwise. */
  logFormat: ['LOG_FORMAT', oneOf(['json', 'pretty']).optional()],
  /** Task slots of one worker process; undefined: the SDK's defaults. */
  workerMaxConcurrentActivities: ['WORKER_MAX_CONCURRENT_ACTIVITIES', slots.optional()],
  workerMaxConcurrentWorkflowTasks: ['WORKER_MAX_CONCURRENT_WORKFLOW_TASKS', slots.optional()],
  /**
   * A folder holding the workflow bundles `npm run build` writes (workflow-bundle.js, workflow-bundle-traced.js);
   * undefined: the worker's own folder, and where it has none the sources are bundled at start.
   */
  workflowBundleDir: ['WORKFLOW_BUNDLE_DIR', z.string().min(1).optional()],
}).superRefine((p, ctx) => {
  // A metrics port has no other authentication: beyond loopback, anyone who reaches it reads it.
  const served = p.metricsPort !== undefined || p.workerMetricsPort !== undefined;
  if (served && !isLoopbackHost(p.metricsHost) && p.metricsToken === undefined)
    ctx.addIssue({
      code: 'custom',
      path: ['METRICS_HOST'],
      message: `must be loopback unless METRICS_TOKEN is set (the metrics ports ask for it then), got "${p.metricsHost}"`,
    });
});

/** A host name or address that only this machine reaches. */
export const isLoopbackHost = (host: string): boolean =>
  host === 'localhost' || host === '::1' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host);

/**
 * Traces are on with an OTLP endpoint (the traces-only one or the general one), unless the SDK is disabled or the
 * traces exporter is `none`, as the OpenTelemetry specification has it. Only OTLP over HTTP is built in.
 */
const otlpProtocol = oneOf(['http/protobuf', 'http/json']);
const tracingSection = section({
  endpoint: ['OTEL_EXPORTER_OTLP_ENDPOINT', httpUrl.optional()],
  tracesEndpoint: ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', httpUrl.optional()],
  protocol: ['OTEL_EXPORTER_OTLP_PROTOCOL', otlpProtocol.optional()],
  tracesProtocol: ['OTEL_EXPORTER_OTLP_TRACES_PROTOCOL', otlpProtocol.optional()],
  exporter: ['OTEL_TRACES_EXPORTER', oneOf(['otlp', 'none']).optional()],
  sdkDisabled: ['OTEL_SDK_DISABLED', z.string().toLowerCase().optional()],
}).transform((t) =>
  (t.endpoint ?? t.tracesEndpoint) === undefined || t.sdkDisabled === 'true' || t.exporter === 'none'
    ? undefined
    : { protocol: t.tracesProtocol ?? t.protocol ?? 'http/protobuf' },
);

/**
 * Traces over OTLP/HTTP. Only whether they are on and the protocol are decided here; the endpoint, headers,
 * timeout, sampler, batch delays and service name are the standard OTEL_* variables, read by the SDK itself.
 */
export type TracingConfig = NonNullable<z.output<typeof tracingSection>>;

const operatorSection = section({
  temporalUiUrl: [
    'TEMPORAL_UI_URL',
    httpUrl.default('http://localhost:8233').transform(withoutTrailingSlash),
  ],
});

export function loadTemporalConnectionConfig(env: Env = process.env): TemporalConnectionConfig {
  return parse(temporalSection, present(env));
}

/** What a runner pod's emitter needs (flow-notify emit): the servers, never the API's secrets. */
const emitterSchema = z.custom<Env>().transform((vars) => ({
  ...parse(mongoSection, vars),
  ...parse(temporalSection, vars),
  ...parse(workflowSection, vars),
  /** undefined: no tracing (no OTLP endpoint is set). */
  tracing: parse(tracingSection, vars),
}));

export type EmitterConfig = z.output<typeof emitterSchema>;

export function loadEmitterConfig(env: Env = process.env): EmitterConfig {
  return emitterSchema.parse(present(env));
}

/**
 * The whole configuration: the sections in the order read, the first refusal ending the read (as a ConfigError).
 * Some sections are read only when they apply (the JWKS, the VAPID keys), and STUDIO_URL defaults to HOST and PORT.
 */
const configSchema = z.custom<Env>().transform((vars) => {
  const { host, port } = parse(serverSection, vars);
  const emitter = emitterSchema.parse(vars);
  const authJwks = vars.AUTH_JWKS_URL === undefined ? undefined : parse(jwksSection, vars);
  const vapidSet = vars.VAPID_PUBLIC_KEY !== undefined || vars.VAPID_PRIVATE_KEY !== undefined;
  return {
    host,
    port,
    ...emitter,
    /** undefined: only HS256 tokens of authJwtSecret are accepted. */
    authJwks,
    ...parse(authSection(authJwks !== undefined), vars),
    /** undefined: web push is off. */
    vapid: vapidSet ? parse(vapidSection, vars) : undefined,
    // An IPv6 address is bracketed in a URL.
    ...parse(deliverySection, {
      STUDIO_URL: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
      ...vars,
    }),
    ...parse(limitsSection, vars),
    ...parse(processSection, vars),
  };
});

export type Config = z.output<typeof configSchema>;

export function loadConfig(env: Env = process.env): Config {
  return configSchema.parse(present(env));
}

/** What an operator's tools (flow-notify explain) need: the emitter's servers and where the Temporal UI is. */
export type OperatorConfig = EmitterConfig & z.output<typeof operatorSection>;

export function loadOperatorConfig(env: Env = process.env): OperatorConfig {
  return { ...loadEmitterConfig(env), ...parse(operatorSection, present(env)) };
}

/** What the launcher (npm start), the test stack and the CLI's search for it need before a full config exists. */
export function launcherEnv(env: Env = process.env) {
  const vars = present(env);
  return {
    mongoUrl: vars.MONGO_URL,
    temporalAddress: vars.TEMPORAL_ADDRESS,
    temporalNamespace: vars.TEMPORAL_NAMESPACE ?? 'default',
    temporalUiUrl: vars.TEMPORAL_UI_URL,
    /** Where npm start records the embedded servers it runs (default .data/stack.json). */
    stackStateFile: vars.FLOW_NOTIFY_STACK_FILE,
    authJwtSecret: vars.AUTH_JWT_SECRET,
    authIssuer: vars.AUTH_ISSUER,
    authAudience: vars.AUTH_AUDIENCE,
    vapidPublicKey: vars.VAPID_PUBLIC_KEY,
    vapidPrivateKey: vars.VAPID_PRIVATE_KEY,
    host: vars.HOST ?? '127.0.0.1',
    port: vars.PORT ?? '8080',
  };
}

/** The environment for a child process: this one's, plus what the launcher filled in. */
export function childEnv(
  extra: Record<string, string>,
  env: Env = process.env,
): Record<string, string | undefined> {
  return { ...env, ...extra };
}

/**
 * Every entry point ends this way on a ConfigError: one line (with `advice`, when there is some) and exit 78
 * (EX_CONFIG), never a half-working start.
 */
export function exitOnConfigError(err: unknown, advice = ''): void {
  if (!(err instanceof ConfigError)) return;
  process.stderr.write(`flow-notify: configuration error: ${err.message}${advice}\n`);
  process.exit(78);
}

export function loadConfigOrExit(env: Env = process.env): Config {
  try {
    return loadConfig(env);
  } catch (err) {
    exitOnConfigError(err);
    throw err;
  }
}
