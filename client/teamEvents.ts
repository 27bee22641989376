// The entry point for raising a team event from outside a workflow (an API route, the runner): its own
// team-event|<id> workflow, started once per event id while one runs; a closed one may run again (its claims
// dedupe every delivery). Workflows use handOffTeamEvent (workflows/teamEvent.ts) instead. Building the event:
// domain/teamEvents.ts (interactionTeamEvent for interaction.answered / interaction.escalated).
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { runAttributes } from '../contract/searchAttributes';
import {
  endpointRecoverWorkflowId,
  teamEventWorkflowId,
  workflowTypes,
  type EndpointRecoverInput,
} from '../contract/workflows';
import type { TeamEvent } from '../domain/teamEvents';
import { teamPriority } from './priority';
import { startUnlessRunning } from './startUnlessRunning';

/** Raises the event for the team's endpoints; false when its workflow is running already. */
export function raiseTeamEvent(client: Client, taskQueue: string, event: TeamEvent): Promise<boolean> {
  return startUnlessRunning(client, workflowTypes.teamEvent, {
    workflowId: teamEventWorkflowId(event.id),
    taskQueue,
    args: [event],
    priority: teamPriority(event.teamId),
    typedSearchAttributes: new TypedSearchAttributes(runAttributes(event.runId, event.teamId)),
  });
}

/** Starts an endpoint's recover; false while one of that endpoint runs. */
export function startEndpointRecover(
  client: Client,
  taskQueue: string,
  input: EndpointRecoverInput,
): Promise<boolean> {
  return startUnlessRunning(client, workflowTypes.endpointRecover, {
    workflowId: endpointRecoverWorkflowId(input.endpointId),
    taskQueue,
    args: [input],
    priority: teamPriority(input.teamId),
  });
}
