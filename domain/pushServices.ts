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
