// Team events: what a team's endpoints hear about its runs. Pure: the event workflow, the activities and the API
// build the same event from the same source, so its id (the webhook-id on every attempt) is stable.
import type { HealthAlert, HealthAlertKind } from './health';
import type { RunOutcome } from './outcome';
import type { RunStatus } from './runStatus';

/** Every type a team endpoint can receive; `endpoint.test` only goes to the endpoint tested. */
export const TEAM_EVENT_TYPES = [
  'run.input_requested',
  'run.parked',
  'run.finished',
  'run.failed',
  'run.cancelled',
  'run.stalled',
  'run.recovered',
  'run.budget_warning',
  'run.budget_exceeded',
  'interaction.answered',
  'interaction.escalated',
  'endpoint.test',
] as const;
export type TeamEventType = (typeof TEAM_EVENT_TYPES)[number];

/** The types an endpoint may subscribe to. */
export const SUBSCRIBABLE_EVENT_TYPES = TEAM_EVENT_TYPES.filter(
  (type): type is Exclude<TeamEventType, 'endpoint.test'> => type !== 'endpoint.test',
);
export type SubscribableEventType = (typeof SUBSCRIBABLE_EVENT_TYPES)[number];

/** The run as an event shows it: never its callback (secret or URL), its owner's data or another team's. */
export interface TeamEventRun {
  id: string;
  status: RunStatus;
  title: string;
}

/** One event, as its source raised it; the store gives it its sequence when it is first recorded. */
export interface TeamEvent {
  /** Stable per source (an episode, a health alert, an answer): the webhook-id, the same on every attempt. */
  id: string;
  type: SubscribableEventType;
  teamId: string;
  runId: string;
  /** The run as the source saw it; absent: as persisted when the event is recorded. */
  run?: TeamEventRun;
  data: Record<string, unknown>;
  /** ISO time it happened: endpoints created after it do not receive it, and its sequence follows it. */
  occurredAt: string;
  /** Its place among events of the run raised at the same instant (0 unless several were). */
  order?: number;
}

/** Sequence numbers per millisecond: room for the events of one run raised at the same instant. */
export const SEQUENCES_PER_MS = 100;

/**
 * The first sequence an event may take: when it happened, in milliseconds, times SEQUENCES_PER_MS, plus its order
 * among events of that instant. So sequences increase per run in the order things happened, whichever raiser
 * records first (a pause and the end right after it race to be recorded).
 */
export const firstSequence = (event: Pick<TeamEvent, 'occurredAt' | 'order'>): number =>
  Date.parse(event.occurredAt) * SEQUENCES_PER_MS + (event.order ?? 0);

/** The body an endpoint receives (the contract's "Team endpoint event"). */
export interface TeamEventBody {
  version: '1';
  type: TeamEventType;
  id: string;
  sequence: number;
  teamId: string;
  /** null only in an endpoint.test event, which is about no run. */
  run: TeamEventRun | null;
  data: Record<string, unknown>;
}

export const teamEventBody = (
  event: Pick<TeamEvent, 'id' | 'teamId' | 'data'> & { type: TeamEventType },
  run: TeamEventRun | null,
  sequence: number,
): TeamEventBody => ({
  version: '1',
  type: event.type,
  id: event.id,
  sequence,
  teamId: event.teamId,
  run,
  data: event.data,
});

export const ENDPOINT_CLAIM_PREFIX = 'ep|';

/** The claim of one event's delivery to one endpoint: each endpoint gets each event once in effect. */
export const endpointDeliveryKey = (eventId: string, endpointId: string): string =>
  `${ENDPOINT_CLAIM_PREFIX}${eventId}|${endpointId}`;

/**
 * The event and endpoint of a delivery's claim key (endpointDeliveryKey read backwards: an endpoint id holds no
 * `|`, an event id may); undefined for every other key.
 */
export function teamDeliveryOfClaimKey(key: string): { eventId: string; endpointId: string } | undefined {
  if (!key.startsWith(ENDPOINT_CLAIM_PREFIX)) return undefined;
  const cut = key.lastIndexOf('|');
  if (cut <= ENDPOINT_CLAIM_PREFIX.length) return undefined;
  return { eventId: key.slice(ENDPOINT_CLAIM_PREFIX.length, cut), endpointId: key.slice(cut + 1) };
}

const runOf = (outcome: RunOutcome): TeamEventRun => ({
  id: outcome.runId,
  status: outcome.status,
  title: outcome.title,
});

/**
 * The team event an outcome episode raises, or undefined (an operator soft-pause asks nobody anything). A final
 * answer only where the run finished, an error only where it failed.
 */
export function teamEventFromOutcome(outcome: RunOutcome): TeamEvent | undefined {
  const base = {
    id: `ev:${outcome.episodeId}`,
    teamId: outcome.teamId,
    runId: outcome.runId,
    run: runOf(outcome),
  };
  const occurredAt = outcome.occurredAt;
  switch (outcome.kind) {
    case 'run_paused': {
      const pause = outcome.pause;
      if (pause?.reason === 'usage_park' && pause.wall)
        return { ...base, type: 'run.parked', data: { wall: pause.wall }, occurredAt };
      if (pause?.interactionId)
        return {
          ...base,
          type: 'run.input_requested',
          data: { interactionId: pause.interactionId },
          occurredAt,
        };
      return undefined;
    }
    case 'run_finished':
      return {
        ...base,
        type: 'run.finished',
        data: { finalAnswer: outcome.finalAnswer ?? null },
        occurredAt,
      };
    case 'run_failed':
      return { ...base, type: 'run.failed', data: { error: outcome.error ?? null }, occurredAt };
    case 'run_cancelled':
      return { ...base, type: 'run.cancelled', data: {}, occurredAt };
  }
}

const HEALTH_EVENT_TYPES: Record<HealthAlertKind, SubscribableEventType> = {
  stall: 'run.stalled',
  stall_recovered: 'run.recovered',
  budget_warning: 'run.budget_warning',
  budget_exceeded: 'run.budget_exceeded',
};

/** The team event a run-health alert raises (the alert's own key makes its id: raised again, the same event). */
export function teamEventFromHealthAlert(
  alert: HealthAlert,
  runId: string,
  teamId: string,
  occurredAt: string,
  order: number,
): TeamEvent {
  return {
    order,
    id: `ev:${alert.episodeKey}`,
    type: HEALTH_EVENT_TYPES[alert.kind],
    teamId,
    runId,
    data: { summary: alert.summary, severity: alert.severity, ...alert.detail },
    occurredAt,
  };
}

/** An interaction of a run was answered or escalated: the entry point the interaction family raises it through. */
export function interactionTeamEvent(
  type: 'interaction.answered' | 'interaction.escalated',
  run: { id: string; teamId: string; status: RunStatus; title: string },
  interaction: { id: string; step?: string },
  data: Record<string, unknown>,
  occurredAt: string,
): TeamEvent {
  const suffix = interaction.step ? `:${interaction.step}` : '';
  return {
    id: `ev:${run.id}:${type}:${interaction.id}${suffix}`,
    type,
    teamId: run.teamId,
    runId: run.id,
    run: { id: run.id, status: run.status, title: run.title },
    data: { interactionId: interaction.id, ...data },
    occurredAt,
  };
}
