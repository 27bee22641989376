// The notifications card on the home page: whether this browser gets push, the buttons that turn it on and
// off or send a test, and the preferences (whose runs, which kinds, which devices).
import { api } from '../shared/api.js';
import { h } from '../shared/dom.js';
import {
  browserSupport,
  disablePush,
  loadDevices,
  push,
  refreshPush,
  subscribeThisBrowser,
} from '../shared/push.js';
import { devicesSection } from './devices.js';

let pushPanel = null; // the card, while it is shown

/** A new, empty card for the home page; renderPushPanel fills it. */
export function mountPushPanel() {
  pushPanel = h('section', { class: 'card notifications', 'aria-labelledby': 'notifications-title' });
  return pushPanel;
}

export function forgetPushPanel() {
  pushPanel = null;
}

/** Loads what the server and this browser say, then draws the card (whatever came back). */
export async function loadPushPanel() {
  await refreshPush().then(renderPushPanel, () => renderPushPanel());
}

function say(kind, text) {
  push.message = { kind, text };
  renderPushPanel();
}

const DENIED_TEXT =
  'Notifications are blocked for this site. Allow them in your browser’s site settings (the icon next ' +
  'to the address), then choose “Enable notifications” again.';

/** Runs `work` with the card busy (its buttons disabled), saying `doing` first and drawing the card after. */
async function busyWith(doing, work) {
  if (push.busy) return;
  push.busy = true;
  say('info', doing);
  try {
    await work();
  } finally {
    push.busy = false;
    renderPushPanel();
  }
}

/** Asks for permission (on the user's click), then subscribes this browser (see subscribeThisBrowser). */
async function enablePush() {
  if (push.busy) return;
  push.support = browserSupport();
  if (push.support !== 'ok') return renderPushPanel();
  await busyWith('Turning notifications on…', async () => {
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
      const refused = await subscribeThisBrowser();
      if (refused && refused.denied) return say('error', DENIED_TEXT);
      if (refused) {
        return say(
          'error',
          `This browser could not reach its push service (${refused.unreachable}). ` +
            'Notifications cannot be turned on in this browser.',
        );
      }
      say('success', 'Notifications are on. Flow will tell you when a run needs you or ends.');
    } catch (err) {
      say('error', `Notifications could not be turned on: ${err.message || err}`);
    }
  });
}

function onDisable() {
  return busyWith('Turning notifications off…', async () => {
    try {
      const problem = await disablePush();
      await loadDevices();
      if (problem) say('error', `Notifications are off in this browser, but the server said: ${problem}`);
      else say('success', 'Notifications are off for this browser.');
    } catch (err) {
      say('error', `Notifications could not be turned off: ${err.message || err}`);
    }
  });
}

function sendTest() {
  return busyWith('Sending a test notification…', async () => {
    try {
      const { sent } = await api('POST', '/notifications/push/test', {});
      if (sent > 0) say('success', `Test notification sent to ${sent} ${sent === 1 ? 'device' : 'devices'}.`);
      else
        say(
          'error',
          'No device accepted the test notification. Disable notifications and enable them again.',
        );
    } catch (err) {
      say('error', `The test notification was not sent: ${err.message}`);
    }
  });
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

const warning = (...text) => h('p', { class: 'message message-warning' }, ...text);

/** One line on where notifications stand: on, off, blocked, or why they cannot be used here. */
function stateLine(on, blocked) {
  if (push.support === 'insecure') {
    return warning('Notifications need a secure page: open the studio over https (or on localhost).');
  }
  if (push.support === 'unsupported') {
    return warning(
      'This browser cannot receive push notifications (it has no service worker or Push API support). ',
      'A current Chrome, Edge, Firefox or Safari can.',
    );
  }
  if (push.server === 'off') {
    return warning(
      'Web push is turned off on this Flow server. An operator turns it on by setting ',
      h('code', {}, 'VAPID_PUBLIC_KEY'),
      ' and ',
      h('code', {}, 'VAPID_PRIVATE_KEY'),
      '.',
    );
  }
  if (push.server === 'error') {
    return h(
      'p',
      { class: 'message message-error' },
      `The notification settings could not be loaded: ${push.serverError}`,
    );
  }
  if (push.server === 'unknown') return h('p', { class: 'muted' }, 'Checking…');
  return h(
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

const button = (props, label) => h('button', { type: 'button', ...props, disabled: push.busy }, label);

/** "Enable notifications" while off; "Send a test notification" and "Disable" while on. */
function switchButtons(on, blocked) {
  if (push.support !== 'ok' || push.server !== 'on') return [];
  if (!on) {
    return [
      blocked && !push.message ? h('p', { class: 'message message-error' }, DENIED_TEXT) : null,
      h(
        'div',
        { class: 'actions' },
        button(
          { class: 'button button-primary', id: 'enable-push', onclick: enablePush },
          'Enable notifications',
        ),
      ),
    ];
  }
  return [
    h(
      'div',
      { class: 'actions' },
      button({ class: 'button', id: 'test-push', onclick: sendTest }, 'Send a test notification'),
      button({ class: 'button button-quiet', id: 'disable-push', onclick: onDisable }, 'Disable'),
    ),
  ];
}

function scopeFieldset() {
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
  return h(
    'fieldset',
    { class: 'scope' },
    h('legend', {}, 'Notify me about'),
    option('own', 'My runs', 'Runs you launched.'),
    option('team', 'All of my team’s runs', 'Every run your team launches.'),
  );
}

function kindsFieldset() {
  return h(
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
  );
}

/** The last thing an action said (an alert when it went wrong); an empty, hidden status line otherwise. */
function messageLine() {
  const message = push.message;
  return h(
    'p',
    {
      class: message ? `message message-${message.kind}` : 'message',
      role: message && message.kind === 'error' ? 'alert' : 'status',
      id: 'push-message',
      hidden: !message,
    },
    message ? message.text : '',
  );
}

const panelActions = { say, render: () => renderPushPanel(), disableThisBrowser: onDisable };

export function renderPushPanel() {
  if (!pushPanel || !pushPanel.isConnected) return;
  const on = Boolean(push.subscription);
  const blocked = push.support === 'ok' && Notification.permission === 'denied';
  const prefs =
    push.server === 'on'
      ? [
          scopeFieldset(),
          push.kinds ? kindsFieldset() : null,
          push.devices ? devicesSection(panelActions) : null,
        ]
      : [];
  // Nulls filtered out: DOM replaceChildren, unlike h(), would print them as the text "null".
  pushPanel.replaceChildren(
    h('h2', { id: 'notifications-title' }, 'Notifications'),
    stateLine(on, blocked),
    ...switchButtons(on, blocked).filter(Boolean),
    ...prefs.filter(Boolean),
    messageLine(),
  );
}
