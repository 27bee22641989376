// The callback event types as schemas: what a receiver may rely on in each body (callbackBody and
// testCallbackBody build them). The OpenAPI document publishes them as JSON Schema under `webhooks`; the test
// suites' loopback receiver validates every callback it gets against that. Kept apart from domain/callback.ts,
// which the episode workflow imports: zod stays out of the workflow bundle.
import { z } from 'zod';
import type { CallbackEvent } from './run';
import { RUN_STATUSES, type RunStatus } from './runStatus';

/**
 * Every event type a signed POST can carry: the run ends a launcher subscribes to, the test ping, and an escalation
 * rung to a team policy's webhook URL.
 */
export type CallbackEventType = CallbackEvent | 'run.test' | 'interaction.escalated';

const version = z.literal('1').describe('the body format; a change that breaks receivers gets a new version');
const runId = z.string().describe('the run');
const time = z.iso.datetime();

function endEvent(type: CallbackEvent, status: RunStatus, when: string) {
  return z
    .object({
      version,
      type: z.literal(type),
      episodeId: z
        .string()
        .describe('the outcome episode; also the webhook-id header, the same on every attempt: dedupe on it'),
      run: z.object({
        id: runId,
        status: z.literal(status),
        finalAnswer: z.string().nullable().describe('the final answer the run stored, if any'),
        error: z
          .object({ code: z.string(), message: z.string() })
          .nullable()
          .describe('why the run failed; null unless it did'),
        createdAt: time.describe('when the run was launched (ISO 8601, UTC)'),
        endedAt: time.nullable().describe('when the run ended (ISO 8601, UTC)'),
      }),
    })
    .describe(`${when}; the same body on every attempt and redelivery of the episode`);
}

export const CALLBACK_EVENT_SCHEMAS = {
  'run.finished': endEvent('run.finished', 'finished', 'the run finished'),
  'run.failed': endEvent('run.failed', 'failed', 'the run failed'),
  'run.cancelled': endEvent('run.cancelled', 'cancelled', 'the run was cancelled'),
  'run.test': z
    .object({
      version,
      type: z.literal('run.test'),
      run: z.object({ id: runId, status: z.enum(RUN_STATUSES).describe("the run's status when pinged") }),
    })
    .describe(
      'a test ping (POST /api/v1/runs/{id}/callback/test), signed like any callback, with a webhook-id of its own',
    ),
  'interaction.escalated': z
    .object({
      version,
      type: z.literal('interaction.escalated'),
      id: z
        .string()
        .describe('rung|<interactionId>|<rung index>; also the webhook-id, the same on every attempt'),
      teamId: z.string(),
      run: z.object({ id: runId, status: z.enum(RUN_STATUSES), title: z.string() }),
      data: z.object({
        interactionId: z.string(),
        prompt: z.string().describe('what the run asks'),
        askedAt: time.describe('when it was asked'),
        rung: z.number().int().describe("the rung's index in the policy"),
        afterSeconds: z.number().int(),
        to: z.union([z.enum(['team', 'owner']), z.array(z.string())]),
        at: time.describe('when the rung went out'),
      }),
    })
    .describe(
      "a question nobody answered reached a rung of the team's escalation policy (via: webhook), signed with the " +
        "policy's secret; sent once per rung, never after an answer",
    ),
} satisfies Record<CallbackEventType, z.ZodType>;
