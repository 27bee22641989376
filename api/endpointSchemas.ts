// Request bodies of the team endpoint routes, validated at the edge: every field bounded, unknown fields refused.
import { z } from 'zod';
import { SUBSCRIBABLE_EVENT_TYPES } from '../domain/teamEvents';
import { callbackUrl } from './schemas';

/** The longest description an endpoint keeps. */
export const ENDPOINT_DESCRIPTION_MAX = 500;
/** The highest rate an endpoint may ask for: past it, pacing per origin is the bound anyway. */
export const ENDPOINT_RATE_MAX = 1000;

const eventTypes = z
  .array(z.enum(SUBSCRIBABLE_EVENT_TYPES))
  .min(1, 'eventTypes must name at least one event type')
  .max(SUBSCRIBABLE_EVENT_TYPES.length)
  .refine((types) => new Set(types).size === types.length, 'eventTypes must not repeat a type');

const fields = {
  url: callbackUrl,
  eventTypes,
  description: z.string().max(ENDPOINT_DESCRIPTION_MAX).optional(),
  disabled: z.boolean().optional(),
  rateLimitPerSecond: z.number().int().min(1).max(ENDPOINT_RATE_MAX).optional(),
  format: z.enum(['standard', 'slack']).optional(),
};

export const createEndpointBody = z.strictObject(fields);

export const updateEndpointBody = z
  .strictObject({
    ...fields,
    url: fields.url.optional(),
    eventTypes: fields.eventTypes.optional(),
    // null clears it.
    description: fields.description.nullable(),
    rateLimitPerSecond: fields.rateLimitPerSecond.nullable(),
  })
  .refine((body) => Object.keys(body).length > 0, 'nothing to change');

export const endpointParams = z.strictObject({
  id: z
    .string()
    .max(64)
    .regex(/^ep_[A-Za-z0-9_-]+$/, 'not an endpoint id'),
});
