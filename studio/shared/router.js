// Routes on location.pathname (the API serves index.html for every non-API path):
//   /              the runs and the notification settings
//   /runs/<id>     one run and its outcome episodes
//   /endpoints     the team's endpoints (team admins)
// The views are handed in by app.js (setViews), so the views may call route() without importing each other.
import { getToken } from './api.js';

let views = {};

/** { signIn, home, run(runId), endpoints, notFound }: each draws its page into main. */
export function setViews(pages) {
  views = pages;
}

export function currentRunId() {
  const match = /^\/runs\/([^/]+)\/?$/.exec(location.pathname);
  return match ? decodeURIComponent(match[1]) : undefined;
}

export function route() {
  if (!getToken()) return views.signIn();
  const path = location.pathname;
  if (path === '/' || path === '/index.html') return views.home();
  if (path === '/endpoints' || path === '/endpoints/') return views.endpoints();
  const runId = currentRunId();
  if (runId) return views.run(runId);
  return views.notFound();
}
