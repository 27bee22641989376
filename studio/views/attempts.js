// One episode's callback attempts on the run page (the attempt log), with "Redeliver" on a callback that gave
// up: it asks for a redelivery, follows the log until its attempt shows, then has the page drawn again.
import { allPages, api } from '../shared/api.js';
import { dataTable, h, humanize, timeAgo } from '../shared/dom.js';

/** What the receiver answered, or why there was no answer (a category: timeout, network error, refused: …). */
const attemptAnswer = (attempt) =>
  attempt.status !== undefined ? `HTTP ${attempt.status}` : humanize(attempt.error || 'no answer');
const ATTEMPT_RESULT = { delivered: 'Delivered', retry: 'Retry', stop: 'Stopped' };

/** A callback that gave up may be sent again (same webhook-id) from the page. */
const gaveUp = (episode) => {
  const claim = (episode.families || {}).callback || {};
  return claim.state === 'delivered' && String(claim.result || '').startsWith('gave_up');
};

const episodesPath = (runId) => `/runs/${encodeURIComponent(runId)}/episodes`;

/**
 * Waits (up to 20 s) until the episode's log holds more than `known` attempts and, when the last one delivered,
 * its callback is settled too: a delivered redelivery settles just after its attempt is logged, and a page drawn
 * in between would show the delivery with "Redeliver" still offered.
 */
async function moreAttempts(runId, episodeId, known) {
  const deadline = Date.now() + 20000;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    const episodes = await allPages(episodesPath(runId), 'episodes').catch(() => []);
    const now = episodes.find((e) => e.episodeId === episodeId);
    const logged = now ? now.callbackAttempts || [] : [];
    if (logged.length > known && (logged[logged.length - 1].result !== 'delivered' || !gaveUp(now))) break;
  }
}

function redeliverButton(runId, episode, status, onRedelivered) {
  const known = (episode.callbackAttempts || []).length;
  const button = h(
    'button',
    {
      type: 'button',
      class: 'button',
      onclick: async () => {
        button.disabled = true;
        status.textContent = 'Redelivering…';
        const path = `${episodesPath(runId)}/${encodeURIComponent(episode.episodeId)}/callback/redeliver`;
        try {
          await api('POST', path);
        } catch (err) {
          if (err.status === 401) return;
          status.textContent = err.message;
          button.disabled = false;
          return;
        }
        await moreAttempts(runId, episode.episodeId, known);
        await onRedelivered();
      },
    },
    'Redeliver',
  );
  return button;
}

function attemptRow(attempt) {
  return h(
    'tr',
    {},
    h('td', {}, `#${attempt.attempt}`, attempt.trigger === 'redeliver' ? ' (Redelivery)' : ''),
    h('td', {}, timeAgo(attempt.at)),
    h('td', {}, attemptAnswer(attempt)),
    h('td', {}, ATTEMPT_RESULT[attempt.result] || humanize(attempt.result)),
    h('td', { class: 'hide-narrow' }, `${attempt.durationMs} ms`),
    h('td', {}, nextTry(attempt)),
  );
}

/** When the schedule tries again after a failed attempt ("in 5 hours", the time on hover); rows logged before the
 * time was kept show the wait. */
const nextTry = (attempt) => {
  if (attempt.nextAttemptAt) return timeAgo(attempt.nextAttemptAt);
  return attempt.nextWaitSeconds !== undefined ? `after ${attempt.nextWaitSeconds} s` : '—';
};

const ATTEMPT_COLUMNS = [
  ['Attempt'],
  ['When'],
  ['Answer'],
  ['Result'],
  ['Took', 'hide-narrow'],
  ['Next try'],
];

/** The episode's attempts, titled by `label`; `onRedelivered` runs once a redelivery's attempt is logged. */
export function callbackAttemptsSection(runId, episode, label, onRedelivered) {
  const status = h('p', { class: 'muted', role: 'status' });
  return h(
    'div',
    { class: 'attempts' },
    dataTable({
      caption: `Callback attempts of ${label}`,
      columns: ATTEMPT_COLUMNS,
      tbody: h('tbody', {}, (episode.callbackAttempts || []).map(attemptRow)),
    }),
    gaveUp(episode) ? redeliverButton(runId, episode, status, onRedelivered) : null,
    status,
  );
}
