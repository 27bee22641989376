// DOM helpers shared by every view: building elements (text always as text, never parsed as HTML), the page's
// two mount points, and the small formatters (status badges, relative times, readable names).

export const main = document.getElementById('main');
export const account = document.getElementById('account');

/** h('p', {class: 'x'}, 'text', child): an element; text is always set as text, never parsed as HTML. */
export function h(tag, props, ...children) {
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

/**
 * A scrollable table: `columns` are [label, class?] pairs, `tbody` the body (the caller may keep it to append
 * rows later). A hidden caption still names the table for screen readers and tests.
 */
export function dataTable({ caption, captionHidden = false, columns, tbody }) {
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('caption', captionHidden ? { class: 'visually-hidden' } : {}, caption),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          columns.map(([label, className]) => h('th', { scope: 'col', class: className }, label)),
        ),
      ),
      tbody,
    ),
  );
}

export function errorCard(title, text) {
  return h(
    'section',
    { class: 'card' },
    h('h2', {}, title),
    h('p', { class: 'message message-error', role: 'alert' }, text),
  );
}

const STATUS_LABELS = {
  running: 'Running',
  paused: 'Paused',
  finished: 'Finished',
  failed: 'Failed',
  cancelled: 'Cancelled',
};
export const statusBadge = (status) =>
  h('span', { class: `badge badge-${status}` }, STATUS_LABELS[status] || status || 'Unknown');

export const humanize = (text) =>
  String(text)
    .replace(/[_-]+/g, ' ')
    .replace(/^./, (c) => c.toUpperCase());

const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' });
const absolute = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const UNITS = [
  ['year', 31536000],
  ['month', 2592000],
  ['day', 86400],
  ['hour', 3600],
  ['minute', 60],
];

/** A <time> reading "3 minutes ago", with the exact time on hover. */
export function timeAgo(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const date = new Date(iso);
  const seconds = Math.round((date.getTime() - Date.now()) / 1000);
  let text = Math.abs(seconds) < 45 ? 'just now' : '';
  for (const [unit, size] of UNITS) {
    if (text) break;
    if (Math.abs(seconds) >= size) text = relative.format(Math.round(seconds / size), unit);
  }
  text = text || relative.format(Math.round(seconds / 60), 'minute');
  return h('time', { datetime: date.toISOString(), title: absolute.format(date) }, text);
}

/** A status line a form says how it went on: `line.say('error' | 'success' | ..., text)`. */
export function messageLine() {
  const line = h('p', { class: 'message', role: 'status', hidden: true });
  line.say = (kind, text) => {
    line.className = `message message-${kind}`;
    line.textContent = text;
    line.hidden = false;
  };
  return line;
}
