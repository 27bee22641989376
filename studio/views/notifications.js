// The notifications card on the home page: whether this browser gets push, the buttons that turn it on and
// off or send a test, and the preferences (whose runs, which kinds, quiet hours, do not disturb and what breaks
// through them, which devices).
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

/** Saves a change to quiet hours, do not disturb or breakThrough; the answer is the prefs now in force. */
async function saveHolds(change, success) {
  try {
    const saved = await api('PUT', '/notifications/prefs', { scope: push.scope, ...change });
    push.quietHours = saved.quietHours || null;
    push.doNotDisturbUntil = saved.doNotDisturbUntil || null;
    push.breakThrough = saved.breakThrough || [];
    say('success', success);
  } catch (err) {
    say('error', `Your choice was not saved: ${err.message}`);
  }
}

const DAYS = [
  ['mon', 'Mon'],
  ['tue', 'Tue'],
  ['wed', 'Wed'],
  ['thu', 'Thu'],
  ['fri', 'Fri'],
  ['sat', 'Sat'],
  ['sun', 'Sun'],
];
const browserZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || 'UTC';
const atTime = (iso) =>
  new Date(iso).toLocaleString([], { weekday: 'short', hour: '2-digit', minute: '2-digit' });

/** Tomorrow at 08:00 in this browser's time, as an instant. */
function tomorrowMorning() {
  const at = new Date();
  at.setDate(at.getDate() + 1);
  at.setHours(8, 0, 0, 0);
  return at.toISOString();
}

/** Quiet hours: a daily window in the browser's time zone (crossing midnight is fine), on the days ticked. */
function quietFieldset() {
  const current = push.quietHours;
  const start = h('input', {
    type: 'time',
    name: 'quiet-start',
    value: current ? current.start : '22:00',
    required: true,
  });
  const end = h('input', {
    type: 'time',
    name: 'quiet-end',
    value: current ? current.end : '07:00',
    required: true,
  });
  const days = DAYS.map(([day, label]) =>
    h(
      'label',
      { class: 'day' },
      h('input', {
        type: 'checkbox',
        name: `quiet-day-${day}`,
        value: day,
        checked: !current || !current.days || current.days.includes(day),
      }),
      label,
    ),
  );
  const zone = current ? current.timeZone : browserZone();
  const save = () => {
    const ticked = days.map((label) => label.querySelector('input')).filter((box) => box.checked);
    if (!ticked.length) return say('error', 'Tick at least one day, or turn quiet hours off.');
    const quietHours = { start: start.value, end: end.value, timeZone: zone };
    if (ticked.length < DAYS.length) quietHours.days = ticked.map((box) => box.value);
    return saveHolds({ quietHours }, `Saved: quiet from ${start.value} to ${end.value} (${zone}).`);
  };
  return h(
    'fieldset',
    { class: 'scope quiet' },
    h('legend', {}, 'Quiet hours'),
    h(
      'p',
      { class: 'muted' },
      current
        ? `On: ${current.start} to ${current.end}, ${current.timeZone}. Pushes wait and arrive as one summary when they end.`
        : 'Off. Pushes held during quiet hours arrive as one summary when they end.',
    ),
    h('div', { class: 'quiet-times' }, h('label', {}, 'From ', start), h('label', {}, 'to ', end)),
    h('div', { class: 'quiet-days' }, ...days),
    h(
      'div',
      { class: 'actions' },
      button(
        { class: 'button', id: 'save-quiet', onclick: save },
        current ? 'Save quiet hours' : 'Turn on quiet hours',
      ),
      current
        ? button(
            {
              class: 'button button-quiet',
              id: 'clear-quiet',
              onclick: () => saveHolds({ quietHours: null }, 'Quiet hours are off.'),
            },
            'Turn off',
          )
        : null,
    ),
  );
}

/** Do not disturb in one click: an hour, or until tomorrow 08:00 here; resume at any time. */
function dndFieldset() {
  const until = push.doNotDisturbUntil;
  return h(
    'fieldset',
    { class: 'scope dnd' },
    h('legend', {}, 'Do not disturb'),
    h('p', { class: 'muted', id: 'dnd-state' }, until ? `On until ${atTime(until)}.` : 'Off.'),
    h(
      'div',
      { class: 'actions' },
      button(
        {
          class: 'button',
          id: 'dnd-hour',
          onclick: () =>
            saveHolds(
              { doNotDisturbUntil: new Date(Date.now() + 3600_000).toISOString() },
              'Do not disturb for an hour.',
            ),
        },
        'For 1 hour',
      ),
      button(
        {
          class: 'button',
          id: 'dnd-morning',
          onclick: () =>
            saveHolds({ doNotDisturbUntil: tomorrowMorning() }, 'Do not disturb until tomorrow 08:00.'),
        },
        'Until tomorrow 08:00',
      ),
      until
        ? button(
            {
              class: 'button button-quiet',
              id: 'dnd-off',
              onclick: () => saveHolds({ doNotDisturbUntil: null }, 'Do not disturb is off.'),
            },
            'Resume now',
          )
        : null,
    ),
  );
}

/** The kinds that still arrive during quiet hours and do not disturb. */
function breakThroughFieldset() {
  const chosen = new Set(push.breakThrough || []);
  return h(
    'fieldset',
    { class: 'scope kinds break-through' },
    h('legend', {}, 'Still push me during quiet hours when'),
    ...KIND_LABELS.map(([kind, label, phrase]) =>
      h(
        'label',
        { class: 'choice' },
        // Plain checkboxes: the kinds' own switches above carry the same labels.
        h('input', {
          type: 'checkbox',
          name: `break-${kind}`,
          checked: chosen.has(kind),
          onchange: (event) => {
            const next = new Set(push.breakThrough || []);
            if (event.target.checked) next.add(kind);
            else next.delete(kind);
            return saveHolds(
              { breakThrough: [...next] },
              event.target.checked
                ? `Saved: a push when ${phrase}, even during quiet hours.`
                : `Saved: when ${phrase} during quiet hours, it waits for the summary.`,
            );
          },
        }),
        h('span', {}, label),
      ),
    ),
  );
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
          push.kinds ? quietFieldset() : null,
          push.kinds ? dndFieldset() : null,
          push.kinds ? breakThroughFieldset() : null,
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
