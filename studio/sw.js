// Flow Studio's service worker. The page (shared/push.js) registers it only when the user clicks "Enable
// notifications" (never at page load). It renders the server's Web Push payload as an OS notification, opens
// the run when the notification is clicked, and re-registers a subscription the browser rotates.
//
// Payload (the contract): {"v": 1, "kind", "title", "body", "url", "tag", "runId", "episodeId", "actions"?}; `tag`
// is the episode id, so a repeated delivery of one episode replaces its notification instead of stacking.
// `actions` (a pause with choices): [{"action", "title", "token"}], each token this person's single-use answer; a
// pause without choices offers one action, `snooze` (the same endpoint takes its token: pushed again in an hour).
// Kind `answered` carries the question's tag: it replaces the question on every device once anyone answered.
// `receipt`: this device's token for telling the server the push was shown, clicked, or acted on.
// The payload also carries the Declarative Web Push form (`web_push`, `notification`, `mutable: true`) for browsers
// that show a push without a service worker; where this worker is installed it takes the push and reads our fields.
'use strict';

importScripts('/kv.js');

const API = '/api/v1';
const TOKEN_KEY = 'token'; // flowKv key; shared/push.js keeps it current while push is on

// No caching and nothing to migrate: a new version may take over at once, and claiming the open studio tabs
// lets a notification click navigate them (Client.navigate only works on a client this worker controls).
self.addEventListener('install', () => {
  self.skipWaiting();
});
self.addEventListener('activate', (event) => {
  event.waitUntil(self.clients.claim());
});

// ---- push: show the notification ------------------------------------------------------------------------

self.addEventListener('push', (event) => {
  event.waitUntil(showPush(event.data));
});

/** The payload as JSON, or a generic notification when a push carries something else (it never should). */
function readPayload(data) {
  if (!data) return { title: 'Flow', body: 'Something happened in one of your runs.' };
  try {
    const payload = data.json();
    if (payload && typeof payload === 'object') return payload;
  } catch {
    // not JSON: show the text as is
  }
  return { title: 'Flow', body: data.text() };
}

/** Only an http(s) link is opened; anything else falls back to the run's page, or the studio's home. */
function linkFor(payload) {
  try {
    if (typeof payload.url !== 'string' || !payload.url) throw new Error('no url');
    const url = new URL(payload.url, self.location.origin);
    if (url.protocol === 'https:' || url.protocol === 'http:') return url.href;
  } catch {
    // no usable url
  }
  const home = new URL('/', self.location.origin);
  return payload.runId ? new URL(`/runs/${encodeURIComponent(payload.runId)}`, home).href : home.href;
}

/** The payload's choices the browser can show as buttons (as many as it offers), with their tokens. */
function actionsFor(payload) {
  if (!Array.isArray(payload.actions)) return [];
  const max =
    typeof Notification !== 'undefined' && Notification.maxActions >= 0 ? Notification.maxActions : 0;
  return payload.actions
    .filter((a) => a && typeof a.action === 'string' && typeof a.token === 'string')
    .slice(0, max)
    .map((a) => ({ action: a.action, title: String(a.title || a.action), token: a.token }));
}

function notificationFor(payload) {
  const tag = String(payload.tag || payload.episodeId || '');
  const actions = actionsFor(payload);
  return {
    title: String(payload.title || 'Flow'),
    options: {
      body: String(payload.body || ''),
      // Same tag → the new notification replaces the old one: silently for a repeat or the answer's close, alerting
      // again for the question pushed once more (an escalation rung, a snooze's end).
      tag: tag || undefined,
      renotify: Boolean(tag) && payload.renotify === true,
      // Someone answered: news, not a call to act. It replaces the question where it still shows and must not sound
      // where the person just answered it or had dismissed it.
      silent: payload.kind === 'answered',
      // A run waiting for a person stays on screen until it is acted on.
      requireInteraction: payload.kind === 'human_input_requested',
      icon: '/icon.svg',
      timestamp: Date.now(),
      actions: actions.map(({ action, title }) => ({ action, title })),
      data: {
        // Kept with the notification only: a click on an action posts its token, nothing else sees it.
        tokens: Object.fromEntries(actions.map(({ action, token }) => [action, token])),
        receipt: typeof payload.receipt === 'string' ? payload.receipt : '',
        url: linkFor(payload),
        kind: payload.kind || '',
        runId: payload.runId || '',
        episodeId: payload.episodeId || '',
      },
    },
  };
}

/** How many digests' ids a notification keeps (a repeated delivery of one of them is not counted again). */
const DIGESTS_KEPT = 50;
const DIGEST_BODY_LIMIT = 360;

/**
 * A digest tells only what came since the person's last one, and their digests share a tag: one still on screen is
 * folded into the new notification (the counts added, the newest lines first), never replaced by it. A repeated
 * delivery of a digest already folded in shows what is there.
 */
async function withDigestsOnScreen(payload, notification) {
  const { title, options } = notification;
  const count = Number(payload.count);
  if (payload.kind !== 'digest' || !(count >= 1) || !options.tag) return notification;
  const digests = [String(payload.episodeId || '')];
  const mine = { title, options: { ...options, data: { ...options.data, count, digests } } };
  const [earlier] = await self.registration.getNotifications({ tag: options.tag });
  const seen = earlier && earlier.data && earlier.data.kind === 'digest' ? earlier.data : undefined;
  if (!seen || !(Number(seen.count) >= 1) || !Array.isArray(seen.digests)) return mine;
  // This push's own receipt: it is the one shown now.
  const receipt = options.data.receipt;
  if (seen.digests.includes(digests[0]))
    return { title: earlier.title, options: { ...options, body: earlier.body, data: { ...seen, receipt } } };
  const total = Number(seen.count) + count;
  const body = Array.from(`${options.body} · ${earlier.body}`).slice(0, DIGEST_BODY_LIMIT).join('');
  const data = { ...options.data, count: total, digests: [...seen.digests, ...digests].slice(-DIGESTS_KEPT) };
  return { title: `${total} run updates while you were away`, options: { ...options, body, data } };
}

/** Digests are folded one at a time: two arriving together (a device back online) would read the same one. */
let digestsShown = Promise.resolve();

/** Shows the push (a digest folded with the one on screen; shown alone if that cannot be read); answers its options. */
function show(payload) {
  const step = async () => {
    const plain = notificationFor(payload);
    const { title, options } = await withDigestsOnScreen(payload, plain).catch(() => plain);
    await self.registration.showNotification(title, options);
    return options;
  };
  if (payload.kind !== 'digest') return step();
  const shown = digestsShown.then(step);
  digestsShown = shown.catch(() => undefined);
  return shown;
}

async function showPush(data) {
  const payload = readPayload(data);
  const options = await show(payload);
  await sendReceipt(options.data.receipt, 'shown');
  // Open studio tabs refresh what they show (the run's status changed): told which run, never its tokens (another
  // person may be signed in there).
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });
  const told = { runId: options.data.runId, kind: options.data.kind };
  for (const client of windows) client.postMessage({ type: 'flow:push', payload: told });
}

// ---- notificationclick: focus or open the run ------------------------------------------------------------

self.addEventListener('notificationclick', (event) => {
  event.waitUntil(handleNotificationClick(event.notification, event.action));
});

/**
 * The whole click: close the notification; an action with a token answers the run without opening anything, and
 * a click elsewhere (or an answer the server refused: already answered, expired) brings up its URL; an answer that
 * never reached the server shows the question again. Both click paths below run this.
 */
async function handleNotificationClick(notification, action) {
  notification.close();
  const data = notification.data || {};
  const receipt = action ? sendReceipt(data.receipt, 'action', action) : sendReceipt(data.receipt, 'clicked');
  const token = action && data.tokens ? data.tokens[action] : undefined;
  const answer = token ? await answerWith(token) : 'refused';
  let done = 'answered';
  // No answer reached the server (offline, or it failed every try): the question comes back, its tokens with it,
  // for another try; closed, the person would have no way left to answer from this device.
  if (answer === 'unreached') done = await showAgain(notification);
  else if (answer === 'refused') done = await openStudioAt(data.url || self.location.origin + '/');
  await receipt;
  return done;
}

async function showAgain(notification) {
  // Anything shown under its tag since the click closed it is newer (someone answered, a rung): it stays.
  const newer = await self.registration.getNotifications({ tag: notification.tag });
  if (notification.tag && newer.length > 0) return 'replaced meanwhile';
  await self.registration.showNotification(notification.title, {
    body: notification.body,
    tag: notification.tag,
    renotify: false,
    requireInteraction: notification.requireInteraction,
    icon: notification.icon,
    timestamp: Date.now(),
    actions: notification.actions,
    data: notification.data,
  });
  return 'shown again';
}

/**
 * Tells the server what became of this push (no session: the push's receipt token). Best effort within 5 s: a lost
 * receipt only leaves the run page saying none came, and it must never hold a notification or a click.
 */
async function sendReceipt(token, event, action) {
  if (!token) return;
  try {
    await fetch(`${API}/notifications/receipts`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(action ? { token, event, action } : { token, event }),
      signal: AbortSignal.timeout(5000),
    });
  } catch {
    // offline, or the server is away: the receipt is simply missing
  }
}

/**
 * The waits before an action's POST is sent again, when it failed on the way or with a 5xx, and each try's
 * deadline (an answer takes tens of milliseconds): all of it within the 10 s a click lets the worker open a window,
 * which a refused answer then does.
 */
const ACTION_RETRY_WAITS_MS = [500, 1500];
const ACTION_TRY_MS = 2500;

/**
 * Posts an action's token (no session needed): 'answered' when the run took the answer, 'refused' when the server
 * said no (409, 410, 429: the run page opens instead), 'unreached' when every try failed on the way (offline, a
 * timeout) or with a 5xx. Each of those is sent again first: the server releases the token when the answer failed
 * on its side, and the same token finishes an answer it had stored, so nobody is left believing a run was answered
 * while it still waits.
 */
async function answerWith(token) {
  for (let tried = 0; ; tried++) {
    try {
      const res = await fetch(`${API}/interactions/actions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ token }),
        signal: AbortSignal.timeout(ACTION_TRY_MS),
      });
      if (res.ok) return 'answered';
      if (res.status < 500) return 'refused';
    } catch {
      // offline, or no answer in time: tried again below
    }
    if (tried >= ACTION_RETRY_WAITS_MS.length) return 'unreached';
    await new Promise((resolve) => setTimeout(resolve, ACTION_RETRY_WAITS_MS[tried]));
  }
}

/**
 * Focuses a studio tab already at `url`; else navigates an open studio tab there and focuses it; else opens a
 * window. Returns which of the three it did.
 */
async function openStudioAt(url) {
  const target = new URL(url, self.location.origin);
  const windows = await self.clients.matchAll({ type: 'window', includeUncontrolled: true });

  const already = windows.find((client) => client.url === target.href);
  if (already) {
    await focusQuietly(already);
    return 'focused';
  }

  const studio = target.origin === self.location.origin ? pickStudioTab(windows) : undefined;
  if (studio) {
    const navigated = await navigateTab(studio, target.href);
    if (navigated) {
      await focusQuietly(navigated);
      return 'navigated';
    }
  }

  await self.clients.openWindow(target.href);
  return 'opened';
}

/** The focused studio tab if there is one, else the most recently focused (matchAll lists it first). */
function pickStudioTab(windows) {
  const mine = windows.filter((client) => new URL(client.url).origin === self.location.origin);
  return mine.find((client) => client.focused) || mine[0];
}

async function navigateTab(client, href) {
  try {
    // Works on a tab this worker controls (clients.claim() above makes every open studio tab one).
    const navigated = await client.navigate(href);
    if (navigated) return navigated;
  } catch {
    // An uncontrolled tab (e.g. opened with a hard reload): ask the page to navigate itself (app.js listens).
    client.postMessage({ type: 'flow:navigate', url: href });
    return client;
  }
  return undefined;
}

/** focus() is allowed only while a click is being handled; anywhere else it is refused, and that is fine. */
async function focusQuietly(client) {
  try {
    return await client.focus();
  } catch {
    return client;
  }
}

// Headless browsers (the studio's browser tests) have no notification UI to click, so a studio page may ask
// the worker to click one of the notifications this worker showed, by tag (and one of its actions, by id). It
// runs handleNotificationClick, the same code the real event runs, and it can do nothing a click could not: close
// a notification this worker showed, post the token of the action named, and open the URL the server put in it.
// (Without a real click the browser refuses focus(), which handleNotificationClick tolerates.)
self.addEventListener('message', (event) => {
  const message = event.data;
  if (!message || message.type !== 'flow:notification-click') return;
  if (!event.source || event.source.type !== 'window') return;
  const source = event.source;
  event.waitUntil(
    self.registration
      .getNotifications({ tag: String(message.tag) })
      .then((found) =>
        found.length > 0
          ? handleNotificationClick(found[0], message.action && String(message.action))
          : 'none',
      )
      // What became of the click, for the page that asked.
      .then((done) =>
        source.postMessage({ type: 'flow:notification-clicked', tag: String(message.tag), done }),
      ),
  );
});

// ---- pushsubscriptionchange: re-subscribe and tell the server ---------------------------------------------

self.addEventListener('pushsubscriptionchange', (event) => {
  event.waitUntil(resubscribe(event.oldSubscription, event.newSubscription));
});

/**
 * The browser rotated (or dropped) the subscription, usually with no studio tab open. The worker has no
 * localStorage, so the page keeps a copy of the token in IndexedDB (kv.js) while notifications are on; with
 * it the worker subscribes again under the same server key, POSTs the new subscription and deletes the old
 * endpoint. Without a token (signed out, or disabled) it does nothing: the next enable starts afresh.
 */
async function resubscribe(oldSubscription, newSubscription) {
  const token = await self.flowKv.get(TOKEN_KEY).catch(() => undefined);
  if (!token) return;
  const call = (method, path, body) =>
    fetch(API + path, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  let subscription = newSubscription;
  if (!subscription) {
    let key = oldSubscription && oldSubscription.options && oldSubscription.options.applicationServerKey;
    if (!key) {
      const res = await call('GET', '/notifications/push/vapid-public-key');
      if (!res.ok) return; // web push is off on the server now
      key = base64UrlToBytes((await res.json()).publicKey);
    }
    subscription = await self.registration.pushManager.subscribe({
      userVisibleOnly: true,
      applicationServerKey: key,
    });
  }
  await call('POST', '/notifications/push/subscriptions', subscription.toJSON());
  if (oldSubscription && oldSubscription.endpoint !== subscription.endpoint) {
    await call('DELETE', '/notifications/push/subscriptions', { endpoint: oldSubscription.endpoint });
  }
}

function base64UrlToBytes(text) {
  const base64 = (text + '='.repeat((4 - (text.length % 4)) % 4)).replace(/-/g, '+').replace(/_/g, '/');
  const raw = atob(base64);
  return Uint8Array.from(raw, (c) => c.charCodeAt(0));
}
