// The home page: the runs list beside the notifications card.
import { h, main } from '../shared/dom.js';
import { loadPushPanel, mountPushPanel, renderPushPanel } from './notifications.js';
import { loadRuns, recoverCard, runsCard } from './runs.js';

export async function renderHome() {
  document.title = 'Runs · Flow Studio';
  const pushPanel = mountPushPanel();
  const runs = runsCard();
  main.replaceChildren(
    h(
      'div',
      { class: 'page-head' },
      h('h1', {}, 'Runs'),
      h(
        'p',
        { class: 'muted' },
        'Everything your team launched, newest first. ',
        h('a', { href: '/endpoints' }, 'Endpoints'),
        ': the systems that hear about every run.',
      ),
    ),
    h('div', { class: 'layout' }, h('div', { class: 'stack' }, runs, recoverCard()), pushPanel),
  );
  renderPushPanel();
  await Promise.all([loadPushPanel(), loadRuns(runs)]);
}
