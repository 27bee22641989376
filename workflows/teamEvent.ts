// One team event's deliveries: the event is recorded (its sequence per run, the endpoints subscribed to it when it
// happened), then each endpoint gets it on the callback family's schedule under its own claim (ep|<event>|<endpoint>),
// side by side: one failing endpoint never holds up another.
import { ParentClosePolicy, patched, startChild } from '@temporalio/workflow';
import type { AttemptPlace, CallbackAttempt, EndpointSend } from '../contract/activities';
import { runAttributes } from '../contract/searchAttributes';
import {
  teamEventWorkflowId,
  type BranchResult,
  type RecordedTeamEvent,
  type TeamEventResult,
} from '../contract/workflows';
import { endpointDeliveryKey, type TeamEvent } from '../domain/teamEvents';
import {
  callbackAttemptCalls,
  callsInTurn,
  holder,
  outlastingStoreOutages,
  QUICK_CALLS,
  quickCalls,
  unlessChildRunning,
  type QuickCalls,
} from './common';
import { deliverOnSchedule } from './signedDelivery';

/**
 * Marks histories in which the endpoints' claims are taken in one quick call and their first attempts made in one
 * activity (later attempts, each endpoint on its own schedule, one at a time as before): two hops to the first
 * attempts instead of a quick call and an activity task per endpoint.
 */
export const TEAM_EVENT_FIRST_ATTEMPTS_TOGETHER_PATCH = 'team-event-claims-and-first-attempts-together';

/**
 * Marks histories in which the record of an event raised from outside a workflow (an announcement, the sweep), failed
 * past its quick retries (a store outage of about a quarter of an hour), is made again after a wait, one minute
 * doubling to an hour, for a day. Before, the workflow failed there: an event never recorded, which the sweep
 * cannot see. Only a failed record reaches it.
 */
export const TEAM_EVENT_RECORD_OUTLASTS_OUTAGES_PATCH = 'team-event-record-outlasts-outages';

/**
 * Marks executions whose deliveries make their store calls one at a time once each made its first (callsInTurn).
 * Before, one endpoint's hold before a wait and another's hold before an attempt, in flight together, resolved
 * together on a replay, where the shorter continuation issued its command first: the replay failed (TMPRL1100),
 * every later task with it, and the event's deliveries waited for a recover. Every execution reaches the check.
 */
export const TEAM_EVENT_STORE_CALLS_IN_TURN_PATCH = 'team-event-store-calls-in-turn';

type Attempts = ReturnType<typeof callbackAttemptCalls>;

/**
 * Each delivery's first attempt, asked for with its place, made in one activity once all `count` have asked (they
 * ask as they start, the claims taken before); every later attempt goes alone.
 */
function firstAttemptsTogether(attempts: Attempts, eventId: string, count: number) {
  const asked: EndpointSend[] = [];
  let allAsked!: () => void;
  const everyoneAsked = new Promise<void>((resolve) => (allAsked = resolve));
  let answers: Promise<CallbackAttempt[]> | undefined;
  return (endpointId: string) => {
    let first = true;
    return async (place: AttemptPlace): Promise<CallbackAttempt> => {
      if (!first) return attempts.sendEndpointEvent(eventId, endpointId, place);
      first = false;
      const index = asked.push({ endpointId, place }) - 1;
      if (asked.length === count) allAsked();
      await everyoneAsked;
      answers ??= attempts.sendEndpointEventToEach(eventId, asked);
      return (await answers)[index];
    };
  };
}

/**
 * Each endpoint's claim, taken in one quick call: true where this execution holds it, false where another does;
 * undefined when the call failed past its retries (every delivery released, as a thrown claim was before).
 */
async function claimEach(
  quick: QuickCalls,
  eventId: string,
  endpointIds: string[],
): Promise<boolean[] | undefined> {
  const keys = endpointIds.map((id) => endpointDeliveryKey(eventId, id));
  return quick.tryMarkEach(keys, holder()).catch(() => undefined);
}

export async function teamEventWorkflow(
  event: TeamEvent,
  recorded?: RecordedTeamEvent,
): Promise<TeamEventResult> {
  const anyOrder = quickCalls();
  const inTurns = patched(TEAM_EVENT_STORE_CALLS_IN_TURN_PATCH)
    ? callsInTurn(anyOrder, QUICK_CALLS)
    : undefined;
  const quick = inTurns?.calls ?? anyOrder;
  // Its raiser recorded it moments ago (absent: raised from outside a workflow, or started by older code).
  const { endpointIds, ...schedule } =
    recorded ??
    (await outlastingStoreOutages(
      () => quick.recordTeamEvent(event),
      () => patched(TEAM_EVENT_RECORD_OUTLASTS_OUTAGES_PATCH),
    ));
  const attempts = callbackAttemptCalls(schedule.attemptSeconds);
  const together = patched(TEAM_EVENT_FIRST_ATTEMPTS_TOGETHER_PATCH);
  const claimedAt = Date.now();
  const claimed = together ? await claimEach(quick, event.id, endpointIds) : undefined;
  const notClaimed: BranchResult = together && !claimed ? 'released' : 'claimed_elsewhere';
  const attemptTo = claimed
    ? firstAttemptsTogether(attempts, event.id, claimed.filter(Boolean).length)
    : (endpointId: string) => (place: AttemptPlace) =>
        attempts.sendEndpointEvent(event.id, endpointId, place);
  const deliveries = Promise.all(
    endpointIds.map(async (endpointId, i): Promise<BranchResult> => {
      if (together && !claimed?.[i]) return notClaimed;
      return deliverOnSchedule(quick, {
        key: endpointDeliveryKey(event.id, endpointId),
        ...(claimed ? { claimed: { at: claimedAt } } : {}),
        waits: schedule.retrySeconds,
        jitter: schedule.retryJitter,
        attempt: attemptTo(endpointId),
        // A give-up is in the endpoint's attempt log, where its recover finds it.
        gaveUp: async () => undefined,
      }).catch((): BranchResult => 'released');
    }),
  );
  // Every store call before here went at once; every later one waits its turn.
  inTurns?.engage();
  const results = await deliveries;
  return {
    eventId: event.id,
    sequence: schedule.sequence,
    deliveries: Object.fromEntries(endpointIds.map((id, i) => [id, results[i]])),
  };
}

/**
 * Hands a team event to its own workflow (id team-event|<event id>), abandoned by the caller's close: the caller
 * waits only for the start, and only when an endpoint of the team is owed it (a team without endpoints costs one
 * quick read per event, no workflow). One already running for the event is the same event raised again.
 */
export async function handOffTeamEvent(quick: QuickCalls, event: TeamEvent): Promise<void> {
  const recorded = await quick.recordTeamEvent(event);
  if (!recorded.endpointIds.length) return;
  await unlessChildRunning(
    () =>
      startChild(teamEventWorkflow, {
        workflowId: teamEventWorkflowId(event.id),
        // What the child would read again: its first step saved.
        args: [event, recorded],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        // A closed one may run again (its claims dedupe every delivery); a running one is not doubled.
        workflowIdReusePolicy: 'ALLOW_DUPLICATE',
        typedSearchAttributes: runAttributes(event.runId, event.teamId),
      }),
    undefined,
  );
}
