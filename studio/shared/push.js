// This browser's push subscription and what the server says about it. subscribeThisBrowser is the only place
// the service worker is registered: on the user's click, never at page load. No DOM here: the notifications
// view shows `push` and says what happened.
import { allPages, api, base64UrlToBytes, getToken } from './api.js';

const WORKER_TOKEN_KEY = 'token'; // the copy sw.js reads from IndexedDB (kv.js explains why it needs one)

/** What this browser and this server allow; refreshed by refreshPush(). */
export const push = {
  support: 'ok', // 'ok' | 'insecure' | 'unsupported'
  server: 'unknown', // 'unknown' | 'on' | 'off' | 'error'
  serverError: '',
  key: '', // the server's VAPID public key (base64url)
  subscription: null, // this browser's PushSubscription, when notifications are on
  scope: 'own',
  kinds: null, // { <push kind>: boolean }, from GET /notifications/prefs
  quietHours: null, // { start, end, timeZone, days? } or null
  doNotDisturbUntil: null, // ISO, while ahead
  breakThrough: ['human_input_requested'], // the kinds that arrive during quiet hours and do not disturb
  devices: null, // the caller's devices, from GET /notifications/push/subscriptions
  thisDeviceId: '', // sha256 hex of this browser's endpoint: the server's id for it
  busy: false,
  message: null, // { kind: 'info' | 'success' | 'error', text }
};

export function browserSupport() {
  if (!window.isSecureContext) return 'insecure';
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) {
    return 'unsupported';
  }
  return 'ok';
}

/** The existing registration, if the user enabled notifications before. Never registers anything. */
async function existingRegistration() {
  if (push.support !== 'ok') return undefined;
  return navigator.serviceWorker.getRegistration('/');
}

export async function refreshPush() {
  push.support = browserSupport();
  try {
    const { publicKey } = await api('GET', '/notifications/push/vapid-public-key');
    push.key = publicKey;
    push.server = 'on';
  } catch (err) {
    if (err.status === 404) push.server = 'off';
    else {
      push.server = 'error';
      push.serverError = err.message;
    }
  }
  const registration = await existingRegistration().catch(() => undefined);
  push.subscription = registration
    ? await registration.pushManager.getSubscription().catch(() => null)
    : null;
  if (push.server === 'on') {
    try {
      const prefs = await api('GET', '/notifications/prefs');
      push.scope = prefs.scope;
      push.kinds = prefs.kinds || null;
      push.quietHours = prefs.quietHours || null;
      push.doNotDisturbUntil = prefs.doNotDisturbUntil || null;
      push.breakThrough = prefs.breakThrough || [];
    } catch {
      push.scope = 'own';
    }
    if (push.subscription) await resyncSubscription(push.subscription);
    await loadDevices();
  }
}

/** The server names a device by the sha256 of its endpoint, so this browser can find itself in the list. */
async function deviceIdOf(subscription) {
  if (!subscription || !window.crypto || !crypto.subtle) return '';
  const digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(subscription.endpoint));
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, '0')).join('');
}

export async function loadDevices() {
  try {
    push.thisDeviceId = await deviceIdOf(push.subscription).catch(() => '');
    push.devices = await allPages('/notifications/push/subscriptions', 'subscriptions');
  } catch {
    push.devices = null;
  }
}

/**
 * Keeps the server and the worker in step with this browser: re-POSTs the subscription (an idempotent
 * upsert; it also moves the endpoint to whoever is signed in now) and refreshes the worker's token copy.
 */
async function resyncSubscription(subscription) {
  try {
    await api('POST', '/notifications/push/subscriptions', subscription.toJSON());
    await self.flowKv.set(WORKER_TOKEN_KEY, getToken());
  } catch {
    // Shown as on; "Send a test notification" tells the user if something is wrong.
  }
}

function sameBytes(a, b) {
  if (!a || !b) return false;
  const x = new Uint8Array(a);
  const y = new Uint8Array(b);
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

/**
 * With permission granted: registers /sw.js, subscribes under the server's VAPID key and POSTs the
 * subscription. Resolves to undefined once on, or why the browser refused: { denied: true } (permission) or
 * { unreachable: <the browser's error text> } (its push service).
 */
export async function subscribeThisBrowser() {
  await navigator.serviceWorker.register('/sw.js', { scope: '/' });
  const registration = await navigator.serviceWorker.ready;
  await self.flowKv.set(WORKER_TOKEN_KEY, getToken());

  const applicationServerKey = base64UrlToBytes(push.key);
  let subscription = await registration.pushManager.getSubscription();
  const existingKey = subscription && subscription.options && subscription.options.applicationServerKey;
  if (existingKey && !sameBytes(existingKey, applicationServerKey)) {
    // Made under a key the server no longer uses: it could never be pushed to.
    await subscription.unsubscribe();
    subscription = null;
  }
  if (!subscription) {
    try {
      subscription = await registration.pushManager.subscribe({
        userVisibleOnly: true,
        applicationServerKey,
      });
    } catch (err) {
      if (Notification.permission === 'denied' || (err && err.name === 'NotAllowedError')) {
        return { denied: true };
      }
      return { unreachable: err && err.message ? err.message : String(err) };
    }
  }
  await api('POST', '/notifications/push/subscriptions', subscription.toJSON());
  push.subscription = subscription;
  await loadDevices();
  return undefined;
}

/** Disable: removes the server's row, unsubscribes, and unregisters the worker. Returns an error text. */
export async function disablePush() {
  const registration = await existingRegistration().catch(() => undefined);
  const subscription = registration && (await registration.pushManager.getSubscription());
  let problem = '';
  if (subscription) {
    try {
      await api('DELETE', '/notifications/push/subscriptions', { endpoint: subscription.endpoint });
    } catch (err) {
      if (err.status !== 404) problem = err.message;
    }
    await subscription.unsubscribe().catch(() => undefined);
  }
  await self.flowKv.delete(WORKER_TOKEN_KEY).catch(() => undefined);
  if (registration) await registration.unregister().catch(() => undefined);
  push.subscription = null;
  return problem;
}

export async function disablePushQuietly() {
  if (browserSupport() !== 'ok') return;
  await disablePush().catch(() => undefined);
}
