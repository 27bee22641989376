// The callbacks router's dependencies, from what the API's entry built: the test ping signed and sent from this
// process, redeliveries and recovers started as workflows, each bounded as the config says.
import { randomUUID } from 'node:crypto';
import { startCallbackRecover } from '../../client/recover';
import { episodeOptions } from '../../client/emitter';
import { startCallbackRedelivery } from '../../client/redeliver';
import { callbackSendSettings, sendTestCallback } from '../../delivery/callback/send';
import { claimKeys } from '../../domain/outcome';
import { createEpisodeView } from '../episodesView';
import type { ApiServices } from '../services';
import type { CallbacksRouterDeps } from './callbacks';

export function wireCallbacksRouter({
  config,
  client,
  stores,
  runsService,
  now,
  log,
}: Pick<ApiServices, 'config' | 'client' | 'stores' | 'runsService' | 'now' | 'log'>): CallbacksRouterDeps {
  // A redelivery's attempt gets the time an episode's does: the receiver's timeout and a margin.
  const { callbackAttemptSeconds: attemptSeconds } = episodeOptions(config);
  return {
    runsService,
    episodes: createEpisodeView(stores),
    testCallback: (run) =>
      sendTestCallback({ ...callbackSendSettings(config), now }, run, `${run._id}:test:${randomUUID()}`),
    callbackTestLimits: {
      perRun: config.callbackTestRate,
      perUser: config.callbackTestRatePerUser,
      perTeam: config.callbackTestRatePerTeam,
    },
    callbackRotateLimit: config.callbackRotateRate,
    redeliverCallback: (input) =>
      startCallbackRedelivery(client, config.temporalTaskQueue, { ...input, attemptSeconds }),
    restoreExpiredClaim: (episodeId) =>
      stores.claims.noteOnce(claimKeys.callback(episodeId), 'redeliver', 'expired'),
    settleAbandonedClaim: async (episodeId) => {
      // Marked first, as the sweep's give-ups are: a recover finds give-ups by their newest attempt, and finds this
      // one when the redelivery that follows fails or never starts.
      await stores.callbackAttempts.markNewestGaveUp(episodeId);
      return stores.claims.giveUp(
        claimKeys.callback(episodeId),
        `redeliver-request:${randomUUID()}`,
        'gave_up: its delivery stopped, its holder gone',
      );
    },
    callbackRedeliverLimits: {
      perRun: config.callbackRedeliverRate,
      perUser: config.callbackRedeliverRatePerUser,
      perTeam: config.callbackRedeliverRatePerTeam,
    },
    callbackRecovers: stores.callbackRecovers,
    startRecover: (input) => startCallbackRecover(client, config.temporalTaskQueue, input),
    rateLimits: stores.rateLimits,
    recoverLimit: config.callbackRecoverRatePerTeam,
    recoverBounds: {
      maxSends: config.callbackRecoverMax,
      resendAfterSeconds: config.callbackRecoverResendAfterSeconds,
      attemptSeconds,
    },
    now,
    log,
  };
}
