// What the push family's activities are given: the stores, the sender, the clock, and the digest machinery.
import type { DigestEntry } from '../../contract/workflows';
import type { PushConfigFault } from '../../domain/ops';
import type { ConfigFaultRule } from '../../domain/pushServices';
import type { PushSender } from '../../delivery/push/sender';
import type { Metrics } from '../../platform/metrics';
import type { ActionTokenStore } from '../../store/actionTokens';
import type { InteractionStore } from '../../store/interactions';
import type { PushDeliveryStore } from '../../store/push/deliveries';
import type { PushHoldStore } from '../../store/push/holds';
import type { NotificationPrefStore } from '../../store/push/notificationPrefs';
import type { PushReceiptStore } from '../../store/push/receipts';
import type { PushServiceStore } from '../../store/push/services';
import type { PushSubscriptionStore } from '../../store/push/subscriptions';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import type { RunStore } from '../../store/runs';
import type { WatchStore } from '../../store/watches';

export interface PushActivityDeps {
  runs: RunStore;
  watches: WatchStore;
  interactions: InteractionStore;
  /** Where the action tokens of human-input pushes with choices are stored (hashed). */
  actionTokens: ActionTokenStore;
  /** ACTION_TOKEN_TTL_SECONDS: how long a minted action token answers at most. */
  actionTokenTtlSeconds: number;
  notificationPrefs: NotificationPrefStore;
  /** Where each device's receipt token is stored (hashed) and what its service worker reported. */
  pushReceipts: PushReceiptStore;
  pushSubscriptions: PushSubscriptionStore;
  pushDeliveries: PushDeliveryStore;
  pushServices: PushServiceStore;
  /** PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS in PUSH_CONFIG_FAULT_WINDOW_SECONDS (default 3 in an hour). */
  configFaultRule?: ConfigFaultRule;
  /** Undefined when web push is off: nothing is addressable, and the claim is confirmed. */
  sender?: PushSender;
  studioUrl: string;
  fanOutWidth: number;
  /** PUSH_PRUNE_MIN_HOURS (default 24). */
  pruneMinHours?: number;
  now: () => Date;
  log: (line: string) => void;
  /** The fan-out's sends and prunes, and each episode's first push; absent: nothing is recorded. */
  metrics?: Pick<Metrics, 'pushSent' | 'pushPruned' | 'firstPush' | 'digestGaveUp'>;
  /** Raises a push_config_fault operator alert (deduped per origin and hour); absent: the operator family is off. */
  raiseConfigFault?: (fault: PushConfigFault) => Promise<void>;
  /** Holding pushes for digests; absent: every recipient is pushed at once (no quiet hours, no burst bound). */
  digests?: DigestDeps;
}

export interface DigestDeps {
  pushHolds: PushHoldStore;
  /** Where each person's pushes in a window are counted (keyed by person and team). */
  rateLimits: RateLimitStore;
  /** PUSH_BURST_LIMIT pushes in PUSH_BURST_WINDOW_SECONDS; absent: no burst bound (nothing counted). */
  burst?: RateLimit;
  /** Signal-with-start of the person's digest workflow. */
  add: (teamId: string, userId: string, entry: DigestEntry) => Promise<void>;
}
