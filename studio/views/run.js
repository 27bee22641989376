// A run's page (the deep link notifications open): its facts, the timeline of its pauses (asked, notified, shown,
// clicked, answered), who saw each pause on which device, its outcome episodes with each family's claim, and the
// callback attempts of the episodes that made any.
import { allPages, api, claimsOf, getToken } from '../shared/api.js';
import { dataTable, errorCard, h, humanize, main, messageLine, statusBadge, timeAgo } from '../shared/dom.js';
import { currentRunId } from '../shared/router.js';
import { callbackAttemptsSection } from './attempts.js';

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

/** The run's id is the page's subject: an episode shows what follows it (input:<iid>, park:<wall>:<n>, end). */
const shortId = (run, episode) =>
  String(episode.episodeId).startsWith(`${run.id}:`)
    ? episode.episodeId.slice(run.id.length + 1)
    : episode.episodeId;

const FAMILY_STATE = { delivered: 'Delivered', pending: 'Pending', absent: '—' };
const FAMILY_RESULT = {
  delivered: 'Delivered',
  redelivered: 'Redelivered',
  not_addressable: 'Nobody to notify',
  not_owed: 'Not owed',
};

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
  return h(
    'td',
    {},
    h('span', { class: `pill pill-${state}`, title }, label),
    family === 'push' ? heldNote(episode) : '',
  );
}

/** Recipients held for their digest (quiet hours, do-not-disturb, a burst) and the digest each went out in. */
function heldNote(episode) {
  const held = Array.isArray(episode.pushHeld) ? episode.pushHeld : [];
  if (!held.length) return '';
  const lines = held.map((x) => {
    const why = x.reason === 'burst' ? 'too many pushes at once' : 'quiet hours or do not disturb';
    const where = x.digestSentAt
      ? `went out in digest ${x.digestId}`
      : x.digestGaveUpAt
        ? `digest ${x.digestId} gave up: no device took it for a day`
        : x.optedOutAt
          ? 'opted out since (kind turned off, or own runs only): not told'
          : x.digestId
            ? `digest ${x.digestId} is sending`
            : `waits for the digest (due ${new Date(x.releaseAt).toLocaleString()})`;
    return `${x.userId}: held (${why}), ${where}`;
  });
  return h(
    'span',
    { class: 'held-note', title: lines.join('\n'), 'data-held': String(held.length) },
    ` ${held.length} held for a digest`,
  );
}

function episodeRow(run, episode) {
  return h(
    'tr',
    { 'data-episode-id': episode.episodeId },
    h('td', {}, h('code', { class: 'episode-id', title: episode.episodeId }, shortId(run, episode))),
    h('td', {}, episodeLabel(episode)),
    h('td', { class: 'hide-narrow' }, timeAgo(episode.recordedAt)),
    ...['push', 'callback', 'ops'].map((family) => familyCell(episode, family)),
  );
}

/**
 * The question the run waits on, answered here by the signed-in person (the page a notification opens): a button per
 * choice, or a written answer when it offers none. Answered, the page shows the run as it is now.
 */
/**
 * Written answers not sent yet, by person and question: the page is drawn again whenever the tab is shown or a push
 * for the run arrives, and what the person was writing must outlive that (and never reach the next one signed in).
 */
const drafts = new Map();
const draftKey = (interactionId) => JSON.stringify([claimsOf(getToken()).sub, interactionId]);

function questionCard(run, question) {
  const line = messageLine();
  const answerWith = async (answer) => {
    try {
      const path = `/runs/${encodeURIComponent(run.id)}/interactions/${encodeURIComponent(question.interactionId)}/answer`;
      await api('POST', path, { answer });
      drafts.delete(draftKey(question.interactionId));
      await renderRun(run.id);
    } catch (err) {
      if (err.status !== 401) line.say('error', `The answer was not taken: ${err.message}`);
    }
  };
  let answering;
  if (question.choices) {
    answering = h(
      'div',
      { class: 'actions' },
      question.choices.map((choice) =>
        h('button', { type: 'button', class: 'button', onclick: () => answerWith(choice.id) }, choice.label),
      ),
    );
  } else {
    const text = h('textarea', {
      id: 'question-answer',
      rows: 3,
      maxlength: 100000,
      required: true,
      oninput: () => drafts.set(draftKey(question.interactionId), text.value),
    });
    text.value = drafts.get(draftKey(question.interactionId)) ?? '';
    answering = h(
      'form',
      {
        onsubmit: (event) => {
          event.preventDefault();
          if (text.value.trim()) answerWith(text.value);
        },
      },
      h('label', { for: 'question-answer' }, 'Your answer'),
      text,
      h(
        'div',
        { class: 'actions' },
        h('button', { type: 'submit', class: 'button button-primary' }, 'Answer'),
      ),
    );
  }
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'question-title' },
    h('h2', { id: 'question-title' }, 'Waiting for your answer'),
    h('blockquote', { class: 'answer' }, question.prompt),
    answering,
    line,
  );
}

/** The facts list and what the run ended with (its pause, final answer or error). */
function detailsCard(run) {
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
  return h(
    'section',
    { class: 'card', 'aria-label': 'Run details' },
    h(
      'dl',
      { class: 'facts' },
      facts.map(([term, value]) => h('div', {}, h('dt', {}, term), h('dd', {}, value))),
    ),
    detail,
  );
}

const EPISODE_COLUMNS = [
  ['Episode'],
  ['Outcome'],
  ['Recorded', 'hide-narrow'],
  ['Push'],
  ['Callback'],
  ['Operator'],
];

function episodesCard(run, episodes) {
  return h(
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
      : dataTable({
          caption: 'Outcome episodes of this run',
          captionHidden: true,
          columns: EPISODE_COLUMNS,
          tbody: h(
            'tbody',
            {},
            episodes.map((episode) => episodeRow(run, episode)),
          ),
        }),
  );
}

const TIMELINE_TEXT = {
  paused: (e) => ['Asked', e.detail ? `“${e.detail}”` : ''],
  notified: (e) => [
    'Notified',
    `${e.userId} on device ${deviceName(e.subscriptionId)}${e.receipt === 'none' ? ' (no receipt from this device)' : ''}`,
  ],
  shown: (e) => ['Shown', `to ${e.userId} on device ${deviceName(e.subscriptionId)}`],
  clicked: (e) => ['Clicked', `by ${e.userId} on device ${deviceName(e.subscriptionId)}`],
  action: (e) => ['Action', `${e.detail} by ${e.userId} from the notification`],
  answered: (e) => ['Answered', `${e.userId ? `by ${e.userId}` : ''}${e.detail ? `: “${e.detail}”` : ''}`],
  rung: (e) => [
    `Escalation rung ${e.rung}`,
    [e.via ? `via ${e.via}` : '', e.detail || ''].filter(Boolean).join(' '),
  ],
};

/** A device is a push subscription: its id's first characters tell the person's devices apart. */
const deviceName = (subscriptionId) => String(subscriptionId || '').slice(0, 8);

function timelineCard(timeline) {
  const entries = timeline.entries || [];
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'timeline-title' },
    h('h2', { id: 'timeline-title' }, 'Timeline'),
    entries.length === 0
      ? h('p', { class: 'empty' }, 'No pauses yet: nobody has been asked anything.')
      : h(
          'ol',
          { class: 'timeline' },
          entries.map((entry) => {
            const [label, text] = (TIMELINE_TEXT[entry.kind] || (() => [humanize(entry.kind), '']))(entry);
            return h(
              'li',
              { 'data-kind': entry.kind },
              timeAgo(entry.at),
              ' ',
              h('strong', {}, label),
              text ? ` ${text}` : '',
            );
          }),
        ),
    timeline.truncated ? h('p', { class: 'muted' }, 'Older pauses are left out.') : '',
  );
}

/** A receipt time, or what is known: "no receipt" when the device reported nothing (never a guess). */
const seenCell = (device, at) =>
  h(
    'td',
    {},
    at ? timeAgo(at) : device.receipt === 'none' ? h('span', { class: 'muted' }, 'no receipt') : '—',
  );

/** Per pause, per person and device: sent, shown, clicked, answered. */
function devicesCard(run, episodes) {
  const rows = episodes
    .filter((episode) => String(episode.episodeId).includes(':input:'))
    .flatMap((episode) =>
      (episode.pushDevices || []).map((device) =>
        h(
          'tr',
          { 'data-device': device.subscriptionId, 'data-episode-id': episode.episodeId },
          h('td', {}, h('code', {}, shortId(run, episode))),
          h('td', {}, device.userId),
          h('td', {}, h('code', { title: device.subscriptionId }, deviceName(device.subscriptionId))),
          h('td', {}, timeAgo(device.sentAt)),
          seenCell(device, device.shownAt),
          seenCell(device, device.clickedAt),
          h('td', {}, device.answeredAt ? timeAgo(device.answeredAt) : '—'),
        ),
      ),
    );
  if (rows.length === 0) return [];
  return [
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'devices-title' },
      h('h2', { id: 'devices-title' }, 'Who saw each pause'),
      h(
        'p',
        { class: 'muted' },
        'Shown and clicked come from the device itself. A browser that shows the notification without our ' +
          'service worker sends nothing back: its row says “no receipt”.',
      ),
      dataTable({
        caption: 'Each device a pause was pushed to',
        captionHidden: true,
        columns: [['Pause'], ['Person'], ['Device'], ['Sent'], ['Shown'], ['Clicked'], ['Answered']],
        tbody: h('tbody', {}, rows),
      }),
    ),
  ];
}

/** The card of callback attempts, or none when no episode made an attempt (a run without a callback). */
function callbacksCards(run, episodes) {
  const redrawn = async () => {
    if (currentRunId() === run.id) await renderRun(run.id);
  };
  const sections = episodes
    .filter((episode) => (episode.callbackAttempts || []).length > 0)
    .map((episode) => callbackAttemptsSection(run.id, episode, shortId(run, episode), redrawn));
  if (sections.length === 0) return [];
  return [
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
      sections,
    ),
  ];
}

export async function renderRun(runId) {
  const back = h('a', { href: '/', class: 'back' }, '← All runs');
  // Drawn again (the tab shown, a push for it): the page stays as it is until the new one is ready.
  const again = main.querySelector('.run-head')?.dataset.runId === runId;
  if (!again) {
    document.title = 'Run · Flow Studio';
    main.replaceChildren(back, h('p', { class: 'muted' }, 'Loading the run…'));
  }
  let run;
  let episodes;
  let timeline;
  try {
    // The API pages episodes newest first; a run has few, so the page shows them all, oldest first.
    [run, episodes, timeline] = await Promise.all([
      api('GET', `/runs/${encodeURIComponent(runId)}`),
      allPages(`/runs/${encodeURIComponent(runId)}/episodes`, 'episodes').then((rows) => rows.reverse()),
      api('GET', `/runs/${encodeURIComponent(runId)}/timeline`),
    ]);
  } catch (err) {
    if (err.status === 401) return;
    const text = err.status === 404 ? 'There is no such run in your team.' : err.message;
    main.replaceChildren(back, errorCard('Run not found', text));
    return;
  }
  document.title = `${run.title || run.id} · Flow Studio`;
  const writing = document.activeElement?.id === 'question-answer';
  // Every child is an element: DOM replaceChildren (unlike h()) would print a null as the text "null".
  main.replaceChildren(
    back,
    h(
      'div',
      { class: 'page-head run-head', 'data-run-id': run.id },
      h('h1', {}, run.title || run.id),
      statusBadge(run.status),
    ),
    detailsCard(run),
    ...(timeline.question ? [questionCard(run, timeline.question)] : []),
    timelineCard(timeline),
    ...devicesCard(run, episodes),
    episodesCard(run, episodes),
    ...callbacksCards(run, episodes),
  );
  const answer = writing ? document.getElementById('question-answer') : null;
  if (answer) {
    answer.focus();
    answer.setSelectionRange(answer.value.length, answer.value.length);
  }
}
