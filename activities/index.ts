// createActivities(deps): every activity the worker registers, built from passed-in dependencies.
import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import type { PushSender } from '../net/pushSender';
import type { HostLookup } from '../net/ssrfGuard';
import type { Stores } from '../store';
import type { Metrics } from '../observability/metrics';
import type { Log } from '../observability/log';
import { inSpan, serverAddress, SpanKind } from '../observability/tracing';
import { episodeOptions } from '../client/emitter';
import { claimFamily } from '../domain/outcome';
import { raisePushConfigFault } from '../client/operator';
import { createCallbackActivities } from './callback';
import { createClaimActivities } from './claims';
import { createEpisodeActivities } from './episodes';
import { createHealthActivities } from './health';
import { createOpsActivities } from './ops';
import { createPushActivities } from './push';
import { createSweepActivities } from './sweep';

export interface ActivityDeps {
  config: Config;
  stores: Stores;
  /** For the sweep, which starts episode workflows. */
  client: Client;
  /** The Web Push sink; undefined when web push is off. */
  pushSender?: PushSender;
  /** The callbacks' resolver; injected by tests (a resolver that fails on purpose). Default: the system's. */
  callbackLookup?: HostLookup;
  now?: () => Date;
  /** Where the activities report what went wrong (the worker's logger, with what the running activity tells). */
  log: Log;
  /** Undefined: no metrics are recorded (the worker without WORKER_METRICS_PORT). */
  metrics?: Metrics;
}

export const PUSH_FAN_OUT_WIDTH = 16;
/** What a crash mid fan-out repeats at most: the sends in flight and as many awaiting their record. */
export const PUSH_REPEATS_PER_CRASH = 2 * PUSH_FAN_OUT_WIDTH;
export const SWEEP_LOOKBACK_SECONDS = 24 * 3600;
export const SWEEP_PAGE_SIZE = 1000;
export const OPS_WEBHOOK_TIMEOUT_MS = 10_000;

export function createActivities(deps: ActivityDeps) {
  const now = deps.now ?? (() => new Date());
  const { stores, config, metrics, log } = deps;
  const pushSender = deps.pushSender && config.tracing ? tracedSender(deps.pushSender) : deps.pushSender;
  const activities = {
    ...createEpisodeActivities({ episodes: stores.episodes, now }),
    ...createClaimActivities({ claims: stores.claims }),
    ...createPushActivities({
      ...stores,
      pushSubscriptions: metrics
        ? countedPrunes(stores.pushSubscriptions, metrics)
        : stores.pushSubscriptions,
      sender: metrics && pushSender ? countedSender(pushSender, metrics) : pushSender,
      metrics,
      raiseConfigFault:
        config.opsAlertWebhookUrl === undefined
          ? undefined
          : (fault) =>
              raisePushConfigFault(
                { client: deps.client, taskQueue: config.temporalTaskQueue, claims: stores.claims, now },
                fault,
              ),
      studioUrl: config.studioUrl,
      fanOutWidth: PUSH_FAN_OUT_WIDTH,
      pruneMinHours: config.pushPruneMinHours,
      now,
      log,
    }),
    ...createCallbackActivities({
      runs: stores.runs,
      callbackAttempts: stores.callbackAttempts,
      allowPrivate: config.callbackAllowPrivate,
      timeoutMs: config.callbackTimeoutSeconds * 1000,
      lookup: deps.callbackLookup,
      now,
      log,
      metrics,
    }),
    ...createOpsActivities({
      runs: stores.runs,
      claims: stores.claims,
      webhookUrl: config.opsAlertWebhookUrl,
      timeoutMs: OPS_WEBHOOK_TIMEOUT_MS,
      retryHours: config.opsAlertRetryHours,
      claimGraceSeconds: config.claimGraceSeconds,
      now,
    }),
    ...createHealthActivities({
      runs: stores.runs,
      runHealth: stores.runHealth,
      stallAfterSeconds: config.stallAfterSeconds,
      healthReapSeconds: config.healthReapSeconds,
      opsAlerts: config.opsAlertWebhookUrl !== undefined,
      now,
    }),
    ...createSweepActivities({
      runs: stores.runs,
      claims: stores.claims,
      pushDeliveries: stores.pushDeliveries,
      callbackAttempts: stores.callbackAttempts,
      rateLimits: stores.rateLimits,
      client: deps.client,
      taskQueue: config.temporalTaskQueue,
      episodeOptions: episodeOptions(config),
      families: { ops: config.opsAlertWebhookUrl !== undefined },
      lookbackSeconds: SWEEP_LOOKBACK_SECONDS,
      pageSize: SWEEP_PAGE_SIZE,
      now,
      metrics,
    }),
  };
  return metrics ? instrumented(activities, metrics) : activities;
}

/** Every send's result, counted as the sender classified it; prunes follow from the results that prune. */
function countedSender(sender: PushSender, metrics: Metrics): PushSender {
  return {
    ...sender,
    send: async (...args) => {
      const outcome = await sender.send(...args);
      metrics.pushSent(outcome.result);
      return outcome;
    },
  } as PushSender;
}

/** Every send in a client span of its own (tracing on), under the fan-out activity's span. */
function tracedSender(sender: PushSender): PushSender {
  return {
    ...sender,
    send: (...args) =>
      inSpan(
        'push send',
        {
          kind: SpanKind.CLIENT,
          attributes: serverAddress(args[0].endpoint),
          resultAttributes: (outcome) => ({
            'push.result': outcome.result,
            'push.attempts': outcome.attempts,
            ...(outcome.status !== undefined ? { 'http.response.status_code': outcome.status } : {}),
          }),
          failed: (outcome) => outcome.result !== 'delivered',
        },
        () => sender.send(...args),
      ),
  } as PushSender;
}

function countedPrunes(store: Stores['pushSubscriptions'], metrics: Metrics): Stores['pushSubscriptions'] {
  return {
    ...store,
    prune: async (id) => {
      await store.prune(id);
      metrics.pushPruned();
    },
  };
}

/**
 * The metrics known from an activity's own result, recorded around it so the activity modules stay as they are:
 * callbacks given up, operator alerts, sweep passes. (Callback attempts are recorded by sendCallback itself: only
 * an attempt sent counts, timed from its lookup to its last byte.)
 */
function instrumented<
  T extends ReturnType<typeof createClaimActivities> &
    ReturnType<typeof createOpsActivities> &
    ReturnType<typeof createSweepActivities>,
>(activities: T, metrics: Metrics): T {
  const { markDelivered, postOperatorAlert, sweepOnce } = activities;
  return {
    ...activities,
    async markDelivered(key: string, holder: string, result?: string) {
      const settled = await markDelivered(key, holder, result);
      if (settled && claimFamily(key) === 'callback' && result?.startsWith('gave_up'))
        metrics.callbackGaveUp();
      return settled;
    },
    async postOperatorAlert(...args: Parameters<typeof postOperatorAlert>) {
      try {
        const sent = await postOperatorAlert(...args);
        metrics.operatorAlert(args[0].kind, sent);
        return sent;
      } catch (err) {
        metrics.operatorAlert(args[0].kind, 'failed');
        throw err;
      }
    },
    async sweepOnce() {
      const started = performance.now();
      const pass = await sweepOnce();
      metrics.sweepPass((performance.now() - started) / 1000, pass);
      return pass;
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
