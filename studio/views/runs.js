// The runs list: the team's runs newest first, a page at a time ("Show older runs" loads the next).
import { api, claimsOf, getToken } from '../shared/api.js';
import { dataTable, h, statusBadge, timeAgo } from '../shared/dom.js';

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

function runRow(run, me) {
  return h(
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
}

const RUN_COLUMNS = [['Run'], ['Status'], ['Owner', 'hide-narrow'], ['Updated', 'hide-narrow']];

/** A card for the list, "Loading runs…" until loadRuns fills it. */
export function runsCard() {
  return h(
    'section',
    { class: 'card runs', 'aria-labelledby': 'runs-title' },
    h('h2', { id: 'runs-title' }, 'All runs'),
    h('p', { class: 'muted' }, 'Loading runs…'),
  );
}

/** Fills the card with the newest page of runs; the count says "50+" while older runs are not loaded yet. */
export async function loadRuns(card) {
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
  const me = claimsOf(getToken()).sub;
  const tbody = h(
    'tbody',
    {},
    runs.map((run) => runRow(run, me)),
  );
  let shown = runs.length;
  const older = olderButton('Show older runs', '/runs', 'runs', nextBefore, (more, hasMore) => {
    tbody.append(...more.map((run) => runRow(run, me)));
    shown += more.length;
    showCount(shown, hasMore);
  });
  card.replaceChildren(
    heading,
    dataTable({ caption: 'Runs in your team', captionHidden: true, columns: RUN_COLUMNS, tbody }),
    ...(older ? [older] : []),
  );
}

/** datetime-local's value (local time, no zone) as ISO; empty stays empty. */
const isoOf = (local) => (local ? new Date(local).toISOString() : '');
/** A Date as a datetime-local value in the browser's zone. */
const localOf = (date) =>
  new Date(date.getTime() - date.getTimezoneOffset() * 60_000).toISOString().slice(0, 16);

function recoverProgress(p) {
  const state = p.status === 'completed' ? 'Done' : 'Running';
  const notes = [];
  if (p.skipped) notes.push(`${p.skipped} skipped (re-sent lately)`);
  if (p.held) notes.push(`${p.held} held (the receiver's breaker is open: recover again later)`);
  if (p.stoppedAtMax) notes.push('stopped at the most one recover sends: recover again for the rest');
  if (p.waitingForBudgetUntil)
    notes.push(
      `waiting for your team's redelivery budget until ${new Date(p.waitingForBudgetUntil).toLocaleTimeString()}`,
    );
  const counts = `${state}: ${p.found} found, ${p.sent} sent, ${p.delivered} delivered, ${p.failed} failed.`;
  return notes.length ? `${counts} ${notes.join('; ')}.` : counts;
}

/**
 * "Recover failed callbacks": redelivers every callback of the team that gave up in a window (at most 14 days),
 * then shows the recover's progress until it completes.
 */
export function recoverCard() {
  const since = h('input', { type: 'datetime-local', id: 'recover-since', name: 'since', required: true });
  const until = h('input', { type: 'datetime-local', id: 'recover-until', name: 'until' });
  since.value = localOf(new Date(Date.now() - 24 * 3600_000));
  const status = h('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const error = h('p', { class: 'message message-error', role: 'alert', hidden: true });
  const submit = h('button', { type: 'submit', class: 'button button-primary' }, 'Recover');
  const form = h(
    'form',
    { class: 'card recover', novalidate: true, 'aria-labelledby': 'recover-title' },
    h('h2', { id: 'recover-title' }, 'Recover failed callbacks'),
    h(
      'p',
      { class: 'muted' },
      'Sends again every callback of your team that gave up in this window (at most 14 days), ',
      'with the same webhook-id; one re-sent lately is skipped.',
    ),
    h('label', { for: 'recover-since' }, 'Gave up since'),
    since,
    h('label', { for: 'recover-until' }, 'Until (empty: now)'),
    until,
    error,
    status,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    startRecover({ since, until, status, error, submit });
  });
  return form;
}

async function startRecover({ since, until, status, error, submit }) {
  error.hidden = true;
  if (!since.value) {
    error.textContent = 'Choose when the window starts.';
    error.hidden = false;
    return;
  }
  submit.disabled = true;
  try {
    const body = { since: isoOf(since.value), ...(until.value ? { until: isoOf(until.value) } : {}) };
    const { id } = await api('POST', '/callbacks/recover', body);
    for (;;) {
      const progress = await api('GET', `/callbacks/recover/${encodeURIComponent(id)}`);
      status.textContent = recoverProgress(progress);
      if (progress.status === 'completed') break;
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  } catch (err) {
    if (err.status === 401) return;
    error.textContent = err.message;
    error.hidden = false;
  } finally {
    submit.disabled = false;
  }
}
