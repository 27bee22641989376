// The callback event types as schemas: what a receiver may rely on in each body (callbackBody and
// testCallbackBody build them). The OpenAPI document publishes them as JSON Schema under `webhooks`; the test
// suites' loopback receiver validates every callback it gets against that. Kept apart from domain/callback.ts,
// which the episode workflow imports: zod stays out of the workflow bundle.
import { z } from 'zod';
import type { CallbackEvent } from './run';
import { RUN_STATUSES, type RunStatus } from './runStatus';

/** Every event type a callback can carry: the run ends a launcher subscribes to, and the test ping. */
export type CallbackEventType = CallbackEvent | 'run.test';

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
} satisfies Record<CallbackEventType, z.ZodType>;
