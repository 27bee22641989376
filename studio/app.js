// Flow Studio: a signed-in user's runs, a run's page (the deep link notifications open), and the controls that
// turn this browser's push notifications on and off. Plain browser JavaScript: no framework, no build step.
//
// Routes (the API serves index.html for every non-API path, so this script routes on location.pathname):
//   /              the runs and the notification settings
//   /runs/<id>     one run and its outcome episodes
'use strict';

(function () {
  const API = '/api/v1';
  const TOKEN_KEY = 'flow.studio.token';
  const WORKER_TOKEN_KEY = 'token'; // the copy sw.js reads from IndexedDB (kv.js explains why it needs one)
  const main = document.getElementById('main');
  const account = document.getElementById('account');

  // ---- small helpers -------------------------------------------------------------------------------------

  /** h('p', {class: 'x'}, 'text', child): an element; text is always set as text, never parsed as HTML. */
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [name, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith('on')) el.addEventListener(name.slice(2), value);
      else if (name === 'class') el.className = value;
      else if (value === true) el.setAttribute(name, '');
      else el.setAttribute(name, String(value));
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null || child === false) continue;
      el.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return el;
  }

  const STATUS_LABELS = {
    running: 'Running',
    paused: 'Paused',
    finished: 'Finished',
    failed: 'Failed',
    cancelled: 'Cancelled',
  };
  const statusBadge = (status) =>
    h('span', { class: `badge badge-${status}` }, STATUS_LABELS[status] || status || 'Unknown');

  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
  const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });

  /** A <time> reading "3 minutes ago", with the exact time on hover. */
  function timeAgo(iso) {
    if (!iso) return h('span', { class: 'muted' }, '—');
    const date = new Date(iso);
    const seconds = Math.round((date.getTime() - Date.now()) / 1000);
    const units = [
      ['year', 31536000],
      ['month', 2592000],
      ['day', 86400],
      ['hour', 3600],
      ['minute', 60],
    ];
    let text = Math.abs(seconds) < 45 ? 'just now' : '';
    for (const [unit, size] of units) {
      if (text) break;
      if (Math.abs(seconds) >= size) text = relative.format(Math.round(seconds / size), unit);
    }
    text = text || relative.format(Math.round(seconds / 60), 'minute');
    return h('time', { datetime: date.toISOString(), title: absolute.format(date) }, text);
  }

  function base64UrlToBytes(text) {
    const base64 = (text + '='.repeat((4 - (text.length % 4)) % 4)).replace(/-/g, '+').replace(/_/g, '/');
    return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  }

  function sameBytes(a, b) {
    if (!a || !b) return false;
    const x = new Uint8Array(a);
    const y = new Uint8Array(b);
    return x.length === y.length && x.every((v, i) => v === y[i]);
  }

  // ---- the signed-in user --------------------------------------------------------------------------------

  const getToken = () => localStorage.getItem(TOKEN_KEY) || '';

  /** The token's claims (sub, team, exp), read for display only: the server is what checks the signature. */
  function claimsOf(token) {
    try {
      const part = token.split('.')[1];
      const json = new TextDecoder().decode(base64UrlToBytes(part));
      const claims = JSON.parse(json);
      return claims && typeof claims === 'object' ? claims : {};
    } catch {
      return {};
    }
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  /** A JSON call as the signed-in user. A 401 signs the user out and shows why. */
  async function api(method, path, body, token = getToken()) {
    let res;
    try {
      res = await fetch(API + path, {
        method,
        headers: {
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch {
      throw new ApiError(0, 'The Flow server could not be reached. Check your connection and try again.');
    }
    const text = await res.text();
    let data;
    try {
      data = text ? JSON.parse(text) : undefined;
    } catch {
      data = undefined;
    }
    if (!res.ok) {
      const message = (data && data.error) || `The server answered ${res.status}.`;
      if (res.status === 401 && token && token === getToken()) {
        sessionEnded(`Your session ended (${message}). Paste a new token to continue.`);
      }
      throw new ApiError(res.status, message);
    }
    return data;
  }

  function renderAccount() {
    account.replaceChildren();
    const token = getToken();
    if (!token) return;
    const claims = claimsOf(token);
    account.append(
      h(
        'span',
        { class: 'who' },
        h('span', { class: 'avatar', 'aria-hidden': 'true' }, (claims.sub || '?').slice(0, 1).toUpperCase()),
        h(
          'span',
          { class: 'who-text' },
          h('strong', {}, claims.sub || 'Signed in'),
          claims.team ? h('span', { class: 'muted' }, ` · ${claims.team}`) : null,
        ),
      ),
      h('button', { type: 'button', class: 'button button-quiet', onclick: () => signOut() }, 'Sign out'),
    );
  }

  /** The user signs out: this browser stops receiving their notifications, then forgets the token. */
  async function signOut() {
    await disablePushQuietly();
    localStorage.removeItem(TOKEN_KEY);
    renderAccount();
    renderSignIn();
  }

  /**
   * The server refused the token (expired or revoked). Notifications are left alone: the user did not ask to
   * stop them, and signing in again re-POSTs the subscription under the new token (resyncSubscription).
   */
  function sessionEnded(reason) {
    localStorage.removeItem(TOKEN_KEY);
    pushPanel = null;
    renderAccount();
    renderSignIn(reason);
  }

  function renderSignIn(reason) {
    document.title = 'Sign in · Flow Studio';
    const field = h('textarea', {
      id: 'token',
      name: 'token',
      rows: 4,
      required: true,
      spellcheck: 'false',
      autocomplete: 'off',
      'aria-describedby': 'token-help',
      placeholder: 'eyJhbGciOiJIUzI1NiIs…',
    });
    const error = h('p', { class: 'message message-error', role: 'alert', hidden: !reason }, reason || '');
    const submit = h('button', { type: 'submit', class: 'button button-primary' }, 'Sign in');
    const form = h(
      'form',
      { class: 'card signin', novalidate: true },
      h('h1', {}, 'Sign in to Flow Studio'),
      h(
        'p',
        { class: 'muted', id: 'token-help' },
        'Paste the access token you were given. It is kept in this browser until you sign out. ',
        'On a local server, ',
        h('code', {}, 'npm run token -- --user <you> --team <team>'),
        ' prints one.',
      ),
      h('label', { for: 'token' }, 'Access token'),
      field,
      error,
      h('div', { class: 'actions' }, submit),
    );
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      const token = field.value.trim();
      error.hidden = true;
      if (!token) {
        error.textContent = 'Paste a token first.';
        error.hidden = false;
        field.focus();
        return;
      }
      submit.disabled = true;
      submit.textContent = 'Checking…';
      try {
        await api('GET', '/runs', undefined, token); // proves the token before keeping it
        localStorage.setItem(TOKEN_KEY, token);
        renderAccount();
        route();
      } catch (err) {
        error.textContent =
          err.status === 401 ? `That token was refused: ${err.message}.` : err.message || String(err);
        error.hidden = false;
        submit.disabled = false;
        submit.textContent = 'Sign in';
      }
    });
    main.replaceChildren(form);
    field.focus();
  }

  // ---- push notifications ---------------------------------------------------------------------------------

  /** What this browser and this server allow; refreshed by refreshPush(). */
  const push = {
    support: 'ok', // 'ok' | 'insecure' | 'unsupported'
    server: 'unknown', // 'unknown' | 'on' | 'off' | 'error'
    serverError: '',
    key: '', // the server's VAPID public key (base64url)
    subscription: null, // this browser's PushSubscription, when notifications are on
    scope: 'own',
    kinds: null, // { <push kind>: boolean }, from GET /notifications/prefs
    devices: null, // the caller's devices, from GET /notifications/push/subscriptions
    thisDeviceId: '', // sha256 hex of this browser's endpoint: the server's id for it
    busy: false,
    message: null, // { kind: 'info' | 'success' | 'error', text }
  };

  function browserSupport() {
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

  async function refreshPush() {
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

  /** Every page of a listing (the device list is short: a user holds a bounded number of devices). */
  async function allPages(path, key) {
    const rows = [];
    let before;
    for (let page = 0; page < 50; page++) {
      const query = before ? `?before=${encodeURIComponent(before)}` : '';
      const answer = await api('GET', `${path}${query}`);
      rows.push(...answer[key]);
      before = answer.nextBefore;
      if (!before) break;
    }
    return rows;
  }

  /** A button that loads the listing's next (older) page and hands its rows to `append`; gone after the last. */
  function olderButton(label, path, key, nextBefore, append) {
    if (!nextBefore) return null;
    let before = nextBefore;
    const button = h(
      'button',
      {
        type: 'button',
        class: 'button button-quiet older',
        onclick: async () => {
          button.disabled = true;
          try {
            const answer = await api('GET', `${path}?before=${encodeURIComponent(before)}`);
            before = answer.nextBefore;
            append(answer[key], !!before);
          } catch (err) {
            if (err.status === 401) return;
          }
          if (before) button.disabled = false;
          else button.remove();
        },
      },
      label,
    );
    return button;
  }

  async function loadDevices() {
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

  function say(kind, text) {
    push.message = { kind, text };
    renderPushPanel();
  }

  const DENIED_TEXT =
    'Notifications are blocked for this site. Allow them in your browser’s site settings (the icon next ' +
    'to the address), then choose “Enable notifications” again.';

  /**
   * enablePush: the only place the service worker is registered — on the user's click, never at page load.
   * Asks for permission, registers /sw.js, subscribes under the server's VAPID key and POSTs the subscription.
   */
  async function enablePush() {
    if (push.busy) return;
    push.support = browserSupport();
    if (push.support !== 'ok') return renderPushPanel();
    push.busy = true;
    say('info', 'Turning notifications on…');
    try {
      if (!push.key) await refreshPush();
      if (push.server !== 'on') {
        push.message = null; // the panel now says why (web push off on the server, or unreachable)
        return;
      }

      const permission =
        Notification.permission === 'granted' ? 'granted' : await Notification.requestPermission();
      if (permission === 'denied') return say('error', DENIED_TEXT);
      if (permission !== 'granted') {
        return say('info', 'Notifications were not turned on. Choose “Enable notifications” to try again.');
      }

      // swRegistration
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
            return say('error', DENIED_TEXT);
          }
          return say(
            'error',
            `This browser could not reach its push service (${err && err.message ? err.message : err}). ` +
              'Notifications cannot be turned on in this browser.',
          );
        }
      }
      await api('POST', '/notifications/push/subscriptions', subscription.toJSON());
      push.subscription = subscription;
      await loadDevices();
      say('success', 'Notifications are on. Flow will tell you when a run needs you or ends.');
    } catch (err) {
      say('error', `Notifications could not be turned on: ${err.message || err}`);
    } finally {
      push.busy = false;
      renderPushPanel();
    }
  }

  /** Disable: removes the server's row, unsubscribes, and unregisters the worker. Returns an error text. */
  async function disablePush() {
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

  async function disablePushQuietly() {
    if (browserSupport() !== 'ok') return;
    await disablePush().catch(() => undefined);
  }

  async function onDisable() {
    if (push.busy) return;
    push.busy = true;
    say('info', 'Turning notifications off…');
    try {
      const problem = await disablePush();
      await loadDevices();
      if (problem) say('error', `Notifications are off in this browser, but the server said: ${problem}`);
      else say('success', 'Notifications are off for this browser.');
    } catch (err) {
      say('error', `Notifications could not be turned off: ${err.message || err}`);
    } finally {
      push.busy = false;
      renderPushPanel();
    }
  }

  async function sendTest() {
    if (push.busy) return;
    push.busy = true;
    say('info', 'Sending a test notification…');
    try {
      const { sent } = await api('POST', '/notifications/push/test', {});
      if (sent > 0) {
        say('success', `Test notification sent to ${sent} ${sent === 1 ? 'device' : 'devices'}.`);
      } else {
        say(
          'error',
          'No device accepted the test notification. Disable notifications and enable them again.',
        );
      }
    } catch (err) {
      say('error', `The test notification was not sent: ${err.message}`);
    } finally {
      push.busy = false;
      renderPushPanel();
    }
  }

  async function setScope(scope) {
    const previous = push.scope;
    push.scope = scope;
    try {
      await api('PUT', '/notifications/prefs', { scope });
      say(
        'success',
        scope === 'team'
          ? 'You will be notified about every run in your team.'
          : 'You will be notified about your own runs.',
      );
    } catch (err) {
      push.scope = previous;
      say('error', `Your choice was not saved: ${err.message}`);
    }
  }

  const KIND_LABELS = [
    ['human_input_requested', 'Needs my input', 'a run needs your input'],
    ['usage_parked', 'Parked at a usage limit', 'a run is parked at a usage limit'],
    ['run_finished', 'Finished', 'a run finishes'],
    ['run_failed', 'Failed', 'a run fails'],
    ['run_cancelled', 'Cancelled', 'a run is cancelled'],
  ];

  async function setKind(kind, on, phrase) {
    const previous = push.kinds;
    push.kinds = { ...push.kinds, [kind]: on };
    try {
      const saved = await api('PUT', '/notifications/prefs', { scope: push.scope, kinds: { [kind]: on } });
      push.kinds = saved.kinds || push.kinds;
      say('success', on ? `Saved: a push when ${phrase}.` : `Saved: no push when ${phrase}.`);
    } catch (err) {
      push.kinds = previous;
      say('error', `Your choice was not saved: ${err.message}`);
    }
  }

  /** Remove: this browser's own device is turned off entirely (else the next visit would re-add it). */
  async function removeDevice(device) {
    if (push.busy) return;
    if (device.id === push.thisDeviceId) return onDisable();
    push.busy = true;
    try {
      await api('DELETE', `/notifications/push/subscriptions/${encodeURIComponent(device.id)}`);
      await loadDevices();
      say('success', `${device.label} will get no more notifications.`);
    } catch (err) {
      say('error', `${device.label} was not removed: ${err.message}`);
    } finally {
      push.busy = false;
      renderPushPanel();
    }
  }

  function devicesSection() {
    const devices = push.devices || [];
    const items = devices.map((device) => {
      const mine = device.id === push.thisDeviceId;
      return h(
        'li',
        { class: 'device', 'data-device-id': device.id },
        h(
          'span',
          { class: 'device-name' },
          h('strong', {}, device.label),
          mine ? h('span', { class: 'badge badge-this' }, 'This browser') : '',
          h('span', { class: 'muted' }, device.host),
          h(
            'span',
            { class: 'muted' },
            'Added ',
            timeAgo(device.createdAt),
            ' · last notified ',
            device.lastSuccessAt ? timeAgo(device.lastSuccessAt) : 'never',
          ),
        ),
        h(
          'button',
          {
            type: 'button',
            class: 'button button-quiet',
            'aria-label': `Remove ${device.label}`,
            onclick: () => removeDevice(device),
            disabled: push.busy,
          },
          'Remove',
        ),
      );
    });
    return h(
      'section',
      { class: 'devices', 'aria-labelledby': 'devices-title' },
      h('h3', { id: 'devices-title' }, 'Your devices'),
      items.length
        ? h('ul', { id: 'devices' }, ...items)
        : h('p', { class: 'muted' }, 'No browser of yours gets notifications yet.'),
    );
  }

  let pushPanel = null; // the notifications card on the home page, while it is shown

  function renderPushPanel() {
    if (!pushPanel || !pushPanel.isConnected) return;
    const on = Boolean(push.subscription);
    const blocked = push.support === 'ok' && Notification.permission === 'denied';
    const body = [];

    let state;
    if (push.support === 'insecure') {
      state = h(
        'p',
        { class: 'message message-warning' },
        'Notifications need a secure page: open the studio over https (or on localhost).',
      );
    } else if (push.support === 'unsupported') {
      state = h(
        'p',
        { class: 'message message-warning' },
        'This browser cannot receive push notifications (it has no service worker or Push API support). ',
        'A current Chrome, Edge, Firefox or Safari can.',
      );
    } else if (push.server === 'off') {
      state = h(
        'p',
        { class: 'message message-warning' },
        'Web push is turned off on this Flow server. An operator turns it on by setting ',
        h('code', {}, 'VAPID_PUBLIC_KEY'),
        ' and ',
        h('code', {}, 'VAPID_PRIVATE_KEY'),
        '.',
      );
    } else if (push.server === 'error') {
      state = h(
        'p',
        { class: 'message message-error' },
        `The notification settings could not be loaded: ${push.serverError}`,
      );
    } else if (push.server === 'unknown') {
      state = h('p', { class: 'muted' }, 'Checking…');
    } else {
      state = h(
        'p',
        { class: 'state' },
        h('span', { class: `dot ${on ? 'dot-on' : 'dot-off'}`, 'aria-hidden': 'true' }),
        on
          ? 'On for this browser. Flow tells you when a run needs your input or ends.'
          : blocked
            ? 'Blocked for this site in this browser.'
            : 'Off for this browser. Turn them on to hear when a run needs your input or ends.',
      );
    }
    body.push(state);

    const usable = push.support === 'ok' && push.server === 'on';
    if (usable && !on) {
      if (blocked && !push.message) body.push(h('p', { class: 'message message-error' }, DENIED_TEXT));
      body.push(
        h(
          'div',
          { class: 'actions' },
          h(
            'button',
            {
              type: 'button',
              class: 'button button-primary',
              id: 'enable-push',
              onclick: enablePush,
              disabled: push.busy,
            },
            'Enable notifications',
          ),
        ),
      );
    }
    if (usable && on) {
      body.push(
        h(
          'div',
          { class: 'actions' },
          h(
            'button',
            { type: 'button', class: 'button', id: 'test-push', onclick: sendTest, disabled: push.busy },
            'Send a test notification',
          ),
          h(
            'button',
            {
              type: 'button',
              class: 'button button-quiet',
              id: 'disable-push',
              onclick: onDisable,
              disabled: push.busy,
            },
            'Disable',
          ),
        ),
      );
    }
    if (push.server === 'on') {
      const option = (value, label, hint) =>
        h(
          'label',
          { class: 'choice' },
          h('input', {
            type: 'radio',
            name: 'scope',
            value,
            checked: push.scope === value,
            onchange: () => setScope(value),
          }),
          h('span', {}, h('strong', {}, label), h('span', { class: 'muted' }, hint)),
        );
      body.push(
        h(
          'fieldset',
          { class: 'scope' },
          h('legend', {}, 'Notify me about'),
          option('own', 'My runs', 'Runs you launched.'),
          option('team', 'All of my team’s runs', 'Every run your team launches.'),
        ),
      );
      if (push.kinds) {
        body.push(
          h(
            'fieldset',
            { class: 'scope kinds' },
            h('legend', {}, 'Push me when'),
            ...KIND_LABELS.map(([kind, label, phrase]) =>
              h(
                'label',
                { class: 'choice' },
                h('input', {
                  type: 'checkbox',
                  role: 'switch',
                  name: `kind-${kind}`,
                  checked: push.kinds[kind] !== false,
                  onchange: (event) => setKind(kind, event.target.checked, phrase),
                }),
                h('span', {}, label),
              ),
            ),
          ),
        );
      }
      if (push.devices) body.push(devicesSection());
    }
    const message = push.message;
    body.push(
      h(
        'p',
        {
          class: message ? `message message-${message.kind}` : 'message',
          role: message && message.kind === 'error' ? 'alert' : 'status',
          id: 'push-message',
          hidden: !message,
        },
        message ? message.text : '',
      ),
    );
    pushPanel.replaceChildren(h('h2', { id: 'notifications-title' }, 'Notifications'), ...body);
  }

  // ---- pages ----------------------------------------------------------------------------------------------

  function errorCard(title, text) {
    return h(
      'section',
      { class: 'card' },
      h('h2', {}, title),
      h('p', { class: 'message message-error', role: 'alert' }, text),
    );
  }

  async function renderHome() {
    document.title = 'Runs · Flow Studio';
    pushPanel = h('section', { class: 'card notifications', 'aria-labelledby': 'notifications-title' });
    const runsCard = h(
      'section',
      { class: 'card runs', 'aria-labelledby': 'runs-title' },
      h('h2', { id: 'runs-title' }, 'All runs'),
      h('p', { class: 'muted' }, 'Loading runs…'),
    );
    main.replaceChildren(
      h(
        'div',
        { class: 'page-head' },
        h('h1', {}, 'Runs'),
        h('p', { class: 'muted' }, 'Everything your team launched, newest first.'),
      ),
      h('div', { class: 'layout' }, runsCard, pushPanel),
    );
    renderPushPanel();
    await Promise.all([refreshPush().then(renderPushPanel, () => renderPushPanel()), loadRuns(runsCard)]);
  }

  async function loadRuns(card) {
    let runs;
    let nextBefore;
    try {
      ({ runs, nextBefore } = await api('GET', '/runs'));
    } catch (err) {
      if (err.status === 401) return;
      card.replaceChildren(
        h('h2', { id: 'runs-title' }, 'All runs'),
        h('p', { class: 'message message-error', role: 'alert' }, err.message),
      );
      return;
    }
    // Newest first, a page at a time: the count says "50+" while older runs are not loaded yet.
    const me = claimsOf(getToken()).sub;
    const count = h('span', { class: 'count' });
    const showCount = (n, more) => {
      count.textContent = more ? `${n}+` : String(n);
      count.setAttribute('aria-label', more ? `${n} runs shown, more to load` : `${n} runs`);
    };
    showCount(runs.length, !!nextBefore);
    const heading = h('h2', { id: 'runs-title' }, 'All runs ', count);
    if (runs.length === 0) {
      card.replaceChildren(
        heading,
        h(
          'div',
          { class: 'empty' },
          h('p', {}, 'No runs yet.'),
          h('p', { class: 'muted' }, 'Runs your team launches show up here.'),
        ),
      );
      return;
    }
    const runRow = (run) =>
      h(
        'tr',
        { 'data-run-id': run.id },
        h(
          'td',
          {},
          h('a', { class: 'run-link', href: `/runs/${encodeURIComponent(run.id)}` }, run.title || run.id),
          h('div', { class: 'sub muted' }, run.id),
        ),
        h('td', {}, statusBadge(run.status)),
        h('td', { class: 'hide-narrow' }, run.ownerId === me ? 'You' : run.ownerId),
        h('td', { class: 'hide-narrow' }, timeAgo(run.updatedAt || run.createdAt)),
      );
    const tbody = h('tbody', {}, runs.map(runRow));
    let shown = runs.length;
    const older = olderButton('Show older runs', '/runs', 'runs', nextBefore, (more, hasMore) => {
      tbody.append(...more.map(runRow));
      shown += more.length;
      showCount(shown, hasMore);
    });
    card.replaceChildren(
      heading,
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          {},
          h('caption', { class: 'visually-hidden' }, 'Runs in your team'),
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Run'),
              h('th', { scope: 'col' }, 'Status'),
              h('th', { scope: 'col', class: 'hide-narrow' }, 'Owner'),
              h('th', { scope: 'col', class: 'hide-narrow' }, 'Updated'),
            ),
          ),
          tbody,
        ),
      ),
      ...(older ? [older] : []),
    );
  }

  const PAUSE_TEXT = {
    human_input: 'Waiting for a person to answer.',
    usage_park: 'Parked at a usage cap.',
    operator: 'Paused by an operator.',
  };
  const EPISODE_KINDS = {
    run_paused: 'Paused',
    run_finished: 'Finished',
    run_failed: 'Failed',
    run_cancelled: 'Cancelled',
  };
  /** What the episode was, read off its id (<runId>:input:<iid>, :park:<wall>:<n>, :soft-pause:<n>, :end). */
  function episodeLabel(episode) {
    const id = String(episode.episodeId);
    if (id.includes(':input:')) return 'Asked for input';
    const park = /:park:([^:]+):\d+$/.exec(id);
    if (park) return `Parked at ${park[1]}`;
    if (id.includes(':soft-pause:')) return 'Paused by an operator';
    return EPISODE_KINDS[episode.kind] || humanize(episode.kind || 'episode');
  }

  const FAMILY_STATE = { delivered: 'Delivered', pending: 'Pending', absent: '—' };
  const FAMILY_RESULT = {
    delivered: 'Delivered',
    redelivered: 'Redelivered',
    not_addressable: 'Nobody to notify',
    not_owed: 'Not owed',
  };
  const humanize = (text) =>
    String(text)
      .replace(/[_-]+/g, ' ')
      .replace(/^./, (c) => c.toUpperCase());

  /** One family's claim on the episode: its state ("absent" reads as a dash) and, once settled, how it ended. */
  function familyCell(episode, family) {
    const raw = (episode.families || {})[family];
    const claim = typeof raw === 'string' ? { state: raw } : raw || { state: 'absent' };
    const state = claim.state || 'absent';
    let label = FAMILY_STATE[state] || humanize(state);
    if (state === 'delivered' && claim.result) label = FAMILY_RESULT[claim.result] || humanize(claim.result);
    const devices =
      family === 'push' && typeof episode.pushDeliveries === 'number' ? episode.pushDeliveries : 0;
    const title =
      state === 'absent'
        ? 'Not claimed: nothing was sent by this family'
        : devices > 0
          ? `${label}: reached ${devices} ${devices === 1 ? 'device' : 'devices'}`
          : label;
    return h('td', {}, h('span', { class: `pill pill-${state}`, title }, label));
  }

  /** What the receiver answered, or why there was no answer (a category: timeout, network error, refused: …). */
  const attemptAnswer = (attempt) =>
    attempt.status !== undefined ? `HTTP ${attempt.status}` : humanize(attempt.error || 'no answer');
  const ATTEMPT_RESULT = { delivered: 'Delivered', retry: 'Retry', stop: 'Stopped' };

  /** A callback that gave up may be sent again (same webhook-id) from the page. */
  const gaveUp = (episode) => {
    const claim = (episode.families || {}).callback || {};
    return claim.state === 'delivered' && String(claim.result || '').startsWith('gave_up');
  };

  /**
   * One episode's callback attempts (the attempt log), with "Redeliver" on a callback that gave up. The button
   * asks for a redelivery, then follows the log until its attempt shows, and draws the page again.
   */
  function callbackAttemptsSection(runId, episode, label) {
    const attempts = episode.callbackAttempts || [];
    const status = h('p', { class: 'muted', role: 'status' });
    const button = gaveUp(episode)
      ? h(
          'button',
          {
            type: 'button',
            class: 'button',
            onclick: async () => {
              button.disabled = true;
              status.textContent = 'Redelivering…';
              const path = `/runs/${encodeURIComponent(runId)}/episodes/${encodeURIComponent(
                episode.episodeId,
              )}/callback/redeliver`;
              try {
                await api('POST', path);
              } catch (err) {
                if (err.status === 401) return;
                status.textContent = err.message;
                button.disabled = false;
                return;
              }
              const deadline = Date.now() + 20000;
              while (Date.now() < deadline) {
                await new Promise((resolve) => setTimeout(resolve, 500));
                const episodes = await allPages(
                  `/runs/${encodeURIComponent(runId)}/episodes`,
                  'episodes',
                ).catch(() => []);
                const now = episodes.find((e) => e.episodeId === episode.episodeId);
                if (now && (now.callbackAttempts || []).length > attempts.length) break;
              }
              if (currentRunId() === runId) await renderRun(runId);
            },
          },
          'Redeliver',
        )
      : null;
    return h(
      'div',
      { class: 'attempts' },
      h(
        'div',
        { class: 'table-wrap' },
        h(
          'table',
          {},
          h('caption', {}, `Callback attempts of ${label}`),
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              h('th', { scope: 'col' }, 'Attempt'),
              h('th', { scope: 'col' }, 'When'),
              h('th', { scope: 'col' }, 'Answer'),
              h('th', { scope: 'col' }, 'Result'),
              h('th', { scope: 'col', class: 'hide-narrow' }, 'Took'),
              h('th', { scope: 'col' }, 'Next try in'),
            ),
          ),
          h(
            'tbody',
            {},
            attempts.map((attempt) =>
              h(
                'tr',
                {},
                h('td', {}, `#${attempt.attempt}`, attempt.trigger === 'redeliver' ? ' (Redelivery)' : ''),
                h('td', {}, timeAgo(attempt.at)),
                h('td', {}, attemptAnswer(attempt)),
                h('td', {}, ATTEMPT_RESULT[attempt.result] || humanize(attempt.result)),
                h('td', { class: 'hide-narrow' }, `${attempt.durationMs} ms`),
                h('td', {}, attempt.nextWaitSeconds !== undefined ? `${attempt.nextWaitSeconds} s` : '—'),
              ),
            ),
          ),
        ),
      ),
      button,
      status,
    );
  }

  async function renderRun(runId) {
    document.title = 'Run · Flow Studio';
    pushPanel = null;
    const back = h('a', { href: '/', class: 'back' }, '← All runs');
    main.replaceChildren(back, h('p', { class: 'muted' }, 'Loading the run…'));
    let run;
    let episodes;
    try {
      // The API pages episodes newest first; a run has few, so the page shows them all, oldest first.
      [run, episodes] = await Promise.all([
        api('GET', `/runs/${encodeURIComponent(runId)}`),
        allPages(`/runs/${encodeURIComponent(runId)}/episodes`, 'episodes').then((rows) => rows.reverse()),
      ]);
    } catch (err) {
      if (err.status === 401) return;
      const text = err.status === 404 ? 'There is no such run in your team.' : err.message;
      main.replaceChildren(back, errorCard('Run not found', text));
      return;
    }
    document.title = `${run.title || run.id} · Flow Studio`;

    const facts = [
      ['Run ID', h('code', {}, run.id)],
      ['Owner', run.ownerId === claimsOf(getToken()).sub ? `${run.ownerId} (you)` : run.ownerId],
      ['Started', timeAgo(run.createdAt)],
      [run.endedAt ? 'Ended' : 'Updated', timeAgo(run.endedAt || run.updatedAt)],
      ['Pauses', String(run.pauseCount ?? 0)],
    ];
    if (run.budget) facts.push(['Budget', String(run.budget.limit)]);

    const detail = [];
    if (run.status === 'paused' && run.pause) {
      const text = PAUSE_TEXT[run.pause.reason] || 'Paused.';
      detail.push(
        h('p', { class: 'message message-warning' }, text, run.pause.wall ? ` Cap: ${run.pause.wall}.` : ''),
      );
    }
    if (run.finalAnswer) {
      detail.push(h('h3', {}, 'Final answer'), h('blockquote', { class: 'answer' }, run.finalAnswer));
    }
    if (run.error) {
      detail.push(
        h('h3', {}, 'Error'),
        h('p', { class: 'message message-error' }, h('code', {}, run.error.code), ' ', run.error.message),
      );
    }

    const episodeRows = episodes.map((episode) =>
      h(
        'tr',
        { 'data-episode-id': episode.episodeId },
        h(
          'td',
          {},
          // The run's id is the page's subject: show what follows it (input:<iid>, park:<wall>:<n>, end).
          h(
            'code',
            { class: 'episode-id', title: episode.episodeId },
            String(episode.episodeId).startsWith(`${run.id}:`)
              ? episode.episodeId.slice(run.id.length + 1)
              : episode.episodeId,
          ),
        ),
        h('td', {}, episodeLabel(episode)),
        h('td', { class: 'hide-narrow' }, timeAgo(episode.recordedAt)),
        ...['push', 'callback', 'ops'].map((family) => familyCell(episode, family)),
      ),
    );
    const shortId = (episode) =>
      String(episode.episodeId).startsWith(`${run.id}:`)
        ? episode.episodeId.slice(run.id.length + 1)
        : episode.episodeId;
    const attemptSections = episodes
      .filter((episode) => (episode.callbackAttempts || []).length > 0)
      .map((episode) => callbackAttemptsSection(run.id, episode, shortId(episode)));

    main.replaceChildren(
      back,
      h('div', { class: 'page-head run-head' }, h('h1', {}, run.title || run.id), statusBadge(run.status)),
      h(
        'section',
        { class: 'card', 'aria-label': 'Run details' },
        h(
          'dl',
          { class: 'facts' },
          facts.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))),
        ),
        detail,
      ),
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'episodes-title' },
        h('h2', { id: 'episodes-title' }, 'Outcome episodes'),
        h(
          'p',
          { class: 'muted' },
          'Each pause and the end of the run is one episode. Push notifies the run’s people, Callback ' +
            'the launcher’s URL, Operator the on-call webhook.',
        ),
        episodes.length === 0
          ? h('p', { class: 'empty' }, 'No episodes yet: the run has not paused or ended.')
          : h(
              'div',
              { class: 'table-wrap' },
              h(
                'table',
                {},
                h('caption', { class: 'visually-hidden' }, 'Outcome episodes of this run'),
                h(
                  'thead',
                  {},
                  h(
                    'tr',
                    {},
                    h('th', { scope: 'col' }, 'Episode'),
                    h('th', { scope: 'col' }, 'Outcome'),
                    h('th', { scope: 'col', class: 'hide-narrow' }, 'Recorded'),
                    h('th', { scope: 'col' }, 'Push'),
                    h('th', { scope: 'col' }, 'Callback'),
                    h('th', { scope: 'col' }, 'Operator'),
                  ),
                ),
                h('tbody', {}, episodeRows),
              ),
            ),
      ),
      // DOM replaceChildren, unlike h(), would print a null child as the text "null".
      ...(attemptSections.length
        ? [
            h(
              'section',
              { class: 'card', 'aria-labelledby': 'callbacks-title' },
              h('h2', { id: 'callbacks-title' }, 'Callback attempts'),
              h(
                'p',
                { class: 'muted' },
                'Every signed POST to the launcher’s URL. A callback that gave up can be sent again: the same ' +
                  'webhook-id, so a receiver that saw it already can ignore it.',
              ),
              attemptSections,
            ),
          ]
        : []),
    );
  }

  function renderNotFound() {
    document.title = 'Not found · Flow Studio';
    main.replaceChildren(
      h('a', { href: '/', class: 'back' }, '← All runs'),
      errorCard('Page not found', 'There is nothing at this address.'),
    );
  }

  // ---- routing --------------------------------------------------------------------------------------------

  function currentRunId() {
    const match = /^\/runs\/([^/]+)\/?$/.exec(location.pathname);
    return match ? decodeURIComponent(match[1]) : undefined;
  }

  function route() {
    if (!getToken()) return renderSignIn();
    const path = location.pathname;
    if (path === '/' || path === '/index.html') return renderHome();
    const runId = currentRunId();
    if (runId) return renderRun(runId);
    return renderNotFound();
  }

  // Messages from the service worker: a push arrived (refresh what is shown), or a notification click asks
  // this (uncontrolled) tab to navigate.
  if ('serviceWorker' in navigator) {
    navigator.serviceWorker.addEventListener('message', (event) => {
      const message = event.data || {};
      if (message.type === 'flow:navigate' && typeof message.url === 'string') {
        const url = new URL(message.url, location.origin);
        if (url.origin === location.origin) location.assign(url.href);
      } else if (message.type === 'flow:push' && getToken()) {
        const runId = currentRunId();
        if (!runId || (message.payload && message.payload.runId === runId)) refreshView();
      }
    });
  }

  let refreshing = false;
  async function refreshView() {
    if (refreshing || !getToken()) return;
    refreshing = true;
    try {
      const runId = currentRunId();
      if (runId) await renderRun(runId);
      else {
        const card = main.querySelector('.runs');
        if (card) await loadRuns(card);
      }
    } finally {
      refreshing = false;
    }
  }
  document.addEventListener('visibilitychange', () => {
    if (document.visibilityState === 'visible') refreshView();
  });

  renderAccount();
  route();
})();
