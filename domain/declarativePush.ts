// What a push carries on the wire: our payload (read by the studio's service worker) and beside it the Declarative
// Web Push form (W3C Push API, shipped in Safari 18.4+), which a browser that knows it shows without any service
// worker. `mutable: true` lets a service worker that is installed take the push as before (it shows our
// notification, with actions that answer in place); the declarative notification is then only the fallback.
// No Node builtins: pure.
import { SNOOZE_ACTION } from './interaction';
import { cutCodePoints } from './text';
import type { PushPayload } from './push';

/**
 * The largest plaintext we send: RFC 8291's 4,096-octet record less its header (86 octets) and padding delimiter
 * leaves 4,009; the rest is headroom for push services that count differently.
 */
export const PUSH_PAYLOAD_MAX_BYTES = 3800;

/**
 * The longest STUDIO_URL: each push carries its run page's link in both forms and in each declarative action, and
 * links are never cut, so an unbounded base could leave nothing of the budget for the title and body.
 */
export const STUDIO_URL_MAX_LENGTH = 200;

/** The Push API's declarative push message (only the members we use). */
export interface DeclarativePushMessage {
  web_push: 8030;
  notification: {
    title: string;
    body: string;
    /** Where activating the notification goes (required by the format). */
    navigate: string;
    tag: string;
    /** Alert again though it replaces a notification of the same tag (a rung, a snooze). */
    renotify?: boolean;
    /** No sound or vibration: someone answered the question it replaces. */
    silent?: boolean;
    require_interaction?: boolean;
    actions?: { action: string; title: string; navigate: string }[];
  };
  mutable: true;
}

export type WirePushPayload = PushPayload & DeclarativePushMessage;

/** Our payload with its declarative form beside it (the same words, links and tag). */
export function withDeclarativeForm(payload: PushPayload): WirePushPayload {
  const waitsForAnswer = payload.kind === 'human_input_requested';
  const answering = (payload.actions ?? []).filter(({ action }) => action !== SNOOZE_ACTION);
  return {
    ...payload,
    web_push: 8030,
    notification: {
      title: payload.title,
      body: payload.body,
      navigate: payload.url,
      tag: payload.tag,
      ...(payload.renotify ? { renotify: true } : {}),
      ...(payload.kind === 'answered' ? { silent: true } : {}),
      ...(waitsForAnswer ? { require_interaction: true } : {}),
      // A declarative action can only open a page: each choice opens the run, where the person answers (signed
      // in). Snooze is left out: a button that opens the page would snooze nothing.
      ...(answering.length
        ? { actions: answering.map(({ action, title }) => ({ action, title, navigate: payload.url })) }
        : {}),
    },
    mutable: true,
  };
}

const byteLength = (value: unknown): number => new TextEncoder().encode(JSON.stringify(value)).length;

/**
 * The wire form within PUSH_PAYLOAD_MAX_BYTES. What gives way, in order: the body (in both forms), then the title,
 * then the declarative actions (they only open the run page, which the notification itself opens), then a digest's
 * count (a service worker then shows it in place of an earlier digest, not with it). Tokens, links and ids are
 * never cut: without them the push does nothing (STUDIO_URL_MAX_LENGTH keeps them within the budget).
 */
export function fitWirePayload(payload: PushPayload, maxBytes = PUSH_PAYLOAD_MAX_BYTES): WirePushPayload {
  let fitted = withDeclarativeForm(payload);
  for (const field of ['body', 'title'] as const) {
    let keep = Array.from(fitted[field]).length;
    while (keep > 0 && byteLength(fitted) > maxBytes) {
      // Each code point kept costs at most 12 bytes (6 escaped, in both forms): cut at least the overflow's share.
      keep = Math.max(0, keep - Math.max(1, Math.ceil((byteLength(fitted) - maxBytes) / 12)));
      fitted = withDeclarativeForm({
        ...payload,
        body: fitted.body,
        title: fitted.title,
        [field]: cutCodePoints(payload[field], keep),
      });
    }
  }
  if (byteLength(fitted) > maxBytes && fitted.notification.actions) {
    fitted = { ...fitted, notification: { ...fitted.notification, actions: undefined } };
  }
  if (byteLength(fitted) > maxBytes && fitted.count !== undefined) fitted = { ...fitted, count: undefined };
  return fitted;
}
