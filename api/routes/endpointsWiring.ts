// The endpoints router's dependencies, from what the API's entry built: the guard and the test event with the
// callback family's settings.
import { callbackSendSettings } from '../../delivery/callback/send';
import { sendEndpointTest } from '../../delivery/endpoint/send';
import { checkCallbackTarget } from '../../delivery/ssrfGuard';
import { startEndpointRecover } from '../../client/teamEvents';
import { episodeOptions } from '../../client/emitter';
import { newCallbackSecret } from '../../runs/service';
import type { ApiServices } from '../services';
import type { EndpointsRouterDeps } from './endpoints';

export function wireEndpointsRouter({
  config,
  client,
  stores,
  now,
}: Pick<ApiServices, 'config' | 'client' | 'stores' | 'now'>): EndpointsRouterDeps {
  const { callbackAttemptSeconds: attemptSeconds } = episodeOptions(config);
  return {
    endpoints: stores.endpoints,
    attempts: stores.endpointAttempts,
    perTeam: config.endpointsPerTeam,
    checkUrl: (url) => checkCallbackTarget(url, { allowPrivate: config.callbackAllowPrivate }),
    newSecret: newCallbackSecret,
    testEndpoint: (endpoint) =>
      sendEndpointTest({ ...callbackSendSettings(config), studioUrl: config.studioUrl, now }, endpoint),
    testLimit: config.callbackTestRate,
    testPingLimits: { perUser: config.callbackTestRatePerUser, perTeam: config.callbackTestRatePerTeam },
    startRecover: (input) =>
      startEndpointRecover(client, config.temporalTaskQueue, { ...input, attemptSeconds }),
    recoverLimit: config.callbackRecoverRatePerTeam,
    recoverMaxSends: config.callbackRecoverMax,
    rateLimits: stores.rateLimits,
    now,
  };
}
