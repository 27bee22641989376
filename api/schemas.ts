// Request bodies and path parameters of the runs and watches routes, validated at the edge (platform/http/validate.ts). Unknown fields are refused so a typo is an error, not a silent no-op.
import { z } from 'zod';
import {
  ESCALATION_MAX_RUNGS,
  ESCALATION_MAX_SECONDS,
  ESCALATION_MAX_USERS,
  SNOOZE_ACTION,
} from '../domain/interaction';
import { ID_SEPARATOR, isId, MAX_ID_BYTES } from '../domain/ids';
import { CALLBACK_EVENTS } from '../domain/run';
import { RESERVED_EVENT_TYPES } from '../runs/service';
import { decodeCursor } from '../store/paging';

const id = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_.:-]+$/, 'must be letters, digits, or _ . : -');
const text = (max: number) => z.string().max(max);
/** A person as their token names them (api/auth.ts holds tokens to the same). */
const userId = z
  .string()
  .refine(isId, `a user id is 1–${MAX_ID_BYTES} bytes (UTF-8) without control characters`)
  .refine((user) => !user.includes(ID_SEPARATOR), `a user id holds no "${ID_SEPARATOR}"`);

export const callbackUrl = z
  .string()
  .max(2048)
  .refine((value) => {
    try {
      const url = new URL(value);
      return (
        (url.protocol === 'http:' || url.protocol === 'https:') &&
        !url.username &&
        !url.password &&
        !!url.hostname
      );
    } catch {
      return false;
    }
  }, 'callback url must be an absolute http(s) URL without credentials');

/** One rung of an escalation ladder: when after the pause, to whom, how. */
const escalationRung = z.strictObject({
  afterSeconds: z
    .number()
    .int()
    .positive()
    .max(ESCALATION_MAX_SECONDS, `afterSeconds: at most ${ESCALATION_MAX_SECONDS} (7 days)`),
  to: z.union([
    z.enum(['team', 'owner']),
    z
      .array(userId)
      .min(1, 'to: name at least one user')
      .max(ESCALATION_MAX_USERS, `to: at most ${ESCALATION_MAX_USERS} users`),
  ]),
  via: z.enum(['push', 'webhook']),
});

const escalationRungs = z
  .array(escalationRung)
  .max(ESCALATION_MAX_RUNGS, `at most ${ESCALATION_MAX_RUNGS} rungs`)
  .refine(
    (rungs) => new Set(rungs.map((rung) => rung.afterSeconds)).size === rungs.length,
    'rungs: each at its own afterSeconds',
  );

/** A team's escalation policy; webhook rungs need the webhookUrl. */
export const escalationPolicyBody = z
  .strictObject({ rungs: escalationRungs, webhookUrl: callbackUrl.optional() })
  .refine(
    (policy) => policy.webhookUrl !== undefined || policy.rungs.every((rung) => rung.via !== 'webhook'),
    "a via: webhook rung needs the policy's webhookUrl",
  );

/** whsec_ and the padded base64 of 24 to 64 bytes (the key the signature is made with): 32 to 88 characters. */
const CALLBACK_SECRET_MAX = 'whsec_'.length + 88;
const CALLBACK_SECRET_RULE = 'callback secret must be whsec_ followed by the base64 of 24 to 64 bytes';
function isCallbackSecret(secret: string): boolean {
  const base64 = /^whsec_((?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)$/.exec(secret)?.[1];
  if (base64 === undefined) return false;
  const bytes = Buffer.byteLength(base64, 'base64');
  return bytes >= 24 && bytes <= 64;
}

export const createRunBody = z.strictObject({
  title: text(500).optional(),
  callback: z
    .strictObject({
      url: callbackUrl,
      secret: z
        .string()
        .max(CALLBACK_SECRET_MAX, CALLBACK_SECRET_RULE)
        .refine(isCallbackSecret, CALLBACK_SECRET_RULE)
        .optional(),
      events: z
        .array(z.enum(CALLBACK_EVENTS))
        .min(1, 'callback events: name at least one (omit the field for all)')
        .max(CALLBACK_EVENTS.length)
        .refine((events) => new Set(events).size === events.length, 'callback events must not repeat')
        .optional(),
    })
    .optional(),
  budget: z.strictObject({ limit: z.number().positive().finite() }).optional(),
  watchedIssueIds: z.array(id).max(100).optional(),
  /** This run's own ladder in place of the team's (its webhook rungs post to the team's URL). */
  escalation: z.strictObject({ rungs: escalationRungs }).optional(),
});

/** A choice a notification offers: its id becomes the answer; as many as a notification shows actions. */
const choice = z.strictObject({
  id: z
    .string()
    .regex(/^[A-Za-z0-9_.-]{1,32}$/, 'a choice id must be 1 to 32 letters, digits, or _ . -')
    .refine(
      (id) => id !== SNOOZE_ACTION,
      `a choice id must not be "${SNOOZE_ACTION}" (the notification's own action)`,
    ),
  label: z
    .string()
    .max(40, 'a choice label is at most 40 characters')
    .refine((label) => label.trim().length > 0, 'a choice label must not be blank'),
});

export const pauseBody = z.strictObject({
  prompt: text(10_000).min(1),
  choices: z
    .array(choice)
    .min(1, 'choices: name at least one (omit the field for none)')
    .max(3, 'at most 3 choices')
    .refine(
      (choices) => new Set(choices.map((c) => c.id)).size === choices.length,
      'choice ids must not repeat',
    )
    .optional(),
});

/** A notification's action token (32 random bytes, base64url); never echoed in an error. */
export const actionBody = z.strictObject({
  token: z.string().regex(/^[A-Za-z0-9_-]{43}$/, 'token must be an action token'),
});
export const answerBody = z.strictObject({ answer: text(100_000) });
export const parkBody = z.strictObject({
  wall: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'wall must be a usage cap name'),
});
export const completeBody = z.strictObject({ finalAnswer: text(1_000_000) });
export const failBody = z.strictObject({
  error: z.strictObject({ code: text(128).min(1), message: text(10_000) }),
});

export const eventBody = z
  .looseObject({
    type: z
      .string()
      .regex(/^[a-z][a-z0-9_]{0,63}$/, 'type must be a snake_case event name')
      .refine((t) => !RESERVED_EVENT_TYPES.has(t), 'this event type is written by the engine itself'),
    spent: z.number().finite().nonnegative().optional(),
  })
  .refine(
    (body) => body.type !== 'usage' || body.spent !== undefined,
    'a usage event carries {"spent": number}',
  )
  // In this order, each stopping the rest: the walks below recurse, so depth is bounded first (iteratively).
  .superRefine((body, ctx) => {
    const problem =
      (deeperThan(body, MAX_EVENT_DEPTH) && `event data nests deeper than ${MAX_EVENT_DEPTH} levels`) ||
      (JSON.stringify(body).length > 64_000 && 'event too large') ||
      // What the store cannot hold is refused here rather than failing the insert with a 500.
      unstorable(body);
    if (problem) ctx.addIssue({ code: 'custom', message: problem, abort: true });
  });

export const runParams = z.object({ id });
export const interactionParams = z.object({ id, iid: id });
/** An episode id: the run id and what it waits on (a usage cap name up to 64 characters, a sequence). */
export const episodeParams = z.object({
  id,
  episodeId: z
    .string()
    .min(1)
    .max(300)
    .regex(/^[A-Za-z0-9_.:-]+$/, 'must be letters, digits, or _ . : -'),
});
export const watchParams = z.object({ assistantId: id, runId: id });
/** A member of the caller's team, as their tokens name them. */
export const memberParams = z.object({ userId });

/** Well inside the 100 levels a MongoDB document may nest (the event's data sits one level down). */
const MAX_EVENT_DEPTH = 32;

function deeperThan(value: unknown, max: number): boolean {
  let level: unknown[] = [value];
  for (let depth = 0; level.length; depth++) {
    if (depth > max) return true;
    level = level.flatMap((v) => (v && typeof v === 'object' ? Object.values(v) : []));
  }
  return false;
}

/**
 * Why event data cannot be stored as is, if it cannot: FerretDB v1 refuses an array directly inside an array, an
 * infinite number (JSON's 1e999) and a key that starts with "$" or holds "."; BSON refuses NUL in a key.
 */
function unstorable(value: unknown, insideArray = false): string | undefined {
  if (typeof value === 'number')
    return Number.isFinite(value) ? undefined : 'numbers in event data must be finite';
  if (Array.isArray(value)) {
    if (insideArray) return 'nested arrays are not supported in event data';
    for (const item of value) {
      const problem = unstorable(item, true);
      if (problem) return problem;
    }
    return undefined;
  }
  if (!value || typeof value !== 'object') return undefined;
  for (const [key, item] of Object.entries(value)) {
    if (key.startsWith('$') || key.includes('.') || key.includes('\0'))
      return `event data keys must not start with "$" or contain "." or NUL (got ${JSON.stringify(key.slice(0, 64))})`;
    const problem = unstorable(item);
    if (problem) return problem;
  }
  return undefined;
}

export const routeDecisionErrorBody = z.strictObject({
  decisionId: id,
  error: z.strictObject({ code: text(128).min(1), message: text(10_000) }),
});

/**
 * `?limit=&before=` of a newest-first listing: `before` is the `nextBefore` of the previous page, opaque to the
 * caller; `limit` is bounded so one request reads a bounded number of rows.
 */
export const pageQuery = (defaultLimit: number, maxLimit: number) =>
  z.strictObject({
    limit: z.coerce
      .number({ error: 'limit must be a whole number' })
      .int('limit must be a whole number')
      .min(1, `limit must be 1 to ${maxLimit}`)
      .max(maxLimit, `limit must be 1 to ${maxLimit}`)
      .default(defaultLimit)
      .describe(`rows per page (default ${defaultLimit})`),
    before: z
      .string()
      .max(200, 'before must be the nextBefore of a previous page')
      .transform((value, ctx) => {
        const cursor = decodeCursor(value);
        if (!cursor)
          ctx.addIssue({ code: 'custom', message: 'before must be the nextBefore of a previous page' });
        return cursor ?? z.NEVER;
      })
      .optional()
      .describe("the previous page's nextBefore: the page after it (older rows)"),
  });

/** Pages of GET /runs, GET /runs/:id/episodes, the device list and an endpoint's attempts. */
export const runsPage = pageQuery(50, 200);
export const episodesPage = pageQuery(50, 200);
export const devicesPage = pageQuery(50, 200);
export const endpointAttemptsPage = pageQuery(50, 200);

/** A recover's window: ISO times with an offset (Z or ±hh:mm). */
const instant = z.iso.datetime({ offset: true }).transform((value) => new Date(value));
export const recoverBody = z.strictObject({ since: instant, until: instant.optional() });
export const recoverParams = z.object({ id });
