// Who is signed in (the top bar), the sign-in form, and signing out.
import { api, claimsOf, forgetToken, getToken, keepToken } from '../shared/api.js';
import { account, h, main } from '../shared/dom.js';
import { disablePushQuietly } from '../shared/push.js';
import { route } from '../shared/router.js';

export function renderAccount() {
  account.replaceChildren();
  const token = getToken();
  if (!token) return;
  const claims = claimsOf(token);
  account.append(
    h(
      'span',
      { class: 'who' },
      h('span', { class: 'avatar', 'aria-hidden': 'true' }, (claims.sub || '?').slice(0, 1).toUpperCase()),
      h(
        'span',
        { class: 'who-text' },
        h('strong', {}, claims.sub || 'Signed in'),
        claims.team ? h('span', { class: 'muted' }, ` · ${claims.team}`) : null,
      ),
    ),
    h('button', { type: 'button', class: 'button button-quiet', onclick: () => signOut() }, 'Sign out'),
  );
}

/** The user signs out: this browser stops receiving their notifications, then forgets the token. */
async function signOut() {
  await disablePushQuietly();
  forgetToken();
  renderAccount();
  renderSignIn();
}

/**
 * The server refused the token (expired or revoked). Notifications are left alone: the user did not ask to
 * stop them, and signing in again re-POSTs the subscription under the new token (refreshPush resyncs it).
 */
export function sessionEnded(reason) {
  forgetToken();
  renderAccount();
  renderSignIn(reason);
}

export function renderSignIn(reason) {
  document.title = 'Sign in · Flow Studio';
  const field = h('textarea', {
    id: 'token',
    name: 'token',
    rows: 4,
    required: true,
    spellcheck: 'false',
    autocomplete: 'off',
    'aria-describedby': 'token-help',
    placeholder: 'eyJhbGciOiJIUzI1NiIs…',
  });
  const error = h('p', { class: 'message message-error', role: 'alert', hidden: !reason }, reason || '');
  const submit = h('button', { type: 'submit', class: 'button button-primary' }, 'Sign in');
  const form = h(
    'form',
    { class: 'card signin', novalidate: true },
    h('h1', {}, 'Sign in to Flow Studio'),
    h(
      'p',
      { class: 'muted', id: 'token-help' },
      'Paste the access token you were given. It is kept in this browser until you sign out. ',
      'On a local server, ',
      h('code', {}, 'npm run token -- --user <you> --team <team>'),
      ' prints one.',
    ),
    h('label', { for: 'token' }, 'Access token'),
    field,
    error,
    h('div', { class: 'actions' }, submit),
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    signIn(field, error, submit);
  });
  main.replaceChildren(form);
  field.focus();
}

/** Proves the pasted token with one call before keeping it, then shows the page the address names. */
async function signIn(field, error, submit) {
  const token = field.value.trim();
  error.hidden = true;
  if (!token) {
    error.textContent = 'Paste a token first.';
    error.hidden = false;
    field.focus();
    return;
  }
  submit.disabled = true;
  submit.textContent = 'Checking…';
  try {
    await api('GET', '/runs', undefined, token);
    keepToken(token);
    renderAccount();
    route();
  } catch (err) {
    error.textContent =
      err.status === 401 ? `That token was refused: ${err.message}.` : err.message || String(err);
    error.hidden = false;
    submit.disabled = false;
    submit.textContent = 'Sign in';
  }
}
