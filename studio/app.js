// Flow Studio: a signed-in user's runs, a run's page (the deep link notifications open), the controls that
// turn this browser's push notifications on and off, and the team's endpoints (for its admins). Plain browser
// JavaScript: no framework, no build step.
// This entry module wires the views (views/) to the router and the shared modules (shared/), and keeps the
// page current when a push arrives or the tab comes back into view.
import { getToken, onSessionEnded } from './shared/api.js';
import { errorCard, h, main } from './shared/dom.js';
import { currentRunId, route, setViews } from './shared/router.js';
import { renderEndpoints } from './views/endpoints.js';
import { renderHome } from './views/home.js';
import { forgetPushPanel } from './views/notifications.js';
import { renderRun } from './views/run.js';
import { loadRuns } from './views/runs.js';
import { renderAccount, renderSignIn, sessionEnded } from './views/signin.js';

function renderNotFound() {
  document.title = 'Not found · Flow Studio';
  main.replaceChildren(
    h('a', { href: '/', class: 'back' }, '← All runs'),
    errorCard('Page not found', 'There is nothing at this address.'),
  );
}

/** A run's page replaces the home page, and with it the notifications card. */
function showRun(runId) {
  forgetPushPanel();
  return renderRun(runId);
}

/** The endpoints page replaces the home page, and with it the notifications card. */
function showEndpoints() {
  forgetPushPanel();
  return renderEndpoints();
}

setViews({
  signIn: () => renderSignIn(),
  home: renderHome,
  run: showRun,
  endpoints: showEndpoints,
  notFound: renderNotFound,
});
onSessionEnded((reason) => {
  forgetPushPanel();
  sessionEnded(reason);
});

let refreshing = false;
async function refreshView() {
  if (refreshing || !getToken()) return;
  refreshing = true;
  try {
    const runId = currentRunId();
    if (runId) await showRun(runId);
    else {
      const card = main.querySelector('.runs');
      if (card) await loadRuns(card);
    }
  } finally {
    refreshing = false;
  }
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
document.addEventListener('visibilitychange', () => {
  if (document.visibilityState === 'visible') refreshView();
});

renderAccount();
route();
