// The Flow API as the signed-in user: the token this browser keeps, its claims (for display), and JSON calls.
// A 401 on the current token ends the session; what that shows is the caller's to decide (onSessionEnded), so
// this module depends on no view.

const API = '/api/v1';
const TOKEN_KEY = 'flow.studio.token';

export const getToken = () => localStorage.getItem(TOKEN_KEY) || '';
export const keepToken = (token) => localStorage.setItem(TOKEN_KEY, token);
export const forgetToken = () => localStorage.removeItem(TOKEN_KEY);

let sessionEnded = () => {};
/** What to do when the server refuses the signed-in user's token (expired or revoked). */
export function onSessionEnded(handler) {
  sessionEnded = handler;
}

export function base64UrlToBytes(text) {
  const base64 = (text + '='.repeat((4 - (text.length % 4)) % 4)).replace(/-/g, '+').replace(/_/g, '/');
  return Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
}

/** The token's claims (sub, team, exp), read for display only: the server is what checks the signature. */
export function claimsOf(token) {
  try {
    const part = token.split('.')[1];
    const json = new TextDecoder().decode(base64UrlToBytes(part));
    const claims = JSON.parse(json);
    return claims && typeof claims === 'object' ? claims : {};
  } catch {
    return {};
  }
}

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

/** A JSON call as the signed-in user. A 401 signs the user out and shows why. */
export async function api(method, path, body, token = getToken()) {
  let res;
  try {
    res = await fetch(API + path, {
      method,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    throw new ApiError(0, 'The Flow server could not be reached. Check your connection and try again.');
  }
  const data = await jsonOf(res);
  if (!res.ok) {
    const message = (data && data.error) || `The server answered ${res.status}.`;
    if (res.status === 401 && token && token === getToken()) {
      sessionEnded(`Your session ended (${message}). Paste a new token to continue.`);
    }
    throw new ApiError(res.status, message);
  }
  return data;
}

/** The answer's JSON body, or undefined when it has none (or it is not JSON). */
async function jsonOf(res) {
  const text = await res.text();
  try {
    return text ? JSON.parse(text) : undefined;
  } catch {
    return undefined;
  }
}

/** Every page of a listing (for short ones: a user's devices, a run's episodes). */
export async function allPages(path, key) {
  const rows = [];
  let before;
  for (let page = 0; page < 50; page++) {
    const query = before ? `?before=${encodeURIComponent(before)}` : '';
    const answer = await api('GET', `${path}${query}`);
    rows.push(...answer[key]);
    before = answer.nextBefore;
    if (!before) break;
  }
  return rows;
}
