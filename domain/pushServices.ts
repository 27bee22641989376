// The push services we know: the only hosts whose 401/403 pages the operator (push_config_fault). Any host can
// answer 403, so a refusal from a host that is not on this list says nothing about our VAPID identity.

/**
 * The browsers' push services, as host suffixes: Chrome, Edge (Chromium), Opera and Samsung Internet use FCM;
 * Firefox uses Mozilla's autopush (updates.push.services.mozilla.com); Safari uses web.push.apple.com; legacy
 * Edge and Windows apps use WNS (wns2-*.notify.windows.com). Used when PUSH_ENDPOINT_ALLOWLIST is unset.
 */
export const BROWSER_PUSH_SERVICES: readonly string[] = [
  'fcm.googleapis.com',
  'push.services.mozilla.com',
  'push.apple.com',
  'notify.windows.com',
];

/** The host is one of the suffixes or a subdomain of one (label boundary: notfcm.googleapis.com is not). */
export function hostMatches(hostname: string, suffixes: readonly string[]): boolean {
  const host = hostname.toLowerCase();
  return suffixes.some((suffix) => host === suffix || host.endsWith(`.${suffix}`));
}

/** A push service trusted enough to page the operator: PUSH_ENDPOINT_ALLOWLIST's hosts when set, else the browsers'. */
export function isKnownPushService(hostname: string, allowlist: readonly string[]): boolean {
  return hostMatches(hostname, allowlist.length ? allowlist : BROWSER_PUSH_SERVICES);
}

/** One subscription a known push service refused (401/403) to our VAPID identity, and when. */
export interface KeyRefusal {
  subscriptionId: string;
  userId: string;
  at: Date;
}

/** PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS refused in PUSH_CONFIG_FAULT_WINDOW_SECONDS make a fault (≥ 2 users). */
export interface ConfigFaultRule {
  minSubscriptions: number;
  windowSeconds: number;
}

/** However many subscriptions one user holds, their refusals alone never say our key is wrong. */
export const CONFIG_FAULT_MIN_USERS = 2;

export interface RefusalJudgement {
  /** The refusals still in the window, newest first, kept to what the rule needs (stored for the next fan-out). */
  evidence: KeyRefusal[];
  /** The push service refuses our key as a whole: the operator's problem, not the subscriptions'. */
  fault: boolean;
  /** Distinct subscriptions and users refused in the window, this fan-out's included. */
  subscriptions: number;
  users: number;
}

/**
 * Whether a push service refuses our VAPID identity as a whole, from the refusals of fan-outs in which it accepted
 * nothing: at least `minSubscriptions` distinct subscriptions of at least CONFIG_FAULT_MIN_USERS users within the
 * window. A subscription made under another application server key (a rotation, a staging server) is refused
 * alone, so a few of one user's devices are no evidence about our key. Cost is bounded by the rule, never by how
 * many devices a service refuses: the evidence kept is the newest `minSubscriptions` per user of at most
 * `minSubscriptions` users.
 */
export function judgeRefusals(
  earlier: readonly KeyRefusal[],
  fresh: readonly KeyRefusal[],
  now: Date,
  rule: ConfigFaultRule,
): RefusalJudgement {
  const since = now.getTime() - rule.windowSeconds * 1000;
  const bySubscription = new Map<string, KeyRefusal>();
  for (const refusal of [...earlier, ...fresh]) {
    if (refusal.at.getTime() <= since) continue;
    const known = bySubscription.get(refusal.subscriptionId);
    if (!known || known.at < refusal.at) bySubscription.set(refusal.subscriptionId, refusal);
  }
  const newestFirst = [...bySubscription.values()].sort((a, b) => b.at.getTime() - a.at.getTime());
  const users = new Set(newestFirst.map((r) => r.userId));
  const perUser = new Map<string, number>();
  const evidence = newestFirst.filter((r) => {
    const n = perUser.get(r.userId) ?? 0;
    if (n >= rule.minSubscriptions || (n === 0 && perUser.size >= rule.minSubscriptions)) return false;
    perUser.set(r.userId, n + 1);
    return true;
  });
  return {
    evidence,
    fault: bySubscription.size >= rule.minSubscriptions && users.size >= CONFIG_FAULT_MIN_USERS,
    subscriptions: bySubscription.size,
    users: users.size,
  };
}
