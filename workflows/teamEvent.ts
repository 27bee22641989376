// One team event's deliveries: the event is recorded (its sequence per run, the endpoints subscribed to it when it
// happened), then each endpoint gets it on the callback family's schedule under its own claim (ep|<event>|<endpoint>),
// side by side: one failing endpoint never holds up another.
import { ParentClosePolicy, startChild } from '@temporalio/workflow';
import { runAttributes } from '../contract/searchAttributes';
import { teamEventWorkflowId, type BranchResult, type TeamEventResult } from '../contract/workflows';
import { endpointDeliveryKey, type TeamEvent } from '../domain/teamEvents';
import { callbackAttemptCalls, quickCalls, unlessChildRunning, type QuickCalls } from './common';
import { deliverOnSchedule } from './signedDelivery';

export async function teamEventWorkflow(event: TeamEvent): Promise<TeamEventResult> {
  const quick = quickCalls();
  const recorded = await quick.recordTeamEvent(event);
  const attempts = callbackAttemptCalls(recorded.attemptSeconds);
  const results = await Promise.all(
    recorded.endpointIds.map((endpointId) =>
      deliverOnSchedule(quick, {
        key: endpointDeliveryKey(event.id, endpointId),
        waits: recorded.retrySeconds,
        jitter: recorded.retryJitter,
        attempt: (place) => attempts.sendEndpointEvent(event.id, endpointId, place),
        // A give-up is in the endpoint's attempt log, where its recover finds it.
        gaveUp: async () => undefined,
      }).catch((): BranchResult => 'released'),
    ),
  );
  return {
    eventId: event.id,
    sequence: recorded.sequence,
    deliveries: Object.fromEntries(recorded.endpointIds.map((id, i) => [id, results[i]])),
  };
}

/**
 * Hands a team event to its own workflow (id team-event|<event id>), abandoned by the caller's close: the caller
 * waits only for the start, and only when an endpoint of the team is owed it (a team without endpoints costs one
 * quick read per event, no workflow). One already running for the event is the same event raised again.
 */
export async function handOffTeamEvent(quick: QuickCalls, event: TeamEvent): Promise<void> {
  if (!(await quick.recordTeamEvent(event)).endpointIds.length) return;
  await unlessChildRunning(
    () =>
      startChild(teamEventWorkflow, {
        workflowId: teamEventWorkflowId(event.id),
        args: [event],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // A closed one may run again (its claims dedupe every delivery); a running one is not doubled.
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        typedSearchAttributes: runAttributes(event.runId, event.teamId),
      }),
    undefined,
  );
}
