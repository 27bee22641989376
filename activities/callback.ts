// The callback family's I/O: one signed POST to the run's callback URL per call, behind the outbound guard.
// The workflow owns the retry schedule (durable timers); this reports how one attempt went.
import { callbackBody } from '../domain/callback';
import { signWebhook } from '../net/webhookSignature';
import {
  checkCallbackTarget,
  failureCategory,
  postPinned,
  ResolverUnavailableError,
  TargetRefusedError,
  type DeliveryCategory,
  type HostLookup,
  type PinnedResponse,
} from '../net/ssrfGuard';
import { retryAfterMs } from '../net/retryAfter';
import type { Run } from '../domain/run';
import type { RunStore } from '../store/runs';

export type CallbackAttempt =
  | { result: 'delivered'; status: number }
  | { result: 'retry'; status?: number; retryAfterSeconds?: number; detail: string }
  | { result: 'stop'; status?: number; detail: string };

export interface CallbackDeps {
  runs: RunStore;
  allowPrivate: boolean;
  timeoutMs: number;
  lookup?: HostLookup;
  now: () => Date;
  /** Operator logs: the detail behind a category (addresses, resolver codes) goes here, never to the owner. */
  log?: (line: string) => void;
}

const MAX_RESPONSE_BYTES = 16 * 1024;

const secondsOf = (ms: number | undefined): number | undefined =>
  ms === undefined ? undefined : Math.ceil(ms / 1000);

/** 2xx is success; 408, 429, 5xx, 3xx (redirects are never followed) and network errors are worth another try. */
export function classifyCallbackStatus(status: number): CallbackAttempt['result'] {
  if (status >= 200 && status < 300) return 'delivered';
  if (status === 408 || status === 429 || status >= 500 || (status >= 300 && status < 400)) return 'retry';
  return 'stop';
}

/**
 * One signed POST to a run's callback URL behind the outbound guard (Standard Webhooks: `webhookId` is the
 * receivers' dedup key, the timestamp is this attempt's). A refusal throws TargetRefusedError, a resolver that
 * could not answer ResolverUnavailableError; a network failure or the deadline throws too.
 */
export async function postSignedCallback(
  deps: Omit<CallbackDeps, 'runs'>,
  callback: { url: string; secret: string },
  webhookId: string,
  json: string,
): Promise<PinnedResponse> {
  const target = await checkCallbackTarget(callback.url, {
    allowPrivate: deps.allowPrivate,
    lookup: deps.lookup,
  });
  const timestamp = Math.floor(deps.now().getTime() / 1000);
  return postPinned(target, {
    body: json,
    headers: {
      'content-type': 'application/json',
      'user-agent': 'flow-notify-callbacks/1',
      ...signWebhook(callback.secret, webhookId, timestamp, json),
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
  deps: Omit<CallbackDeps, 'runs'>,
  run: Pick<Run, '_id' | 'status'> & { callback: { url: string; secret: string } },
  webhookId: string,
): Promise<CallbackTestResult> {
  const body = { version: '1', type: 'run.test', run: { id: run._id, status: run.status } };
  try {
    const res = await postSignedCallback(deps, run.callback, webhookId, JSON.stringify(body));
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

export function createCallbackActivities(deps: CallbackDeps) {
  return {
    async sendCallback(episodeId: string, runId: string): Promise<CallbackAttempt> {
      const run = await deps.runs.getById(runId);
      if (!run?.callback) return { result: 'stop', detail: 'the run has no callback' };
      const body = callbackBody(run, episodeId);
      if (!body) return { result: 'stop', detail: `a ${run.status} run gets no callback` };
      // What the owner sees (the claim's gave_up result) is a category; the detail is logged for operators.
      const failed = (category: DeliveryCategory, detail: string): string => {
        deps.log?.(`callback: run ${runId} episode ${episodeId}: ${category}: ${detail}`);
        return category;
      };
      let res;
      try {
        res = await postSignedCallback(deps, run.callback, episodeId, JSON.stringify(body));
      } catch (err) {
        // No verdict from the resolver, or a name that does not exist now: both follow the retry schedule (a
        // receiver's name can come back within it). Every other refusal is final.
        if (err instanceof ResolverUnavailableError) {
          return { result: 'retry', detail: failed(err.category, err.message) };
        }
        if (err instanceof TargetRefusedError) {
          const result = err.category === 'refused: dns' ? 'retry' : 'stop';
          return { result, detail: failed(err.category, err.reason) };
        }
        return { result: 'retry', detail: failed(failureCategory(err), String(err)) };
      }
      const result = classifyCallbackStatus(res.status);
      if (result === 'delivered') return { result, status: res.status };
      const detail = failed(`http ${res.status}`, `receiver answered ${res.status}`);
      if (result === 'stop') return { result, status: res.status, detail };
      return {
        result,
        status: res.status,
        detail,
        retryAfterSeconds: secondsOf(retryAfterMs(res.headers['retry-after'], deps.now().getTime())),
      };
    },
  };
}
