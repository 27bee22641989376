// createActivities(deps): every activity the worker registers, built from passed-in dependencies, as the contract
// declares them (contract/activities.ts: what the workflows call).
import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import type { Activities } from '../contract/activities';
import type { OriginPacing } from '../delivery/callback/pacing';
import { callbackSendSettings } from '../delivery/callback/send';
import { configFaultRuleOf } from '../delivery/push/fanOut';
import type { PushSender } from '../delivery/push/sender';
import type { HostLookup } from '../delivery/ssrfGuard';
import type { Stores } from '../store';
import type { Metrics } from '../platform/metrics';
import type { Log } from '../platform/log';
import { episodeOptions } from '../client/emitter';
import { addToDigest } from '../client/digest';
import { healthBatchMs } from '../client/health';
import { callbackExhaustedRaiser, endpointDisabledRaiser, raisePushConfigFault } from '../client/operator';
import { raiseTeamEvent } from '../client/teamEvents';
import { createCallbackActivities } from './callback';
import { createClaimActivities } from './claims';
import { createEndpointActivities } from './endpoint';
import { createEpisodeActivities } from './episodes';
import { createHealthActivities } from './health';
import { createOpsActivities } from './ops';
import { createInteractionActivities } from './interaction';
import { announceToTeamEndpoints } from './interaction/teamAnnounce';
import { createPushActivities, type PushActivityDeps } from './push';
import { createRecoverActivities } from './callback/recover';
import { createSweepActivities, type SweepDeps } from './sweep';
import { sweepLookbackSeconds } from '../domain/sweep';

export interface ActivityDeps {
  config: Config;
  stores: Stores;
  /** For the sweep, which starts episode workflows. */
  client: Client;
  /** The Web Push sink; undefined when web push is off. */
  pushSender?: PushSender;
  /** The callbacks' resolver; injected by tests (a resolver that fails on purpose). Default: the system's. */
  callbackLookup?: HostLookup;
  /** The worker's one pacing of callback attempts per receiver origin; undefined: unpaced. */
  callbackPacing?: OriginPacing;
  now?: () => Date;
  /** Where the activities report what went wrong (the worker's logger, with what the running activity tells). */
  log: Log;
  /**
   * The sweep's way to finish, through the runs service, what a request that died began: a run left paused on a
   * question whose answer is stored, a revision won whose status write never landed.
   */
  repairs?: Pick<SweepDeps, 'finishStoredAnswer' | 'finishStuckTransition'>;
  /**
   * Handed to each area's activities, which record what they know the outcome of. Undefined: no metrics are
   * recorded (the worker without WORKER_METRICS_PORT).
   */
  metrics?: Metrics;
}

export const PUSH_FAN_OUT_WIDTH = 16;
/** What a crash mid fan-out repeats at most: the sends in flight and as many awaiting their record. */
export const PUSH_REPEATS_PER_CRASH = 2 * PUSH_FAN_OUT_WIDTH;
export const SWEEP_PAGE_SIZE = 1000;
export const OPS_WEBHOOK_TIMEOUT_MS = 10_000;

/** How far back this config's sweep lists runs: the longest episode it can start, and then some. */
export const sweepLookback = (config: Config): number =>
  sweepLookbackSeconds(
    { ...episodeOptions(config), opsAlertRetryHours: config.opsAlertRetryHours },
    config.sweepIntervalSeconds,
  );

/** A team endpoint's delivery follows the callbacks' schedule, as this config sets it for new episodes. */
function endpointSchedule(config: Config) {
  const { callbackRetrySeconds, callbackRetryJitter, callbackAttemptSeconds } = episodeOptions(config);
  return {
    retrySeconds: callbackRetrySeconds,
    retryJitter: callbackRetryJitter!,
    attemptSeconds: callbackAttemptSeconds!,
  };
}

/** What the push activities and an interaction's pushes share: the stores, the sender, the digests. */
function pushDepsOf(deps: ActivityDeps, now: () => Date): PushActivityDeps {
  const { stores, config, metrics, log } = deps;
  return {
    ...stores,
    sender: deps.pushSender,
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
    actionTokenTtlSeconds: config.actionTokenTtlSeconds,
    fanOutWidth: PUSH_FAN_OUT_WIDTH,
    pruneMinHours: config.pushPruneMinHours,
    configFaultRule: configFaultRuleOf(config),
    digests: {
      pushHolds: stores.pushHolds,
      rateLimits: stores.rateLimits,
      burst: config.pushBurstRate,
      add: (teamId, userId, entry) =>
        addToDigest(deps.client, config.temporalTaskQueue, teamId, userId, entry),
    },
    now,
    log,
  };
}

export function createActivities(deps: ActivityDeps): Activities {
  const now = deps.now ?? (() => new Date());
  const { stores, config, metrics, log } = deps;
  const push = pushDepsOf(deps, now);
  const endpointDisabled =
    config.opsAlertWebhookUrl === undefined
      ? undefined
      : endpointDisabledRaiser(deps.client, config.temporalTaskQueue);
  return {
    ...createEpisodeActivities({ episodes: stores.episodes, now }),
    ...createClaimActivities({ claims: stores.claims }),
    ...createPushActivities(push),
    ...createInteractionActivities({
      push,
      claims: stores.claims,
      escalationPolicies: stores.escalationPolicies,
      webhook: {
        ...callbackSendSettings(config),
        lookup: deps.callbackLookup,
        now,
        log,
        pacing: deps.callbackPacing,
      },
      webhookRetrySeconds: config.callbackRetrySeconds,
      announce: announceToTeamEndpoints({
        endpoints: stores.endpoints,
        runs: stores.runs,
        raise: (event) => raiseTeamEvent(deps.client, config.temporalTaskQueue, event),
      }),
    }),
    ...createCallbackActivities({
      runs: stores.runs,
      callbackAttempts: stores.callbackAttempts,
      claims: stores.claims,
      ...callbackSendSettings(config),
      lookup: deps.callbackLookup,
      now,
      log,
      metrics,
      pacing: deps.callbackPacing,
    }),
    ...createEndpointActivities({
      runs: stores.runs,
      endpoints: stores.endpoints,
      teamEvents: stores.teamEvents,
      endpointAttempts: stores.endpointAttempts,
      rateLimits: stores.rateLimits,
      interactions: stores.interactions,
      claims: stores.claims,
      studioUrl: config.studioUrl,
      ...callbackSendSettings(config),
      lookup: deps.callbackLookup,
      pacing: deps.callbackPacing,
      schedule: endpointSchedule(config),
      disableAfterSeconds: config.endpointDisableAfterSeconds,
      endpointDisabled,
      now,
      log,
    }),
    ...createOpsActivities({
      runs: stores.runs,
      claims: stores.claims,
      webhookUrl: config.opsAlertWebhookUrl,
      timeoutMs: OPS_WEBHOOK_TIMEOUT_MS,
      retryHours: config.opsAlertRetryHours,
      claimGraceSeconds: config.claimGraceSeconds,
      now,
      metrics,
      log,
    }),
    ...createHealthActivities({
      runs: stores.runs,
      runHealth: stores.runHealth,
      events: stores.events,
      stallAfterSeconds: config.stallAfterSeconds,
      healthReapSeconds: config.healthReapSeconds,
      opsAlerts: config.opsAlertWebhookUrl !== undefined,
      // The API's window (set the same on both), and a second for its signal's trip.
      batchGraceMs: healthBatchMs(config) + 1000,
      now,
    }),
    ...createRecoverActivities({
      callbackAttempts: stores.callbackAttempts,
      callbackRecovers: stores.callbackRecovers,
      claims: stores.claims,
      rateLimits: stores.rateLimits,
      teamRedeliveries: config.callbackRedeliverRatePerTeam,
      now,
    }),
    ...createSweepActivities({
      runs: stores.runs,
      claims: stores.claims,
      pushDeliveries: stores.pushDeliveries,
      callbackAttempts: stores.callbackAttempts,
      rateLimits: stores.rateLimits,
      pushHolds: stores.pushHolds,
      actionTokens: stores.actionTokens,
      pushReceipts: stores.pushReceipts,
      interactions: stores.interactions,
      runTransitions: stores.runTransitions,
      ...deps.repairs,
      endpointAttempts: stores.endpointAttempts,
      teamEvents: stores.teamEvents,
      endpoints: stores.endpoints,
      endpointDisabled,
      ...(config.opsAlertWebhookUrl === undefined
        ? {}
        : { callbackExhausted: callbackExhaustedRaiser(deps.client, config.temporalTaskQueue, now) }),
      offerToDigest: (teamId, userId, entry) =>
        addToDigest(deps.client, config.temporalTaskQueue, teamId, userId, entry),
      client: deps.client,
      taskQueue: config.temporalTaskQueue,
      episodeOptions: episodeOptions(config),
      families: { ops: config.opsAlertWebhookUrl !== undefined },
      lookbackSeconds: sweepLookback(config),
      pageSize: SWEEP_PAGE_SIZE,
      now,
      metrics,
    }),
  };
}
