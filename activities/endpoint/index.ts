// The team endpoints' activities: an event recorded once with its sequence (and the endpoints owed it), then one
// attempt of its delivery to one endpoint per call, through the callback family's signed send (guard, pacing per
// origin, a breaker per endpoint), the endpoint's own rate, and its attempt log.
import type { EndpointDisabledRaiser } from '../../client/operator';
import type { AttemptPlace, CallbackAttempt, EndpointSend } from '../../contract/activities';
import type { EndpointRecoverInput, RecordedTeamEvent } from '../../contract/workflows';
import { runDeepLink } from '../../domain/push';
import { renderSlackMessage, slackFactsOf } from '../../domain/slackMessage';
import {
  endpointDeliveryKey,
  teamEventBody,
  type TeamEvent,
  type TeamEventBody,
} from '../../domain/teamEvents';
import type { Signing } from '../../delivery/callback/send';
import { DEFAULT_LOOKUP_TIMEOUT_MS } from '../../delivery/ssrfGuard';
import type { CallbackAttemptStore } from '../../store/callback/attempts';
import type { ClaimStore } from '../../store/claims';
import {
  owedTeamEvent,
  subscribedWhen,
  type EndpointRow,
  type EndpointStore,
} from '../../store/endpoint/endpoints';
import type { TeamEventHeader, TeamEventRow, TeamEventStore } from '../../store/endpoint/teamEvents';
import type { InteractionStore } from '../../store/interactions';
import type { RateLimitStore } from '../../store/rateLimits';
import type { RunStore } from '../../store/runs';
import { mapBounded } from '../../platform/concurrency';
import { withDeadline } from '../../platform/deadline';
import { activityContext } from '../activityContext';
import {
  claimCheck,
  logAttempt,
  RECORD_DEADLINE_MS,
  sendSigned,
  writtenInTime,
  type AttemptResult,
  type CallbackDeps,
  deliveredByEarlierTry,
} from '../callback';

export interface EndpointDeps extends Omit<CallbackDeps, 'runs' | 'callbackAttempts' | 'metrics'> {
  runs: RunStore;
  endpoints: EndpointStore;
  teamEvents: TeamEventStore;
  /** The endpoints' attempt log (endpoint_attempts). */
  endpointAttempts: CallbackAttemptStore;
  rateLimits: RateLimitStore;
  /** Where a Slack message's input request finds its prompt. */
  interactions: Pick<InteractionStore, 'get'>;
  /**
   * The deliveries' claims: one settled delivered is known delivered even when its attempt row was lost; a
   * recover's send takes the claim, so neither the sweep nor a replayed episode sends what it delivered again.
   */
  claims: Pick<
    ClaimStore,
    'describeEach' | 'describe' | 'tryMark' | 'markDelivered' | 'resettle' | 'unmark' | 'renew' | 'graceMs'
  >;
  /** The studio a Slack message links its run in (as the pushes do). */
  studioUrl: string;
  /** The callback family's schedule, which every delivery follows. */
  schedule: Omit<RecordedTeamEvent, 'sequence' | 'endpointIds'>;
  /** ENDPOINT_DISABLE_AFTER_SECONDS: failing this long without a success, an endpoint is disabled. */
  disableAfterSeconds: number;
  /** Tells the operator an endpoint was disabled for failing (once per disabling); absent: no operator alerts. */
  endpointDisabled?: EndpointDisabledRaiser;
}

/**
 * An endpoint's rate over any 3 seconds never exceeds its rateLimitPerSecond (a burst of at most 3 seconds' worth),
 * and over any 61 seconds 60 times it: a request's time on the wire varies, so a receiver counting 60 s sees no
 * more than 60 seconds' worth. (A window of 3 s, not 1: the rate store counts in 1/60ths of a window, and a 1 s
 * window's 16.7 ms buckets admitted every hit spread over several of them.)
 */
export const endpointRateWindows = (perSecond: number) => [
  { suffix: 's', rule: { limit: perSecond * 3, windowSeconds: 3 } },
  { suffix: 'm', rule: { limit: perSecond * 60, windowSeconds: 61 } },
];

/** The rate store's key for one of an endpoint's windows (every worker counts in the same one). */
export const endpointRateKey = (endpointId: string, suffix: string): string =>
  `endpoint-rate|${endpointId}|${suffix}`;

/** Where a recover's listing got in its window (its last row read), and the events it found missed so far. */
interface RecoverListing {
  after?: { recordedAt: string; id: string };
  missed: string[];
}

/** Events whose claims a recover reads at once (one read by _id each page of its window). */
const RECOVER_CHECK_BATCH = 500;
/** The last attempts of events not settled delivered, read side by side (one indexed read each). */
const LAST_ATTEMPT_READS_IN_FLIGHT = 8;

/** How often an endpoint that keeps succeeding has its last success written (not on every delivery). */
const SUCCESS_WRITE_EVERY_MS = 60_000;

/**
 * One attempt of an event to an endpoint, as read when its activity started: the endpoint's rate, its format,
 * the signed send, the attempt log and the endpoint's failure streak.
 */
function endpointAttempter(deps: EndpointDeps) {
  /** Holds the attempt when the endpoint's rate is spent: nothing is sent, the workflow waits and goes again. */
  const admitAtRate = (endpoint: EndpointRow, perSecond: number) => async () => {
    const taken: (() => Promise<void>)[] = [];
    for (const { suffix, rule } of endpointRateWindows(perSecond)) {
      const admission = await deps.rateLimits.hit(endpointRateKey(endpoint._id, suffix), rule, deps.now());
      if (!admission.admitted) {
        for (const release of taken) await release();
        return {
          held: 'paced' as const,
          retryAfterMs: admission.retryAfterSeconds * 1000,
          detail: `paced: the endpoint's rate of ${perSecond} per second is spent for now`,
        };
      }
      taken.push(admission.release);
    }
    return undefined;
  };

  /** The endpoint's failure streak: a success ends it; past disableAfterSeconds of failures, it is disabled. */
  async function noteOutcome(endpoint: EndpointRow, runId: string, attempt: AttemptResult): Promise<void> {
    if (!attempt.sent || attempt.held) return;
    const now = deps.now();
    if (attempt.outcome.result === 'delivered') {
      const lastWrite = endpoint.lastSuccessAt?.getTime() ?? 0;
      if (endpoint.failingSince || now.getTime() - lastWrite >= SUCCESS_WRITE_EVERY_MS)
        await deps.endpoints.recordSuccess(endpoint._id, now);
      return;
    }
    const failing = await deps.endpoints.recordFailure(endpoint, now);
    const failingSince = failing.failingSince ?? now;
    if (now.getTime() - failingSince.getTime() < deps.disableAfterSeconds * 1000) return;
    // A success is written only when the row its attempt read asks for it: one on the wire when the streak began
    // did not end it. The log has it (written before its outcome is noted).
    const succeededAt = await deps.endpointAttempts.deliveredEndingSince(
      endpoint._id,
      failingSince,
      DEFAULT_LOOKUP_TIMEOUT_MS + deps.timeoutMs,
    );
    if (succeededAt) return deps.endpoints.restartStreak(endpoint._id, failingSince, succeededAt, now);
    const failingBefore = new Date(now.getTime() - deps.disableAfterSeconds * 1000);
    const lastError = attempt.outcome.detail ?? String(attempt.error);
    const disabling = { disabledAt: now, failingSince, runId, lastError };
    const alerting = deps.endpointDisabled;
    // The alert is recorded owed with the disabling: lost here (a crash, Temporal away), the sweep starts it.
    if (!(await deps.endpoints.disableFailing(endpoint._id, failingBefore, now, alerting && disabling)))
      return;
    if (!alerting) return;
    await alerting(failing, disabling);
    await deps.endpoints.disabledAlertStarted(endpoint._id, now);
  }

  /** What an endpoint is sent: the event as its format renders it, signed unless Slack's (which takes none). */
  async function payloadFor(
    endpoint: EndpointRow,
    body: TeamEventBody,
  ): Promise<{ json: string; signing: Signing }> {
    if (endpoint.format !== 'slack') return { json: JSON.stringify(body), signing: 'signed' };
    const interactionId = body.type === 'run.input_requested' ? body.data.interactionId : undefined;
    const interaction =
      body.run && typeof interactionId === 'string'
        ? await deps.interactions.get(body.run.id, interactionId)
        : null;
    const runUrl = runDeepLink(deps.studioUrl, body.run?.id ?? '');
    const message = renderSlackMessage(slackFactsOf(body, runUrl, interaction?.prompt));
    return { json: JSON.stringify(message), signing: 'unsigned' };
  }

  /** One attempt of the event to the endpoint, as read when the activity started; logged, its outcome noted. */
  async function attemptEndpoint(
    endpointId: string,
    endpoint: EndpointRow | undefined,
    eventId: string,
    event: TeamEventRow | undefined,
    place: AttemptPlace,
    activityStarted: number,
  ): Promise<CallbackAttempt> {
    const delivered = await deliveredByEarlierTry(
      deps.endpointAttempts,
      endpointDeliveryKey(eventId, endpointId),
    );
    if (delivered) return delivered;
    const stop = (detail: string): CallbackAttempt => ({ result: 'stop', detail });
    if (!endpoint) return stop('the endpoint was removed');
    if (endpoint.disabled) return stop('the endpoint is disabled');
    if (!event) return stop('the event is no longer kept');
    // Dropped since (the event was recorded for it, or listed by a recover, before the change): nothing more goes.
    if (!endpoint.eventTypes.includes(event.type))
      return stop(`the endpoint no longer subscribes to ${event.type}`);
    const body = teamEventBody({ ...event, id: event._id }, event.run, event.sequence);
    const attempt = await sendSigned(deps, {
      target: endpoint,
      webhookId: eventId,
      ...(await payloadFor(endpoint, body)),
      teamId: endpoint.teamId,
      // A breaker per endpoint: another endpoint at the same origin keeps going.
      breakerKey: `endpoint:${endpoint._id}`,
      about: `endpoint ${endpointId} event ${eventId}`,
      place,
      activityStarted,
      ...(endpoint.rateLimitPerSecond ? { admit: admitAtRate(endpoint, endpoint.rateLimitPerSecond) } : {}),
      notOwed: claimCheck(deps.claims, place),
    });
    const logged = { episodeId: endpointDeliveryKey(eventId, endpointId), runId: event.runId, endpointId };
    await logAttempt({ log: deps.log }, deps.endpointAttempts, logged, attempt, place);
    // Sent: a failing or slow store must not fail the activity now, or its retry would send the event again. The
    // streak is caught up by the endpoint's next attempt.
    const notNoted = (why: string) =>
      deps.log?.(`endpoint ${endpointId}: the outcome of event ${eventId} not noted: ${why}`);
    await withDeadline(
      noteOutcome(endpoint, event.runId, attempt).catch((err: unknown) => notNoted(String(err))),
      RECORD_DEADLINE_MS,
      () => notNoted(`no answer from the store within ${RECORD_DEADLINE_MS} ms`),
    );
    return attempt.outcome;
  }

  return attemptEndpoint;
}

/**
 * The events of the window an endpoint subscribes to (as it is now), from after its creation, whose last attempt did
 * not deliver and whose claim is neither settled delivered nor still in hand (or that it never got, disabled at the
 * time): what a recover sends again, at most `maxSends`.
 */
export async function missedEvents(
  deps: Pick<EndpointDeps, 'endpoints' | 'teamEvents' | 'endpointAttempts' | 'claims'>,
  input: EndpointRecoverInput,
): Promise<string[]> {
  const endpoint = await deps.endpoints.get(input.teamId, input.endpointId);
  if (!endpoint) return [];
  // The whole window, a page at a time, until it holds maxSends missed: a busy team's window may hold millions.
  // Each page's heartbeat says where it got and what it found, and a retry (a worker lost, its time out) goes on
  // from there.
  const context = activityContext();
  const resumed = context?.info.heartbeatDetails as RecoverListing | undefined;
  const missed = [...(resumed?.missed ?? [])];
  if (missed.length >= input.maxSends) return missed;
  const pages = deps.teamEvents.listForTeam(
    input.teamId,
    endpoint.eventTypes,
    new Date(input.since),
    new Date(input.until),
    RECOVER_CHECK_BATCH,
    resumed?.after && { recordedAt: new Date(resumed.after.recordedAt), id: resumed.after.id },
  );
  const keyOf = (event: TeamEventHeader) => endpointDeliveryKey(event._id, endpoint._id);
  for await (const page of pages) {
    const batch = page.filter((event) => Date.parse(event.occurredAt) >= endpoint.createdAt.getTime());
    // The claims in one read: most events were delivered, and a claim settled delivered says so even when the
    // attempt row was lost (it is written best effort: a store restarting as the receiver answers loses it).
    // A claim in hand (pending, within its grace) is a delivery still on its schedule: it is left to it, or the
    // event would arrive twice (a Slack endpoint, without a webhook-id, could not even tell). One past its grace
    // was left by a holder gone (its release lost): owed.
    const claims = await deps.claims.describeEach(batch.map(keyOf));
    const unsettled = batch.filter((event) => {
      const claim = claims.get(keyOf(event));
      const inHand = claim?.state === 'pending' && !claim.stale;
      return !inHand && !(claim?.state === 'delivered' && claim.result === 'delivered');
    });
    const lastDelivered = await mapBounded(unsettled, LAST_ATTEMPT_READS_IN_FLIGHT, async (event) => {
      const [last] = await deps.endpointAttempts.listForEpisode(keyOf(event), 1);
      return last?.result === 'delivered';
    });
    for (const [i, event] of unsettled.entries()) {
      if (missed.length >= input.maxSends) break;
      if (!lastDelivered[i]) missed.push(event._id);
    }
    const last = page.at(-1)!;
    const listing: RecoverListing = {
      after: { recordedAt: last.recordedAt.toISOString(), id: last._id },
      missed: [...missed], // a copy: the SDK may send it later, when more were found past `after`
    };
    context?.heartbeat(listing);
    if (missed.length >= input.maxSends) break;
  }
  return missed;
}

export function createEndpointActivities(deps: EndpointDeps) {
  const attemptEndpoint = endpointAttempter(deps);

  /**
   * A recover's send of one event, under the delivery's claim: taken while it is absent (a delivery released) or
   * stale, settled delivered once sent, released otherwise (the sweep owes it as before). One that gave up is sent
   * and its claim brought up to date. A claim in hand elsewhere (its own schedule) or settled delivered sends
   * nothing: the recover listed it before that.
   */
  async function recoverOnce(
    key: string,
    recoverId: string,
    attempt: () => Promise<CallbackAttempt>,
  ): Promise<CallbackAttempt> {
    const claim = await deps.claims.describe(key);
    if (claim.state === 'delivered') {
      if (claim.result === 'delivered') {
        // Settled by this recover: an earlier attempt of this send, whose answer was lost with its worker.
        if (await deps.claims.markDelivered(key, recoverId)) return { result: 'delivered' };
        return { result: 'stop', detail: 'delivered already' };
      }
      const sent = await attempt();
      if (sent.result !== 'delivered') return sent;
      // Settled in this recover's name, its retry knows the send for its own. Left given up (the write not made
      // in time), a later recover would send it again: the workflow resettles it once the store is back.
      const resettled = await writtenInTime(deps.claims.resettle(key, 'delivered', recoverId));
      return resettled ? sent : { ...sent, unresettledClaim: key };
    }
    if (!(await deps.claims.tryMark(key, recoverId)))
      return { result: 'stop', detail: 'its own delivery has it in hand' };
    let sent: CallbackAttempt;
    try {
      sent = await attempt();
    } catch (err) {
      await deps.claims.unmark(key, recoverId).catch(() => undefined);
      throw err;
    }
    // Sent: a delivery left unsettled is the recover's to settle once the store is back (a claim left pending
    // would go stale and be sent again by the sweep). One not delivered is released (a release lost leaves a claim
    // that goes stale: owed as before).
    if (sent.result !== 'delivered') {
      await writtenInTime(deps.claims.unmark(key, recoverId));
      return sent;
    }
    const settled = await writtenInTime(deps.claims.markDelivered(key, recoverId));
    return settled ? sent : { ...sent, unsettledClaim: key };
  }

  /**
   * An attempt that throws (a store read before the send failed: its rate store, the endpoint's row) is a failed
   * attempt, tried again on its delivery's schedule with the claim kept. Thrown, the workflow would release the
   * delivery to the sweep, which cannot raise it again while the event's other deliveries are on their schedules.
   */
  const failedBeforeAnswer =
    (eventId: string, endpointId: string) =>
    (err: unknown): CallbackAttempt => {
      deps.log?.(`endpoint ${endpointId}: the attempt of event ${eventId} failed: ${String(err)}`);
      return { result: 'retry', detail: `the attempt failed: ${String(err)}` };
    };

  return {
    /**
     * The event with its sequence and the enabled endpoints subscribed to it when it happened (one created after it
     * never receives it) and still as they were when it was first recorded: raised again (the sweep, a retry), it
     * goes to none enabled or given its type since, as the sweep's rule of who is owed it says. With none
     * subscribed (enabled or not) it is not recorded: a team without endpoints pays one read per event.
     */
    async recordTeamEvent(event: TeamEvent): Promise<RecordedTeamEvent> {
      const happened = new Date(event.occurredAt).getTime();
      const endpoints = await deps.endpoints.listForTeam(event.teamId);
      const subscribed = endpoints.filter(
        (e) => e.eventTypes.includes(event.type) && e.createdAt.getTime() <= happened,
      );
      const none = { sequence: 0, endpointIds: [], ...deps.schedule };
      if (!subscribed.length) return none;
      const run =
        event.run ??
        (await deps.runs
          .getForTeam(event.teamId, event.runId)
          .then((found) => found && { id: found._id, status: found.status, title: found.title }));
      if (!run) return none;
      const at = deps.now();
      const recorded = await deps.teamEvents.record({ ...event, run }, at);
      // A disabled endpoint gets nothing now, but the event is kept for its recover once enabled. Raised again, it
      // goes to none enabled or given its type since it was first recorded (the sweep's rule).
      const again = recorded.recordedAt.getTime() !== at.getTime();
      const endpointIds = subscribed
        .filter((e) =>
          again ? owedTeamEvent(e, event, recorded.recordedAt) : subscribedWhen(e, event.type, happened),
        )
        .map((e) => e._id);
      return { sequence: recorded.sequence, endpointIds, ...deps.schedule };
    },

    endpointMissedEvents: (input: EndpointRecoverInput): Promise<string[]> => missedEvents(deps, input),

    async sendEndpointEvent(
      eventId: string,
      endpointId: string,
      place: AttemptPlace,
    ): Promise<CallbackAttempt> {
      const activityStarted = Date.now();
      const attempt = async () => {
        const [endpoint, event] = await Promise.all([
          deps.endpoints.getById(endpointId),
          deps.teamEvents.get(eventId),
        ]);
        return attemptEndpoint(endpointId, endpoint, eventId, event, place, activityStarted);
      };
      if (place.recoverId)
        return recoverOnce(endpointDeliveryKey(eventId, endpointId), place.recoverId, attempt);
      // The schedule's last attempt throws as before: released, the sweep tries it again once the store is back.
      return place.waitIfRetried === undefined
        ? attempt()
        : attempt().catch(failedBeforeAnswer(eventId, endpointId));
    },

    /** The event read once and the endpoints in one read: what each attempt would read for itself. */
    async sendEndpointEventToEach(eventId: string, sends: EndpointSend[]): Promise<CallbackAttempt[]> {
      const activityStarted = Date.now();
      const [endpoints, event] = await Promise.all([
        deps.endpoints.getByIds(sends.map((s) => s.endpointId)),
        deps.teamEvents.get(eventId),
      ]);
      const byId = new Map(endpoints.map((e) => [e._id, e]));
      // Failing the activity would have Temporal retry the whole batch, sending again to endpoints that took it.
      return Promise.all(
        sends.map(({ endpointId, place }) =>
          attemptEndpoint(endpointId, byId.get(endpointId), eventId, event, place, activityStarted).catch(
            failedBeforeAnswer(eventId, endpointId),
          ),
        ),
      );
    },
  };
}
