// The Web Push sink: encrypts (aes128gcm) and POSTs one payload to one subscription, VAPID-signed.
//
// What makes it fast and safe compared with a plain web-push sendNotification loop:
//   - the VAPID JWT is signed once per push-service origin and reused until near expiry (signing and key
//     parsing per message is most of web-push's cost);
//   - connections to a push service are kept alive and reused, one pool per (origin, pinned address);
//   - every endpoint goes through the same outbound guard as callbacks (checkCallbackTarget): resolved once,
//     classified, and the validated address pinned into the agent; a refused endpoint is a dead sink.
import http from 'node:http';
import { retryAfterMs } from '../../platform/retryAfter';
import https from 'node:https';
import net from 'node:net';
import webpush from 'web-push';
import type { Config, VapidConfig } from '../../config';
import type { PushPayload, SendOutcome } from '../../domain/push';
import { fitWirePayload } from '../../domain/declarativePush';
import { hostMatches, isKnownPushService } from '../../domain/pushServices';
import {
  checkCallbackTarget,
  pinnedLookup,
  postPinned,
  ResolverUnavailableError,
  TargetRefusedError,
  type CheckedTarget,
  systemLookup,
  type HostLookup,
  type ResolvedAddress,
} from '../ssrfGuard';

export interface PushTarget {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

export interface PushOptions {
  ttlSeconds: number;
  urgency: 'very-low' | 'low' | 'normal' | 'high';
  topic?: string;
}

export interface PushSenderOptions {
  vapid: VapidConfig;
  allowPrivate: boolean;
  /** Host suffixes an endpoint must match; empty = any host the guard accepts. */
  allowlist: string[];
  lookup?: HostLookup;
  /** Extra CA certificates (a test push service's). */
  ca?: string;
  /** One exchange, connect to last byte of the answer. Default 5 s. */
  timeoutMs?: number;
  maxAttempts?: number;
  /** A Retry-After longer than this is not waited for inside one delivery: the endpoint counts as failed. */
  maxRetryAfterMs?: number;
  /** Keep-alive pools kept, one per (origin, pinned address); the least recently used goes first. Default 64. */
  maxAgents?: number;
  /** A keep-alive socket idle this long is closed. Default 5 s. */
  idleSocketMs?: number;
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

/** What a send reports as it goes, so a caller can tell a slow send from a wedged one. */
export interface SendHooks {
  /** Called after each attempt settles and every few seconds of a wait between attempts. */
  onProgress?: () => void;
  /**
   * Lookups shared by the sends of one fan-out, by host: each host is resolved once per fan-out instead of once
   * per endpoint (a failure too, so a resolver that is down is not asked again by every lane). Every endpoint is
   * still classified and pinned from that answer.
   */
  resolved?: Map<string, Promise<ResolvedAddress[]>>;
}

/** One resolution per host for as long as `resolved` lives. */
function sharedLookup(base: HostLookup, resolved: Map<string, Promise<ResolvedAddress[]>>): HostLookup {
  return (hostname) => {
    let answer = resolved.get(hostname);
    if (!answer) {
      answer = base(hostname);
      answer.catch(() => undefined); // observed by every caller; this copy only keeps it from being "unhandled"
      resolved.set(hostname, answer);
    }
    return answer;
  };
}

export const DEFAULT_PUSH_TIMEOUT_MS = 5_000;
/** A push service's answer carries nothing we use beyond the status line and headers. */
export const MAX_PUSH_RESPONSE_BYTES = 4 * 1024;
/** Waits inside one send are cut into slices this long, each reported as progress. */
const PROGRESS_SLICE_MS = 2_000;

const VAPID_LIFETIME_S = 12 * 3600;
const VAPID_REFRESH_BEFORE_S = 3600;

export function hostAllowed(hostname: string, allowlist: string[]): boolean {
  return !allowlist.length || hostMatches(hostname, allowlist);
}

/** The URL names its host by address: no DNS answer is involved, and none will ever change it. */
const isAddressLiteral = (url: URL): boolean => net.isIP(url.hostname.replace(/^\[|\]$/g, '')) !== 0;

export type PushSender = ReturnType<typeof createPushSender>;

/** Push-service origins whose VAPID authorization is kept: any public https host may be one, so they are bounded. */
const VAPID_AUDIENCES_KEPT = 512;

/**
 * VAPID authorizations, one per push-service origin, signed once and reused until near expiry; at most
 * `maxAudiences` kept, the least recently signed forgotten first.
 */
export function createVapidSigner(
  vapid: VapidConfig,
  now: () => number,
  maxAudiences = VAPID_AUDIENCES_KEPT,
) {
  // Insertion order is signing order: a new signature goes to the end, the first entry is the oldest.
  const byAudience = new Map<string, { authorization: string; expiresAtMs: number }>();
  return {
    authorization(audience: string): string {
      const cached = byAudience.get(audience);
      if (cached && cached.expiresAtMs - VAPID_REFRESH_BEFORE_S * 1000 > now()) return cached.authorization;
      const expiresAt = Math.floor(now() / 1000) + VAPID_LIFETIME_S;
      const headers = webpush.getVapidHeaders(
        audience,
        vapid.subject,
        vapid.publicKey,
        vapid.privateKey,
        'aes128gcm',
        expiresAt,
      );
      byAudience.delete(audience);
      byAudience.set(audience, { authorization: headers.Authorization, expiresAtMs: expiresAt * 1000 });
      if (byAudience.size > maxAudiences) byAudience.delete(byAudience.keys().next().value as string);
      return headers.Authorization;
    },
    kept: (): number => byAudience.size,
  };
}

/** Keep-alive pools, one per (origin, pinned address), at most `maxAgents`, the least recently used evicted. */
function createAgentPools(options: { maxAgents: number; idleSocketMs: number; ca?: string }) {
  // Insertion order is recency order: a hit is moved to the end, the first entry is the least recently used.
  const agents = new Map<string, http.Agent>();
  return {
    agentFor(target: CheckedTarget): http.Agent {
      const key = `${target.url.origin}|${target.address}`;
      let agent = agents.get(key);
      if (agent) {
        agents.delete(key);
      } else {
        // The agent's timeout is the socket's idle timeout; Node closes a pooled socket when it fires while free.
        const agentOptions = {
          keepAlive: true,
          maxSockets: 64,
          timeout: options.idleSocketMs,
          lookup: pinnedLookup(target),
          ca: options.ca,
        };
        agent =
          target.url.protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
      }
      agents.set(key, agent);
      if (agents.size > options.maxAgents) {
        const [oldestKey, oldest] = agents.entries().next().value as [string, http.Agent];
        agents.delete(oldestKey);
        closeIdle(oldest);
      }
      return agent;
    },
    close(): void {
      for (const agent of agents.values()) agent.destroy();
      agents.clear();
    },
  };
}

/**
 * An evicted pool: its free sockets are closed now; sockets still carrying a send finish it and then idle out
 * (a send in flight is not cut short by another origin's arrival).
 */
function closeIdle(agent: http.Agent): void {
  for (const sockets of Object.values(agent.freeSockets))
    for (const socket of sockets ?? []) socket.destroy();
}

/**
 * The endpoint through the outbound guard: https (unless private targets are allowed), an allowed host, resolved,
 * classified and pinned. A refusal or a failed lookup is the send's outcome, with no attempt made.
 */
async function checkEndpoint(
  endpoint: string,
  options: PushSenderOptions,
  hooks: SendHooks,
): Promise<CheckedTarget | SendOutcome> {
  let url: URL | undefined;
  try {
    url = new URL(endpoint);
    if (url.protocol !== 'https:' && !options.allowPrivate) {
      throw new TargetRefusedError('push endpoint must be https');
    }
    if (!hostAllowed(url.hostname, options.allowlist)) {
      throw new TargetRefusedError(`${url.hostname} is not an allowed push service`);
    }
    const lookup = options.lookup ?? systemLookup;
    const checked = await checkCallbackTarget(endpoint, {
      allowPrivate: options.allowPrivate,
      lookup: hooks.resolved ? sharedLookup(lookup, hooks.resolved) : lookup,
    });
    hooks.onProgress?.();
    return checked;
  } catch (err) {
    if (err instanceof ResolverUnavailableError)
      return { result: 'failed', detail: err.message, attempts: 0 };
    if (!(err instanceof TargetRefusedError)) return { result: 'failed', detail: String(err), attempts: 0 };
    // A DNS answer may be wrong for a while (sinkhole, split horizon): counted, not a verdict on the endpoint.
    const byDns =
      err.category === 'refused: dns' ||
      (err.category === 'refused: private address' && url !== undefined && !isAddressLiteral(url));
    return { result: byDns ? 'unresolved' : 'refused', detail: err.reason, attempts: 0 };
  }
}

/**
 * What a push service's answer settles: an outcome, or `undefined` when the attempt failed in a way worth
 * retrying (5xx, or a 429 whose Retry-After fits in `maxRetryAfterMs`; `retryAfterMs` then says how long to wait).
 */
function settleAnswer(
  status: number,
  retryAfterHeader: string | string[] | undefined,
  context: {
    target: CheckedTarget;
    allowlist: string[];
    attempt: number;
    maxRetryAfterMs: number;
    now: () => number;
  },
): { outcome: SendOutcome; final: boolean; retryAfterMs?: number } {
  const { target, attempt } = context;
  if (status >= 200 && status < 300)
    return { outcome: { result: 'delivered', status, attempts: attempt }, final: true };
  if (status === 404 || status === 410)
    return { outcome: { result: 'gone', status, attempts: attempt }, final: true };
  if (status === 400 || status === 413)
    return { outcome: { result: 'rejected', status, attempts: attempt }, final: true };
  if (status === 401 || status === 403) {
    // Only a push service we know can say our identity is refused: a user's own host answering 403 cannot.
    const known = isKnownPushService(target.url.hostname, context.allowlist);
    const outcome: SendOutcome = known
      ? { result: 'key_refused', status, attempts: attempt }
      : { result: 'denied', status, detail: `${target.url.host} answered ${status}`, attempts: attempt };
    return { outcome, final: true };
  }
  const failed: SendOutcome = {
    result: 'failed',
    status,
    detail: `push service answered ${status}`,
    attempts: attempt,
  };
  if (status === 429) {
    const after = retryAfterMs(retryAfterHeader, context.now());
    // Longer than a send waits: the fan-out's next attempt waits for it instead.
    if (after !== undefined && after > context.maxRetryAfterMs)
      return { outcome: { ...failed, retryAfterMs: after }, final: true };
    return { outcome: failed, final: false, retryAfterMs: after };
  }
  // A 5xx is worth another try; another 4xx is not: retrying the same message will not help.
  return { outcome: failed, final: status < 500 };
}

export function createPushSender(options: PushSenderOptions) {
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const timeoutMs = options.timeoutMs ?? DEFAULT_PUSH_TIMEOUT_MS;
  const maxAttempts = options.maxAttempts ?? 3;
  const maxRetryAfterMs = options.maxRetryAfterMs ?? 30_000;
  const vapidSigner = createVapidSigner(options.vapid, now);
  const vapidAuthorization = (audience: string): string => vapidSigner.authorization(audience);
  const pools = createAgentPools({
    maxAgents: options.maxAgents ?? 64,
    idleSocketMs: options.idleSocketMs ?? 5_000,
    ca: options.ca,
  });

  // One whole deadline (connect to last byte) and a small cap on the answer: a service that trickles or
  // streams cannot hold a lane, and an idle-socket timeout alone never fires on one byte every few seconds.
  function post(target: CheckedTarget, headers: http.OutgoingHttpHeaders, body: Buffer) {
    return postPinned(target, {
      headers,
      body,
      timeoutMs,
      maxResponseBytes: MAX_PUSH_RESPONSE_BYTES,
      pool: pools.agentFor(target),
    });
  }

  /** A wait between attempts, reported as progress in slices (it is bounded by maxRetryAfterMs). */
  async function wait(ms: number, hooks: SendHooks): Promise<void> {
    for (let left = ms; left > 0; left -= PROGRESS_SLICE_MS) {
      await sleep(Math.min(left, PROGRESS_SLICE_MS));
      hooks.onProgress?.();
    }
  }

  return {
    async send(
      target: PushTarget,
      payload: PushPayload,
      pushOptions: PushOptions,
      hooks: SendHooks = {},
    ): Promise<SendOutcome> {
      const checked = await checkEndpoint(target.endpoint, options, hooks);
      if ('result' in checked) return checked;

      const details = webpush.generateRequestDetails(
        { endpoint: target.endpoint, keys: target.keys },
        JSON.stringify(fitWirePayload(payload)),
        {
          TTL: pushOptions.ttlSeconds,
          urgency: pushOptions.urgency,
          ...(pushOptions.topic ? { topic: pushOptions.topic } : {}),
          contentEncoding: 'aes128gcm',
          headers: { Authorization: vapidAuthorization(checked.url.origin) },
        },
      );
      const body = details.body as Buffer;

      let last: SendOutcome = { result: 'failed', attempts: 0 };
      for (let attempt = 1; attempt <= maxAttempts; attempt++) {
        let waitMs = 250 * 2 ** (attempt - 1);
        try {
          const res = await post(checked, details.headers as http.OutgoingHttpHeaders, body);
          const settled = settleAnswer(res.status, res.headers['retry-after'], {
            target: checked,
            allowlist: options.allowlist,
            attempt,
            maxRetryAfterMs,
            now,
          });
          if (settled.final) return settled.outcome;
          last = settled.outcome;
          waitMs = settled.retryAfterMs ?? waitMs;
        } catch (err) {
          last = {
            result: 'failed',
            detail: err instanceof Error ? err.message : String(err),
            attempts: attempt,
          };
        }
        hooks.onProgress?.();
        if (attempt < maxAttempts) await wait(waitMs, hooks);
      }
      return last;
    },

    close(): void {
      pools.close();
    },
  };
}

/** The sink a config asks for: undefined when web push is off (no VAPID keys). */
export function pushSenderFor(
  config: Config,
  extra: Pick<PushSenderOptions, 'ca' | 'lookup' | 'timeoutMs'> = {},
): PushSender | undefined {
  if (!config.vapid) return undefined;
  return createPushSender({
    vapid: config.vapid,
    allowPrivate: config.pushAllowPrivate,
    allowlist: config.pushEndpointAllowlist,
    ...extra,
  });
}
