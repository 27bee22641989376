// The notification router's dependencies, from what the API's entry built; undefined when web push is off (no VAPID
// keys), so the routes do not exist.
import { digestPrefsChanged } from '../../client/digest';
import { configFaultRuleOf, fanOut } from '../../delivery/push/fanOut';
import type { PushSender } from '../../delivery/push/sender';
import type { ApiServices } from '../services';
import type { NotificationRouteDeps, PushFanOut } from './notifications';

export function wireNotificationsRouter(
  services: Pick<ApiServices, 'config' | 'client' | 'stores' | 'pushSender' | 'log' | 'now'>,
): NotificationRouteDeps | undefined {
  const { config, client, stores, pushSender, log, now } = services;
  if (!config.vapid) return undefined;
  return {
    vapidPublicKey: config.vapid.publicKey,
    subscriptions: stores.pushSubscriptions,
    prefs: stores.notificationPrefs,
    deliveries: stores.pushDeliveries,
    fanOut: pushSender ? testPushFanOut(services, pushSender) : undefined,
    endpointRules: { allowInsecure: config.pushAllowPrivate, allowlist: config.pushEndpointAllowlist },
    rateLimits: stores.rateLimits,
    maxSubscriptionsPerUser: config.pushMaxSubscriptionsPerUser,
    testPushRate: config.pushTestRate,
    studioUrl: config.studioUrl,
    prefsChanged: (teamId, userId) => digestPrefsChanged(client, teamId, userId),
    holdsOwedNow: (teamId, userId, at) => stores.pushHolds.owedNow(teamId, userId, at),
    now,
    log,
  };
}

/**
 * The worker's fan-out over the API's sender: a test push prunes and counts toward pruning as an episode's does.
 * No operator family here: a config fault it weighs is logged, and the worker's next one pages.
 */
function testPushFanOut(
  { config, stores, log, now }: Pick<ApiServices, 'config' | 'stores' | 'log' | 'now'>,
  sender: PushSender,
): PushFanOut {
  return (subs, payload, { width, signal, onDelivered }) =>
    fanOut(
      {
        subscriptions: stores.pushSubscriptions,
        sender,
        width,
        log,
        signal,
        now,
        pruneMinHours: config.pushPruneMinHours,
        pushServices: stores.pushServices,
        configFaultRule: configFaultRuleOf(config),
      },
      subs,
      payload,
      onDelivered,
    );
}
