// Every store over one database, for the composition roots (worker.ts, api/server.ts) and tests.
import type { Db } from 'mongodb';
import {
  endpointAttemptIndexes,
  callbackAttemptIndexes,
  createCallbackAttemptStore,
  retiredCallbackAttemptIndexes,
} from './callback/attempts';
import { callbackRecoverIndexes, createCallbackRecoverStore } from './callback/recovers';
import { claimIndexes, createClaimStore } from './claims';
import { createEndpointStore, endpointIndexes } from './endpoint/endpoints';
import { createTeamEventStore, teamEventIndexes } from './endpoint/teamEvents';
import { createEpisodeStore, episodeIndexes, retiredEpisodeIndexes } from './episodes';
import { createEventStore, eventIndexes } from './events';
import { actionTokenIndexes, createActionTokenStore } from './actionTokens';
import { createInteractionStore, interactionIndexes } from './interactions';
import { createEscalationPolicyStore } from './escalationPolicies';
import {
  createNotificationPrefStore,
  migrateNotificationPrefs,
  notificationPrefIndexes,
} from './push/notificationPrefs';
import { createPushDeliveryStore, pushDeliveryIndexes } from './push/deliveries';
import { createPushHoldStore, migrateOwedHolds, pushHoldIndexes, retiredPushHoldIndexes } from './push/holds';
import { createPushReceiptStore, pushReceiptIndexes, retiredPushReceiptIndexes } from './push/receipts';
import { createPushServiceStore } from './push/services';
import {
  createPushSubscriptionStore,
  pushSubscriptionIndexes,
  retiredPushSubscriptionIndexes,
} from './push/subscriptions';
import { createRateLimitStore, rateLimitIndexes } from './rateLimits';
import { createRunHealthStore, runHealthIndexes } from './runHealth';
import { createRunStore, retiredRunIndexes, runIndexes } from './runs';
import { createRunTransitionStore, runTransitionIndexes } from './runTransitions';
import { createTeamRemovalStore } from './teamRemovals';
import { createWatchStore, migrateWatchesOntoRuns, watchIndexes } from './watches';
import { ensureIndexes, type IndexReport } from './mongo';

/** A team endpoint's attempt log: the callbacks' rows, in a collection of its own (their recovers stay apart). */
const ENDPOINT_ATTEMPTS = 'endpoint_attempts';

/** Every collection's indexes, declared by the store module whose queries need them. */
export const ALL_INDEXES = [
  ...runIndexes,
  ...runTransitionIndexes,
  ...eventIndexes,
  ...interactionIndexes,
  ...actionTokenIndexes,
  ...watchIndexes,
  ...claimIndexes,
  ...episodeIndexes,
  ...pushSubscriptionIndexes,
  ...notificationPrefIndexes,
  ...pushDeliveryIndexes,
  ...pushHoldIndexes,
  ...pushReceiptIndexes,
  ...runHealthIndexes,
  ...rateLimitIndexes,
  ...callbackAttemptIndexes,
  ...callbackRecoverIndexes,
  ...endpointIndexes,
  ...teamEventIndexes,
  ...endpointAttemptIndexes(ENDPOINT_ATTEMPTS),
];

/** Indexes a store module replaced: dropped at start-up where they still exist. */
export const RETIRED_INDEXES = [
  ...retiredRunIndexes,
  ...retiredEpisodeIndexes,
  ...retiredPushSubscriptionIndexes,
  ...retiredCallbackAttemptIndexes,
  ...retiredPushReceiptIndexes,
  ...retiredPushHoldIndexes,
];

/** Indexes, then the idempotent data migrations every start-up runs before serving. */
export async function ensureAllIndexes(db: Db): Promise<IndexReport> {
  const report = await ensureIndexes(db, ALL_INDEXES, RETIRED_INDEXES);
  await migrateNotificationPrefs(db);
  await migrateWatchesOntoRuns(db);
  await migrateOwedHolds(db, new Date());
  return report;
}

export interface StoreOptions {
  claimGraceSeconds: number;
  now?: () => Date;
  onClaimTakeover?: (key: string) => void;
}

export function createStores(db: Db, options: StoreOptions) {
  return {
    runs: createRunStore(db),
    runTransitions: createRunTransitionStore(db),
    events: createEventStore(db),
    interactions: createInteractionStore(db),
    escalationPolicies: createEscalationPolicyStore(db),
    teamRemovals: createTeamRemovalStore(db),
    actionTokens: createActionTokenStore(db),
    watches: createWatchStore(db),
    claims: createClaimStore(db, {
      graceSeconds: options.claimGraceSeconds,
      now: options.now,
      onTakeover: options.onClaimTakeover,
    }),
    episodes: createEpisodeStore(db),
    pushSubscriptions: createPushSubscriptionStore(db),
    notificationPrefs: createNotificationPrefStore(db, options.now),
    pushDeliveries: createPushDeliveryStore(db),
    pushHolds: createPushHoldStore(db),
    pushReceipts: createPushReceiptStore(db),
    pushServices: createPushServiceStore(db),
    runHealth: createRunHealthStore(db),
    rateLimits: createRateLimitStore(db),
    callbackAttempts: createCallbackAttemptStore(db),
    callbackRecovers: createCallbackRecoverStore(db),
    endpoints: createEndpointStore(db),
    teamEvents: createTeamEventStore(db),
    endpointAttempts: createCallbackAttemptStore(db, ENDPOINT_ATTEMPTS),
  };
}

export type Stores = ReturnType<typeof createStores>;
