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
