// Structured logs: one JSON line per event (pino), or a readable line for a person at a terminal. The worker's
// activities, the Temporal SDK (its TS side and, forwarded, its native core) and the API all write through one
// logger, so a line carries runId / episodeId / family / workflowId where they are known.
import { Writable } from 'node:stream';
import type { LogLevel as TemporalLevel, LogMetadata, Logger as TemporalLogger } from '@temporalio/common';
import pino, { type Logger } from 'pino';
import type { LogLevel } from '../config';
import type { Activities } from '../contract/activities';
import { callbackRedeliverWorkflowId, healthWorkflowId, workflowTypes } from '../contract/workflows';

/** The fields a line carries when they are known. */
export interface LogFields {
  runId?: string;
  episodeId?: string;
  family?: 'push' | 'callback' | 'ops' | 'health' | 'sweep';
  workflowId?: string;
  [field: string]: unknown;
}

/** What the code logs through: a message and its fields. Callers that pass only a line keep working. */
export type Log = (line: string, fields?: LogFields) => void;

export interface LoggerOptions {
  level: LogLevel;
  /** undefined: pretty when the destination is a terminal, JSON otherwise. */
  format?: 'json' | 'pretty';
  /** 'api' or 'worker': the `name` field of every line. */
  name: string;
  /** Default: stdout. */
  destination?: NodeJS.WritableStream & { isTTY?: boolean };
}

/**
 * Field names whose values never reach a log line: callback secrets, tokens and Authorization headers, cookies,
 * API keys, passwords, the VAPID private key, subscription keys (p256dh/auth), webhook signatures. Matched by
 * pattern, in any case and spelling (apiKey, x-api-key, client_secret, set-cookie, accessToken, taskToken...).
 */
const SECRET_NAME =
  /secret|token|passw(or)?d|passphrase|^pwd$|api-?key|private-?key|access-?key|authorization|cookie|credential|session-?id|signature|^auth$|^keys$|^p256dh$/;

const isSecretName = (name: string): boolean => SECRET_NAME.test(name.toLowerCase().replace(/_/g, '-'));

/** scheme://[user[:password]@]rest[?query][#fragment], in any text. */
const URL_IN_TEXT = /\b([a-z][a-z\d+.-]*:\/\/)([^\s/?#@'"<>]+@)?([^\s?#'"<>]*)([?#][^\s'"<>]*)?/gi;

/** Text with every URL's credentials and query string (and fragment) cut out: both often carry a token. */
export function scrubUrls(text: string): string {
  if (!text.includes('://')) return text;
  return text.replace(
    URL_IN_TEXT,
    (_all, scheme: string, credentials: string | undefined, rest: string, query: string | undefined) =>
      `${scheme}${credentials ? '[redacted]@' : ''}${rest}${query ? '?[redacted]' : ''}`,
  );
}

/** Nesting walked for secrets; anything deeper is dropped whole, so no depth lets one through. */
const MAX_LOGGED_DEPTH = 8;

/**
 * A copy of a logged value that is safe to write: every field named like a secret censored, and the credentials
 * and query strings of URLs cut out of every string, at any depth of objects, arrays, errors (their own
 * properties and their cause) and class instances (pino's own redaction takes fixed paths and plain objects).
 */
function redactSecrets(value: unknown, depth = 0, ancestors = new WeakSet<object>()): unknown {
  if (typeof value === 'string') return scrubUrls(value);
  if (typeof value !== 'object' || value === null) return value;
  if (depth >= MAX_LOGGED_DEPTH) return '[too deep]';
  if (ancestors.has(value)) return '[circular]';
  ancestors.add(value);
  try {
    return redactObject(value, (item) => redactSecrets(item, depth + 1, ancestors));
  } finally {
    ancestors.delete(value);
  }
}

function redactObject(value: object, walk: (item: unknown) => unknown): unknown {
  const fields = (source: object, into: Record<string, unknown> = {}): Record<string, unknown> => {
    for (const [key, field] of Object.entries(source))
      into[key] = isSecretName(key) ? '[redacted]' : walk(field);
    return into;
  };
  if (Array.isArray(value)) return value.map(walk);
  if (value instanceof Error) {
    const error = fields(value, {
      type: value.constructor?.name || value.name,
      message: scrubUrls(value.message),
      ...(value.stack ? { stack: scrubUrls(value.stack) } : {}),
    });
    // A cause given to the constructor is not enumerable: walk it all the same.
    if (value.cause !== undefined && !Object.hasOwn(error, 'cause')) error.cause = walk(value.cause);
    return error;
  }
  if (value instanceof URL) return scrubUrls(value.href);
  if (value instanceof Date) return value;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return `[${value.byteLength} bytes]`;
  if (value instanceof Map) return walk(Object.fromEntries(value));
  if (value instanceof Set) return walk([...value]);
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') return walk(toJSON.call(value));
  return fields(value);
}

const redactFields = (fields: Record<string, unknown>): Record<string, unknown> =>
  redactSecrets(fields) as Record<string, unknown>;

export function createLogger(options: LoggerOptions): Logger {
  const destination = options.destination ?? process.stdout;
  const format = options.format ?? (destination.isTTY ? 'pretty' : 'json');
  const logger = pino(
    {
      name: options.name,
      level: options.level,
      base: { name: options.name, pid: process.pid },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }), log: redactFields },
      // The fields arrive redacted (errors made plain by redactFields); the message has its URLs scrubbed.
      serializers: { err: (err: unknown) => err, msg: (msg: unknown) => redactSecrets(msg) },
    },
    format === 'pretty' ? prettyStream(destination) : (destination as pino.DestinationStream),
  );
  // A child's bindings skip pino's formatters: they pass the same redaction here (children of children inherit
  // this method through the prototype).
  const pinoChild = logger.child;
  logger.child = function (this: Logger, bindings, childOptions) {
    return pinoChild.call(this, redactFields(bindings), childOptions);
  } as Logger['child'];
  return logger;
}

/** A Log over a logger at one level; warn by default, as the code logs through a Log to report what went wrong. */
export function logAt(logger: Logger, level: 'debug' | 'info' | 'warn' | 'error' = 'warn'): Log {
  return (line, fields) => logger[level](fields ?? {}, line);
}

const FIRST_FIELDS = ['runId', 'episodeId', 'family', 'workflowId'];
const SKIPPED = new Set(['time', 'level', 'msg', 'name', 'pid', 'hostname']);

/** A readable line per JSON line: time, level, name, message, then the fields (known ones first). */
export function prettyLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json;
  }
  const time = typeof entry.time === 'string' ? entry.time.slice(11, 23) : '';
  const level = String(entry.level ?? '')
    .toUpperCase()
    .padEnd(5);
  const keys = Object.keys(entry).filter((key) => !SKIPPED.has(key));
  keys.sort((a, b) => rank(a) - rank(b));
  const fields = keys.map(
    (key) => `${key}=${typeof entry[key] === 'string' ? entry[key] : JSON.stringify(entry[key])}`,
  );
  return [time, level, `[${String(entry.name ?? '')}]`, String(entry.msg ?? ''), ...fields].join(' ');
}

const rank = (key: string): number => {
  const at = FIRST_FIELDS.indexOf(key);
  return at < 0 ? FIRST_FIELDS.length : at;
};

function prettyStream(destination: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      const text = chunk.toString();
      const out = text
        .split('\n')
        .filter(Boolean)
        .map((line) => prettyLine(line) + '\n')
        .join('');
      destination.write(out);
      done();
    },
  });
}

/**
 * The family each registered activity serves; undefined for the claim activities, which every family shares (the
 * workflow tells which). Typed over the activities themselves, so a new one cannot be left out.
 */
export const ACTIVITY_FAMILIES: Record<keyof Activities, LogFields['family']> = {
  recordEpisode: undefined,
  tryMark: undefined,
  tryMarkEach: undefined,
  markDelivered: undefined,
  renewClaim: undefined,
  unmark: undefined,
  wasDelivered: undefined,
  describeClaim: undefined,
  resettleClaim: undefined,
  deliverPush: 'push',
  isStandbyVetoed: 'push',
  digestReleaseAt: 'push',
  sendDigest: 'push',
  giveUpDigest: 'push',
  interactionPlan: 'push',
  closeAnswered: 'push',
  sendRung: 'push',
  sendSnoozed: 'push',
  followUpSentBefore: 'push',
  sendCallback: 'callback',
  recordCallbackGiveUp: 'callback',
  recordTeamEvent: 'callback',
  sendEndpointEvent: 'callback',
  sendEndpointEventToEach: 'callback',
  endpointMissedEvents: 'callback',
  callbackAttemptCount: 'callback',
  gaveUpCallbacks: 'callback',
  saveRecoverProgress: 'callback',
  takeRecoverSend: 'callback',
  returnRecoverSend: 'callback',
  opsAlertSettings: 'ops',
  classifyFailedRun: 'ops',
  callbackExhaustedAlert: 'ops',
  postOperatorAlert: 'ops',
  stampOpsMarker: 'ops',
  healthSettings: 'health',
  persistedRunStatus: 'health',
  runEndedAt: 'health',
  recordedSpend: 'health',
  recordedProgressSince: 'health',
  saveHealth: 'health',
  reapHealth: 'health',
  sweepOnce: 'sweep',
  sweepReapExpired: 'sweep',
};

const HEALTH_ID_PREFIX = healthWorkflowId('');
const REDELIVER_ID_PREFIX = callbackRedeliverWorkflowId('');

/** An episode id begins with its run id (domain/outcome.ts). */
const runOfEpisode = (episodeId: string): string => episodeId.split(':')[0];

/**
 * What a workflow id tells (contract/workflows.ts): an episode workflow's id is its episode id, which begins with the
 * run id; a health workflow's is health:<runId>; a callback redelivery's is cb-redeliver|<episodeId>. The family
 * comes from the workflow when it serves one, else from the activity running.
 */
export function workflowFields(info: {
  workflowId?: string;
  workflowType?: string;
  activityType?: string;
}): LogFields {
  const fields: LogFields = {};
  const { workflowId, workflowType, activityType } = info;
  if (workflowId) {
    fields.workflowId = workflowId;
    switch (workflowType) {
      case workflowTypes.episode:
        fields.episodeId = workflowId;
        fields.runId = runOfEpisode(workflowId);
        break;
      case workflowTypes.health:
        if (workflowId.startsWith(HEALTH_ID_PREFIX)) fields.runId = workflowId.slice(HEALTH_ID_PREFIX.length);
        fields.family = 'health';
        break;
      case workflowTypes.callbackRedeliver:
        if (workflowId.startsWith(REDELIVER_ID_PREFIX)) {
          fields.episodeId = workflowId.slice(REDELIVER_ID_PREFIX.length);
          fields.runId = runOfEpisode(fields.episodeId);
        }
        fields.family = 'callback';
        break;
      case workflowTypes.operatorAlert:
        fields.family = 'ops';
        break;
      case workflowTypes.sweep:
        fields.family = 'sweep';
        break;
      case workflowTypes.digest:
        fields.family = 'push';
        break;
    }
  }
  const family =
    activityType && Object.hasOwn(ACTIVITY_FAMILIES, activityType)
      ? ACTIVITY_FAMILIES[activityType as keyof Activities]
      : undefined;
  if (family) fields.family = family;
  return fields;
}

/** pino's level for each of the SDK's. */
const FROM_TEMPORAL: Record<TemporalLevel, 'trace' | 'debug' | 'info' | 'warn' | 'error'> = {
  TRACE: 'trace',
  DEBUG: 'debug',
  INFO: 'info',
  WARN: 'warn',
  ERROR: 'error',
};

/** The SDK's level for ours: its native core logs at most DEBUG (TRACE would carry payloads and gRPC frames). */
export function temporalLevel(level: LogLevel): TemporalLevel {
  switch (level) {
    case 'trace':
    case 'debug':
      return 'DEBUG';
    case 'info':
      return 'INFO';
    case 'warn':
      return 'WARN';
    default:
      return 'ERROR';
  }
}

/**
 * The Temporal SDK's Logger over ours. Its `runId` is a Temporal workflow run id, not a Flow run id: it becomes
 * `temporalRunId`, so `runId` always means the Flow run.
 */
export function temporalLogger(logger: Logger): TemporalLogger {
  const child = logger.child({ component: 'temporal' });
  const write = (level: TemporalLevel, message: string, meta?: LogMetadata): void => {
    const { runId, ...rest } = meta ?? {};
    const fields = {
      ...rest,
      ...(runId === undefined ? {} : { temporalRunId: runId }),
      ...workflowFields(rest as { workflowId?: string; workflowType?: string; activityType?: string }),
    };
    child[FROM_TEMPORAL[level] ?? 'info'](fields, message);
  };
  return {
    log: write,
    trace: (message, meta) => write('TRACE', message, meta),
    debug: (message, meta) => write('DEBUG', message, meta),
    info: (message, meta) => write('INFO', message, meta),
    warn: (message, meta) => write('WARN', message, meta),
    error: (message, meta) => write('ERROR', message, meta),
  };
}

export type { Logger };
