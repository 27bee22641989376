// The team event types as schemas: what an endpoint may rely on in each body (teamEventBody builds them). The
// OpenAPI document publishes them as JSON Schema under `webhooks`; the test suites' loopback receiver validates
// every team event it gets against that. Apart from domain/teamEvents.ts, which workflows import: zod stays out
// of the workflow bundle.
import { z } from 'zod';
import { RUN_STATUSES } from './runStatus';
import type { TeamEventType } from './teamEvents';

const run = z
  .object({
    id: z.string(),
    status: z.enum(RUN_STATUSES).describe("the run's status when the event was raised"),
    title: z.string(),
  })
  .describe('the run the event is about (never its callback, nor anything of another team)');

function teamEvent(type: TeamEventType, what: string, data: z.ZodType, aboutRun: z.ZodType = run) {
  return z
    .object({
      version: z.literal('1').describe('the body format; a change that breaks receivers gets a new version'),
      type: z.literal(type),
      id: z
        .string()
        .describe(
          'the event; also the webhook-id header, the same on every attempt and redelivery: dedupe on it',
        ),
      sequence: z
        .number()
        .int()
        .min(0)
        .describe(
          "increasing per run in the order things happened (not consecutive): order a run's events by it, or " +
            'drop one older than the newest seen',
        ),
      teamId: z.string(),
      run: aboutRun,
      data,
    })
    .describe(what);
}

const healthData = z
  .object({ summary: z.string(), severity: z.enum(['warning', 'error']) })
  .catchall(z.unknown())
  .describe("what run health saw (the operator alert's summary, severity and detail)");

const answeredData = z.object({
  interactionId: z.string(),
  answeredBy: z.string().describe("who answered (the answer's user id)"),
  answeredAt: z.string().describe('when, ISO 8601'),
});

const escalatedData = z.object({
  interactionId: z.string(),
  rung: z.number().int().min(0).describe("the rung's index in the ladder, from 0"),
  to: z
    .union([z.enum(['team', 'owner']), z.array(z.string())])
    .describe("the rung's people: the team, the run's owner, or these user ids"),
  via: z.enum(['push', 'webhook']),
  reached: z
    .number()
    .int()
    .min(0)
    .describe('devices the push reached (via push), or 1 once the escalation webhook took it (via webhook)'),
});

export const TEAM_EVENT_SCHEMAS = {
  'run.input_requested': teamEvent(
    'run.input_requested',
    'a run paused for a human: it waits on the interaction',
    z.object({ interactionId: z.string() }),
  ),
  'run.parked': teamEvent(
    'run.parked',
    'a run was parked at a usage cap',
    z.object({ wall: z.string().describe('the usage cap') }),
  ),
  'run.finished': teamEvent(
    'run.finished',
    'a run finished',
    z.object({ finalAnswer: z.string().nullable().describe('the final answer the run stored, if any') }),
  ),
  'run.failed': teamEvent(
    'run.failed',
    'a run failed',
    z.object({ error: z.object({ code: z.string(), message: z.string() }).nullable() }),
  ),
  'run.cancelled': teamEvent('run.cancelled', 'a run was cancelled', z.object({})),
  'run.stalled': teamEvent('run.stalled', 'a running run went silent for STALL_AFTER_SECONDS', healthData),
  'run.recovered': teamEvent('run.recovered', 'a stalled run made progress again', healthData),
  'run.budget_warning': teamEvent(
    'run.budget_warning',
    "a run's spend crossed 80 % of its budget",
    healthData,
  ),
  'run.budget_exceeded': teamEvent('run.budget_exceeded', "a run's spend went over its budget", healthData),
  'interaction.answered': teamEvent(
    'interaction.answered',
    "a run's interaction was answered (sent once its close went out to the devices the question reached)",
    answeredData,
  ),
  'interaction.escalated': teamEvent(
    'interaction.escalated',
    "a run's interaction went unanswered and a rung of its escalation went out",
    escalatedData,
  ),
  'endpoint.test': teamEvent(
    'endpoint.test',
    'a test event (POST /api/v1/endpoints/{id}/test), signed like any event, with an id of its own',
    z.object({ endpointId: z.string() }),
    z.null(),
  ),
} satisfies Record<TeamEventType, z.ZodType>;
