// Request bodies, validated at the edge. Unknown fields are refused so a typo is an error, not a silent no-op.
import { z } from 'zod';
import { ENGINE_EVENT_TYPES } from '../engine/runEngine';

const id = z
  .string()
  .min(1)
  .max(128)
  .regex(/^[A-Za-z0-9_.:-]+$/, 'must be letters, digits, or _ . : -');
const text = (max: number) => z.string().max(max);

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

export const createRunBody = z.strictObject({
  title: text(500).optional(),
  callback: z
    .strictObject({
      url: callbackUrl,
      secret: z
        .string()
        .regex(
          /^whsec_[A-Za-z0-9+/]{32,}={0,2}$/,
          'callback secret must be whsec_ followed by base64 (24+ bytes)',
        )
        .optional(),
    })
    .optional(),
  budget: z.strictObject({ limit: z.number().positive().finite() }).optional(),
  watchedIssueIds: z.array(id).max(100).optional(),
});

export const pauseBody = z.strictObject({ prompt: text(10_000).min(1) });
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
      .refine((t) => !ENGINE_EVENT_TYPES.has(t), 'this event type is written by the engine itself'),
    spent: z.number().finite().nonnegative().optional(),
  })
  .refine(
    (body) => body.type !== 'usage' || body.spent !== undefined,
    'a usage event carries {"spent": number}',
  )
  .refine((body) => JSON.stringify(body).length <= 64_000, 'event too large')
  // FerretDB v1 cannot store an array directly inside an array; refuse it here rather than fail the insert.
  .refine((body) => !hasNestedArray(body), 'nested arrays are not supported in event data');

export const idParam = id;

function hasNestedArray(value: unknown, insideArray = false): boolean {
  if (Array.isArray(value)) return insideArray || value.some((item) => hasNestedArray(item, true));
  if (value && typeof value === 'object')
    return Object.values(value).some((item) => hasNestedArray(item, false));
  return false;
}

export const routeDecisionErrorBody = z.strictObject({
  decisionId: id,
  error: z.strictObject({ code: text(128).min(1), message: text(10_000) }),
});
