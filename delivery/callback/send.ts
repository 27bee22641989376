// The callback mechanism: one signed POST to a run's callback URL behind the outbound guard. No Temporal in it:
// the episode's activity and the API's test ping both use it.
import type { Config } from '../../config';
import type { CallbackAttempt } from '../../contract/activities';
import { signingSecrets, testCallbackBody, type DeliveryCategory } from '../../domain/callback';
import { signWebhook } from './signature';
import {
  checkCallbackTarget,
  failureCategory,
  postPinned,
  type HostLookup,
  type PinnedResponse,
} from '../ssrfGuard';
import type { Run } from '../../domain/run';
import { inSpan, serverAddress, SpanKind, traceHeaders } from '../../platform/tracing';

export interface CallbackSendDeps {
  allowPrivate: boolean;
  timeoutMs: number;
  /** After a rotation, how long callbacks are signed with the previous secret too (signingSecrets). */
  secretOverlapSeconds: number;
  lookup?: HostLookup;
  now: () => Date;
}

/** The settings of a signed POST, as the config gives them (the worker's attempts and the API's test ping alike). */
export function callbackSendSettings(
  config: Pick<Config, 'callbackAllowPrivate' | 'callbackTimeoutSeconds' | 'callbackSecretOverlapSeconds'>,
): Pick<CallbackSendDeps, 'allowPrivate' | 'timeoutMs' | 'secretOverlapSeconds'> {
  return {
    allowPrivate: config.callbackAllowPrivate,
    timeoutMs: config.callbackTimeoutSeconds * 1000,
    secretOverlapSeconds: config.callbackSecretOverlapSeconds,
  };
}

const MAX_RESPONSE_BYTES = 16 * 1024;

/** 2xx is success; 408, 429, 5xx, 3xx (redirects are never followed) and network errors are worth another try. */
export function classifyCallbackStatus(status: number): CallbackAttempt['result'] {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 408 || status === 429 || status >= 500 || (status >= 300 && status < 400)) return 'retry';
  return 'stop';
}

/**
 * One signed POST to a run's callback URL behind the outbound guard (Standard Webhooks: `webhookId` is the
 * receivers' dedup key, the timestamp is this attempt's). A refusal throws TargetRefusedError, a resolver that
 * could not answer ResolverUnavailableError; a network failure or the deadline throws too. Traced as one client
 * span, whose context the request carries (`traceparent`).
 */
export function postSignedCallback(
  deps: CallbackSendDeps,
  callback: Pick<NonNullable<Run['callback']>, 'url' | 'secret' | 'previousSecret'>,
  webhookId: string,
  json: string,
  signing: Signing = 'signed',
): Promise<PinnedResponse> {
  return inSpan(
    'callback attempt',
    {
      kind: SpanKind.CLIENT,
      attributes: { 'http.request.method': 'POST', ...serverAddress(callback.url), 'webhook.id': webhookId },
      resultAttributes: (res) => ({ 'http.response.status_code': res.status }),
      failed: (res) => classifyCallbackStatus(res.status) !== 'delivered',
    },
    () => postSignedCallbackNow(deps, callback, webhookId, json, signing),
  );
}

/** Slack's incoming webhooks take no signature (the URL is the secret): their bodies go `unsigned`. */
export type Signing = 'signed' | 'unsigned';

async function postSignedCallbackNow(
  deps: CallbackSendDeps,
  callback: Pick<NonNullable<Run['callback']>, 'url' | 'secret' | 'previousSecret'>,
  webhookId: string,
  json: string,
  signing: Signing,
): Promise<PinnedResponse> {
  const target = await checkCallbackTarget(callback.url, {
    allowPrivate: deps.allowPrivate,
    lookup: deps.lookup,
  });
  const now = deps.now();
  const timestamp = Math.floor(now.getTime() / 1000);
  const secrets = signingSecrets(callback, now, deps.secretOverlapSeconds);
  return postPinned(target, {
    body: json,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'flow-notify-callbacks/1',
      ...traceHeaders(),
      ...(signing === 'signed' ? signWebhook(secrets, webhookId, timestamp, json) : {}),
    },
    timeoutMs: deps.timeoutMs,
    maxResponseBytes: MAX_RESPONSE_BYTES,
  });
}

export interface CallbackTestResult {
  /** The receiver answered 2xx. */
  delivered: boolean;
  /** The receiver's status, when it answered. */
  status?: number;
  /** Why not, as a user may see it (never addresses or resolver detail). */
  category?: DeliveryCategory;
}

/**
 * The launcher's test ping: one signed `run.test` event, with its own webhook-id, through the same guard and
 * signature as a real callback, so a receiver's verifier can be checked before a run ends. Never retried.
 */
export async function sendTestCallback(
  deps: CallbackSendDeps,
  run: Pick<Run, '_id' | 'status'> & { callback: NonNullable<Run['callback']> },
  webhookId: string,
): Promise<CallbackTestResult> {
  return sendTestEvent(deps, run.callback, webhookId, JSON.stringify(testCallbackBody(run)));
}

/** One signed test event (a run's callback ping, a team endpoint's test), answered as the caller may see it. */
export async function sendTestEvent(
  deps: CallbackSendDeps,
  target: Pick<NonNullable<Run['callback']>, 'url' | 'secret' | 'previousSecret'>,
  webhookId: string,
  json: string,
  signing: Signing = 'signed',
): Promise<CallbackTestResult> {
  try {
    const res = await postSignedCallback(deps, target, webhookId, json, signing);
    const delivered = res.status >= 200 && res.status < 300;
    return {
      delivered,
      status: res.status,
      ...(delivered ? {} : { category: `http ${res.status}` as const }),
    };
  } catch (err) {
    return { delivered: false, category: failureCategory(err) };
  }
}
