// Validation of the push routes' bodies, with the seed's exact messages. A subscription's endpoint is a URL the
// worker will POST to, so it is held to the outbound rules here, at the edge, before anything is stored.
import { createPublicKey } from 'node:crypto';
import { HttpError } from './errors';
import { hostAllowed } from '../net/pushSender';
import type { NotificationScope } from '../store/notificationPrefs';

export interface EndpointRules {
  /** PUSH_ALLOW_PRIVATE=1 (test push services) also lets plain http endpoints through. */
  allowInsecure: boolean;
  allowlist: string[];
}

export interface SubscriptionInput {
  endpoint: string;
  keys: { p256dh: string; auth: string };
}

const MAX_ENDPOINT = 2048;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

function decodedLength(value: string): number | undefined {
  return BASE64URL.test(value) ? Buffer.from(value, 'base64url').length : undefined;
}

/** 65 bytes, uncompressed (0x04), and on the curve: a bad key fails here, not in the worker's encryption. */
function isP256Point(value: string): boolean {
  const point = BASE64URL.test(value) ? Buffer.from(value, 'base64url') : undefined;
  if (!point || point.length !== 65 || point[0] !== 0x04) return false;
  try {
    createPublicKey({
      key: {
        kty: 'EC',
        crv: 'P-256',
        x: point.subarray(1, 33).toString('base64url'),
        y: point.subarray(33).toString('base64url'),
      },
      format: 'jwk',
    });
    return true;
  } catch {
    return false;
  }
}

export function parseSubscribeBody(body: unknown, rules: EndpointRules): SubscriptionInput {
  if (!isObject(body)) throw new HttpError(400, 'invalid subscription payload');
  const { endpoint, keys } = body;
  const p256dh = isObject(keys) ? keys.p256dh : undefined;
  const auth = isObject(keys) ? keys.auth : undefined;
  if (
    endpoint === undefined ||
    endpoint === '' ||
    p256dh === undefined ||
    p256dh === '' ||
    auth === undefined ||
    auth === ''
  ) {
    throw new HttpError(400, 'subscription requires endpoint, keys.p256dh and keys.auth');
  }
  if (typeof endpoint !== 'string' || typeof p256dh !== 'string' || typeof auth !== 'string') {
    throw new HttpError(400, 'invalid subscription payload');
  }
  if (endpoint.length > MAX_ENDPOINT)
    throw new HttpError(400, `subscription endpoint is longer than ${MAX_ENDPOINT} characters`);
  let url: URL;
  try {
    url = new URL(endpoint);
  } catch {
    throw new HttpError(400, 'subscription endpoint must be an absolute URL');
  }
  if (url.protocol !== 'https:' && !(rules.allowInsecure && url.protocol === 'http:')) {
    throw new HttpError(400, 'subscription endpoint must be https');
  }
  if (url.username || url.password)
    throw new HttpError(400, 'subscription endpoint must not carry credentials');
  if (!hostAllowed(url.hostname, rules.allowlist)) {
    throw new HttpError(400, `subscription endpoint ${url.hostname} is not an allowed push service`);
  }
  if (!isP256Point(p256dh)) {
    throw new HttpError(400, 'keys.p256dh must be a base64url uncompressed P-256 point (65 bytes)');
  }
  if (decodedLength(auth) !== 16) throw new HttpError(400, 'keys.auth must be base64url of 16 bytes');
  return { endpoint, keys: { p256dh, auth } };
}

export function parseUnsubscribeBody(body: unknown): { endpoint: string } {
  if (
    !isObject(body) ||
    typeof body.endpoint !== 'string' ||
    !body.endpoint ||
    body.endpoint.length > MAX_ENDPOINT
  ) {
    throw new HttpError(400, 'unsubscribe requires {"endpoint": "..."}');
  }
  return { endpoint: body.endpoint };
}

/** ValidScope. */
export function parsePrefsBody(body: unknown): { scope: NotificationScope } {
  const scope = isObject(body) ? body.scope : undefined;
  if (scope !== 'own' && scope !== 'team') throw new HttpError(400, 'scope must be own or team');
  return { scope };
}
