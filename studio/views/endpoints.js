// The team's endpoints page (team admins only): the list, "Add endpoint" with a checkbox per event type, and per
// endpoint a test event, its attempt log, secret rotation, disable/enable and a recover of a window. A whsec_
// secret is shown once, after create and after rotate, with a copy button.
import { api } from '../shared/api.js';
import { dataTable, h, humanize, main, messageLine, timeAgo } from '../shared/dom.js';

/** Attempts shown per endpoint: the newest page of its log. */
const ATTEMPTS_SHOWN = 20;
const RECOVER_WINDOWS = [
  ['1 hour', 1],
  ['24 hours', 24],
  ['3 days', 72],
  ['14 days', 14 * 24],
];
const endpointPath = (endpoint) => `/endpoints/${encodeURIComponent(endpoint.id)}`;

/** The event types an endpoint may subscribe to, as the API's OpenAPI document names them. */
async function subscribableTypes() {
  const { webhooks } = await api('GET', '/openapi.json');
  return Object.keys(webhooks || {})
    .filter((name) => name.startsWith('endpoint ') && name !== 'endpoint endpoint.test')
    .map((name) => name.slice('endpoint '.length));
}

/** The secret, this once, with a copy button: the API never shows it again. */
function secretNotice(secret) {
  const copied = h('span', { class: 'muted', role: 'status' });
  return h(
    'div',
    { class: 'message message-warning secret-notice' },
    h('p', {}, 'Signing secret (shown once; keep it with the receiver):'),
    h('code', { class: 'secret' }, secret),
    h(
      'button',
      {
        type: 'button',
        class: 'button button-quiet',
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(secret);
            copied.textContent = ' Copied.';
          } catch {
            copied.textContent = ' Copy it by hand: the clipboard is not available here.';
          }
        },
      },
      'Copy',
    ),
    copied,
  );
}

function addForm(types, onAdded) {
  const url = h('input', { type: 'url', id: 'endpoint-url', name: 'url', required: true, maxlength: 2048 });
  const description = h('input', { type: 'text', id: 'endpoint-description', maxlength: 500 });
  const boxes = types.map((type) => h('input', { type: 'checkbox', name: 'eventTypes', value: type }));
  const line = messageLine();
  const form = h(
    'form',
    { class: 'card', novalidate: true, 'aria-labelledby': 'endpoint-add-title' },
    h('h2', { id: 'endpoint-add-title' }, 'Add endpoint'),
    h('label', { for: 'endpoint-url' }, 'URL'),
    url,
    h('label', { for: 'endpoint-description' }, 'Description (optional)'),
    description,
    h(
      'fieldset',
      { class: 'kinds' },
      h('legend', {}, 'Event types'),
      boxes.map((box) => h('label', { class: 'choice' }, box, ` ${box.value}`)),
    ),
    line,
    h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'button button-primary' }, 'Add')),
  );
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const eventTypes = boxes.filter((box) => box.checked).map((box) => box.value);
    if (!url.value || !eventTypes.length) return line.say('error', 'Give a URL and at least one event type.');
    try {
      const body = {
        url: url.value,
        eventTypes,
        ...(description.value ? { description: description.value } : {}),
      };
      const created = await api('POST', '/endpoints', body);
      await onAdded(created);
    } catch (err) {
      if (err.status !== 401) line.say('error', `The endpoint was not added: ${err.message}`);
    }
  });
  return form;
}

const attemptAnswer = (attempt) =>
  attempt.status !== undefined ? `HTTP ${attempt.status}` : humanize(attempt.error || 'no answer');

async function attemptLog(endpoint) {
  let attempts;
  try {
    ({ attempts } = await api('GET', `${endpointPath(endpoint)}/attempts?limit=${ATTEMPTS_SHOWN}`));
  } catch (err) {
    if (err.status === 401) throw err; // the sign-in form is up: nothing of this page is drawn over it
    // One card's log unread: said in that card, the page and every other card still shown.
    return h(
      'p',
      { class: 'message message-warning', role: 'alert' },
      `The attempts could not be loaded: ${err.message}`,
    );
  }
  if (!attempts.length) return h('p', { class: 'muted' }, 'No attempts yet.');
  return dataTable({
    caption: `Attempts of ${endpoint.url}`,
    captionHidden: true,
    columns: [['When'], ['Event'], ['Run', 'hide-narrow'], ['Attempt'], ['Answer'], ['Result']],
    tbody: h(
      'tbody',
      {},
      attempts.map((attempt) =>
        h(
          'tr',
          {},
          h('td', {}, timeAgo(attempt.at)),
          h('td', {}, attempt.eventId),
          h(
            'td',
            { class: 'hide-narrow' },
            h('a', { href: `/runs/${encodeURIComponent(attempt.runId)}` }, attempt.runId),
          ),
          h('td', {}, `#${attempt.attempt}`),
          h('td', {}, attemptAnswer(attempt)),
          h('td', {}, humanize(attempt.result)),
        ),
      ),
    ),
  });
}

/** A button that runs `action`, says what happened on `line`, then redraws the page. */
function actionButton(label, line, action) {
  const button = h(
    'button',
    {
      type: 'button',
      class: 'button',
      onclick: async () => {
        button.disabled = true;
        try {
          await action();
        } catch (err) {
          if (err.status !== 401) line.say('error', err.message);
        } finally {
          button.disabled = false;
        }
      },
    },
    label,
  );
  return button;
}

function recoverControl(endpoint, line) {
  const select = h(
    'select',
    { 'aria-label': `Recover window of ${endpoint.url}` },
    RECOVER_WINDOWS.map(([label, hours]) => h('option', { value: hours }, `the last ${label}`)),
  );
  const recover = actionButton('Recover', line, async () => {
    const since = new Date(Date.now() - Number(select.value) * 3600_000).toISOString();
    await api('POST', `${endpointPath(endpoint)}/recover`, { since });
    line.say('success', 'Recovering: every event it missed in that window is sent again.');
  });
  return h('span', { class: 'recover-control' }, recover, ' ', select);
}

async function endpointCard(endpoint, redraw) {
  const line = messageLine();
  const secretSlot = h('div', { class: 'secret-slot' });
  const test = actionButton('Send test event', line, async () => {
    const result = await api('POST', `${endpointPath(endpoint)}/test`);
    const answer =
      result.status !== undefined ? `HTTP ${result.status}` : humanize(result.category || 'no answer');
    line.say(result.delivered ? 'success' : 'warning', `Test event sent: ${answer}.`);
  });
  const rotate = actionButton('Rotate secret', line, async () => {
    const { secret } = await api('POST', `${endpointPath(endpoint)}/rotate-secret`);
    // Shown now, and by a redraw still loading (a refresh clicked before), which would draw over it.
    secretsToShow.set(endpoint.id, secret);
    secretSlot.replaceChildren(secretNotice(secret));
    line.say('success', 'Secret rotated: events are signed with both secrets for a while.');
  });
  const toggle = actionButton(endpoint.disabled ? 'Enable' : 'Disable', line, async () => {
    await api('PATCH', endpointPath(endpoint), { disabled: !endpoint.disabled });
    await redraw();
  });
  const refresh = actionButton('Refresh', line, redraw);
  return h(
    'section',
    { class: 'card endpoint', 'data-endpoint-id': endpoint.id },
    h('h2', {}, endpoint.url),
    endpoint.description ? h('p', {}, endpoint.description) : null,
    h(
      'p',
      { class: 'muted' },
      endpoint.disabled
        ? h(
            'span',
            { class: 'badge badge-failed' },
            endpoint.disabledReason === 'failing' ? 'Disabled: failing' : 'Disabled',
          )
        : h('span', { class: 'badge badge-finished' }, 'Enabled'),
      ' ',
      endpoint.eventTypes.join(', '),
      ' · last success ',
      endpoint.lastSuccessAt ? timeAgo(endpoint.lastSuccessAt) : 'never',
    ),
    secretSlot,
    line,
    h('div', { class: 'actions' }, test, rotate, toggle, recoverControl(endpoint, line), refresh),
    h('h3', {}, 'Attempts'),
    await attemptLog(endpoint),
  );
}

const pageHead = () =>
  h(
    'div',
    { class: 'page-head' },
    h('a', { href: '/', class: 'back' }, '← All runs'),
    h('h1', {}, 'Endpoints'),
    h(
      'p',
      { class: 'muted' },
      'The systems your team runs that hear about every run, each for the event types it chose.',
    ),
  );

/** Draws of the page begun: a draw that finishes after a later one began is dropped. */
let drawn = 0;
/**
 * Secrets to show, by endpoint: a new one's, or a rotation's. Whichever draw of the page finishes next shows them
 * (the create's own draw may be dropped, a refresh in flight would draw over a rotation's), then forgets them.
 */
const secretsToShow = new Map();

/** The page; `justCreated` (an endpoint with its secret) shows that secret above its card. */
export async function renderEndpoints(justCreated) {
  document.title = 'Endpoints · Flow Studio';
  const draw = ++drawn;
  if (justCreated) secretsToShow.set(justCreated.id, justCreated.secret);
  let endpoints, types;
  try {
    [{ endpoints }, types] = await Promise.all([api('GET', '/endpoints'), subscribableTypes()]);
  } catch (err) {
    if (err.status === 401 || draw !== drawn) return;
    const text =
      err.status === 403
        ? "Only your team's admins manage its endpoints. Ask one of them to add or change an endpoint."
        : `The endpoints could not be loaded: ${err.message}`;
    return main.replaceChildren(
      pageHead(),
      h('section', { class: 'card' }, h('p', { class: 'message message-warning', role: 'alert' }, text)),
    );
  }
  const redraw = () => renderEndpoints();
  const cards = await Promise.all(endpoints.map((endpoint) => endpointCard(endpoint, redraw)));
  if (draw !== drawn) return;
  endpoints.forEach((endpoint, i) => {
    const secret = secretsToShow.get(endpoint.id);
    if (secret === undefined) return;
    secretsToShow.delete(endpoint.id);
    cards[i].querySelector('.secret-slot').replaceChildren(secretNotice(secret));
  });
  main.replaceChildren(
    pageHead(),
    h(
      'div',
      { class: 'stack' },
      cards.length ? cards : h('p', { class: 'muted empty' }, 'Your team has no endpoints yet.'),
      addForm(types, (created) => renderEndpoints(created)),
    ),
  );
}
