// The push routes' bodies, with the fixed messages docs/api.md lists. A subscription's endpoint is a URL the worker will POST
// to, so it is held to the outbound rules here, at the edge, before anything is stored.
import { createPublicKey } from 'node:crypto';
import { z } from 'zod';
import { hostAllowed } from '../delivery/push/sender';
import { canonicalTimeZone, quietHoursProblem, type QuietHours } from '../domain/quietHours';
import { PREF_KINDS, type PrefKind } from '../store/push/notificationPrefs';
import { RECEIPT_EVENTS } from '../store/push/receipts';
import { verbatim } from '../platform/http/validate';

export interface EndpointRules {
  /** PUSH_ALLOW_PRIVATE=1 (test push services) also lets plain http endpoints through. */
  allowInsecure: boolean;
  allowlist: string[];
}

const MAX_ENDPOINT = 2048;
const BASE64URL = /^[A-Za-z0-9_-]+={0,2}$/;

const REQUIRED = 'subscription requires endpoint, keys.p256dh and keys.auth';
const INVALID = 'invalid subscription payload';

/** Absent or empty is "requires"; present but not a string is a bad payload. */
const subscriptionField = z
  .string({ error: (issue) => (issue.input === undefined ? REQUIRED : INVALID) })
  .min(1, REQUIRED);

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

const endpointUrl = (rules: EndpointRules) =>
  subscriptionField
    .max(MAX_ENDPOINT, `subscription endpoint is longer than ${MAX_ENDPOINT} characters`)
    .superRefine((endpoint, ctx) => {
      const refuse = (message: string) => ctx.addIssue({ code: 'custom', message, abort: true });
      let url: URL;
      try {
        url = new URL(endpoint);
      } catch {
        return refuse('subscription endpoint must be an absolute URL');
      }
      if (url.protocol !== 'https:' && !(rules.allowInsecure && url.protocol === 'http:'))
        return refuse('subscription endpoint must be https');
      if (url.username || url.password) return refuse('subscription endpoint must not carry credentials');
      if (!hostAllowed(url.hostname, rules.allowlist))
        return refuse(`subscription endpoint ${url.hostname} is not an allowed push service`);
    });

export function subscribeBody(rules: EndpointRules) {
  return verbatim(
    z.object(
      {
        endpoint: endpointUrl(rules),
        keys: z.object(
          {
            p256dh: subscriptionField.refine(
              isP256Point,
              'keys.p256dh must be a base64url uncompressed P-256 point (65 bytes)',
            ),
            auth: subscriptionField.refine(
              (auth) => BASE64URL.test(auth) && Buffer.from(auth, 'base64url').length === 16,
              'keys.auth must be base64url of 16 bytes',
            ),
          },
          // keys that are not an object hold no p256dh or auth: the fields are missing.
          { error: REQUIRED },
        ),
      },
      { error: INVALID },
    ),
    // Presence first, then types, then each rule (the order the studio relies on); a body that is not JSON is a
    // bad payload.
    { precedence: [REQUIRED, INVALID], ownsBadJson: true },
  );
}

const UNSUBSCRIBE = 'unsubscribe requires {"endpoint": "..."}';
export const unsubscribeBody = verbatim(
  z.object(
    { endpoint: z.string({ error: UNSUBSCRIBE }).min(1, UNSUBSCRIBE).max(MAX_ENDPOINT, UNSUBSCRIBE) },
    { error: UNSUBSCRIBE },
  ),
);

const SCOPE = 'scope must be own or team';
const KINDS = `kinds must map ${PREF_KINDS.join(', ')} to true or false`;
const QUIET =
  'quietHours must be {"start": "HH:MM", "end": "HH:MM", "timeZone": "<IANA zone>", "days"?: ["mon", ...]} or null';
const DND = 'doNotDisturbUntil must be an ISO time (with its offset) or null';
const BREAK_THROUGH = `breakThrough must list kinds among ${PREF_KINDS.join(', ')}`;
/** An ISO 8601 date and time with its zone: a bare date or a local time would be read in the server's zone. */
const ISO_TIME =
  /^(?<y>\d{4})-(?<mo>\d{2})-(?<d>\d{2})T(?<h>\d{2}):(?<mi>\d{2})(:(?<s>\d{2})(\.\d+)?)?(Z|[+-](?<oh>\d{2}):(?<om>\d{2}))$/;

/** An ISO time whose day and time exist: Date.parse moves Feb 30 to March 2 and 24:00 to the next day. */
function isIsoTime(at: string): boolean {
  const parts = ISO_TIME.exec(at)?.groups;
  if (!parts) return false;
  const n = (name: string) => Number(parts[name] ?? 0);
  const day = new Date(Date.UTC(n('y'), n('mo') - 1, n('d')));
  return (
    day.getUTCFullYear() === n('y') &&
    day.getUTCMonth() === n('mo') - 1 &&
    day.getUTCDate() === n('d') &&
    n('h') <= 23 &&
    n('mi') <= 59 &&
    n('s') <= 59 &&
    n('oh') <= 23 &&
    n('om') <= 59
  );
}

/**
 * ValidScope, and the optional per-kind switches: a body without kinds is the original one, with its fixed message;
 * a bad scope is still answered first.
 */
export const prefsBody = verbatim(
  z.object(
    {
      scope: z.enum(['own', 'team'], { error: SCOPE }),
      kinds: z
        .strictObject(
          Object.fromEntries(
            PREF_KINDS.map((kind) => [kind, z.boolean({ error: KINDS }).optional()]),
          ) as Record<PrefKind, z.ZodOptional<z.ZodBoolean>>,
          { error: KINDS },
        )
        .optional(),
      quietHours: z
        .strictObject(
          {
            // Bounded before they are checked: a refusal names what was sent.
            start: z.string({ error: QUIET }).max(16, QUIET),
            end: z.string({ error: QUIET }).max(16, QUIET),
            timeZone: z.string({ error: QUIET }).max(64, QUIET),
            days: z.array(z.string({ error: QUIET }).max(16, QUIET), { error: QUIET }).optional(),
          },
          { error: QUIET },
        )
        .superRefine((quiet, ctx) => {
          const problem = quietHoursProblem(quiet as QuietHours);
          if (problem) ctx.addIssue({ code: 'custom', message: problem });
        })
        // Stored by its canonical name: one zone, one spelling (and one cached formatter in every worker).
        .transform((quiet) => ({ ...quiet, timeZone: canonicalTimeZone(quiet.timeZone)! }) as QuietHours)
        .nullable()
        .optional(),
      doNotDisturbUntil: z
        .string({ error: DND })
        .refine(isIsoTime, DND)
        .transform((at) => new Date(at))
        .nullable()
        .optional(),
      breakThrough: z
        .array(z.enum(PREF_KINDS, { error: BREAK_THROUGH }), { error: BREAK_THROUGH })
        .optional(),
    },
    { error: SCOPE },
  ),
  { precedence: [SCOPE, KINDS, QUIET, DND, BREAK_THROUGH] },
);

/** A device is named by its subscription's id (sha256 hex of the endpoint); any other id names no device (404). */
export const deviceParams = z.object({ id: z.string() });
export const isDeviceId = (id: string): boolean => /^[0-9a-f]{64}$/.test(id);

/**
 * A service worker's receipt: the push's receipt token (32 random bytes, base64url; never echoed in an error), the
 * event, and for `action` the action taken (a choice id, or the notification's own action).
 */
export const receiptBody = z
  .strictObject({
    token: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'token must be a receipt token'),
    event: z.enum(RECEIPT_EVENTS, { error: `event must be one of ${RECEIPT_EVENTS.join(', ')}` }),
    action: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,32}$/, 'action must be 1 to 32 letters, digits, or _ . -')
      .optional(),
  })
  .refine((body) => (body.event === 'action') === (body.action !== undefined), {
    message: 'action is given with the event action, and only with it',
    path: ['action'],
  });
