// An answer's close and each rung, told to the team's endpoints as interaction.answered / interaction.escalated.
// The event's id is made from the answer or the rung, so a retried activity raises the same event again, whose
// record and per-endpoint claims make it one delivery each.
import { interactionTeamEvent, type TeamEvent } from '../../domain/teamEvents';
import type { EndpointStore } from '../../store/endpoint/endpoints';
import type { RunStore } from '../../store/runs';
import type { InteractionEvent } from './interactionActivityDeps';

export interface TeamAnnounceDeps {
  endpoints: Pick<EndpointStore, 'listForTeam'>;
  runs: Pick<RunStore, 'getForTeam'>;
  /** Starts the event's own delivery workflow (client/teamEvents.ts raiseTeamEvent). */
  raise: (event: TeamEvent) => Promise<unknown>;
}

/** The interaction's event as its team's endpoints receive it. */
function eventData(event: InteractionEvent): { step?: string; data: Record<string, unknown> } {
  if (event.type === 'interaction.answered')
    return { data: { answeredBy: event.answeredBy, answeredAt: event.at.toISOString() } };
  const { rung, to, via, reached } = event;
  return { step: `rung:${rung}`, data: { rung, to, via, reached } };
}

export function announceToTeamEndpoints(deps: TeamAnnounceDeps) {
  return async (event: InteractionEvent): Promise<void> => {
    // A team without an endpoint subscribed (disabled ones keep the event for their recover) pays this one read.
    const endpoints = await deps.endpoints.listForTeam(event.teamId);
    if (!endpoints.some((endpoint) => endpoint.eventTypes.includes(event.type))) return;
    const run = await deps.runs.getForTeam(event.teamId, event.runId);
    if (!run) return;
    const { step, data } = eventData(event);
    await deps.raise(
      interactionTeamEvent(
        event.type,
        { id: run._id, teamId: run.teamId, status: run.status, title: run.title },
        { id: event.interactionId, step },
        data,
        event.at.toISOString(),
      ),
    );
  };
}
