// The callback family's activities: one attempt of a run's callback per call, recorded in the attempt log and
// paced per receiver. The workflow owns the retry schedule (durable timers); this reports how one attempt went.
import type { AttemptPlace, CallbackAttempt } from '../../contract/activities';
import {
  callbackBody,
  callbackWaitSeconds,
  heldWaitSeconds,
  type DeliveryCategory,
} from '../../domain/callback';
import {
  DEFAULT_LOOKUP_TIMEOUT_MS,
  failureCategory,
  ResolverUnavailableError,
  TargetRefusedError,
  type PinnedResponse,
} from '../../delivery/ssrfGuard';
import { retryAfterMs } from '../../platform/retryAfter';
import {
  classifyCallbackStatus,
  postSignedCallback,
  type Signing,
  type CallbackSendDeps,
} from '../../delivery/callback/send';
import {
  originOf,
  type OriginPacing,
  type PacingEntry,
  type PacingHold,
} from '../../delivery/callback/pacing';
import type { Run } from '../../domain/run';
import type { RunStore } from '../../store/runs';
import type { CallbackAttemptRow, CallbackAttemptStore } from '../../store/callback/attempts';
import type { Metrics } from '../../platform/metrics';
import type { ClaimStore } from '../../store/claims';
import { withDeadline } from '../../platform/deadline';
import { activityContext } from '../activityContext';

export interface CallbackDeps extends CallbackSendDeps {
  runs: RunStore;
  /** The attempt log; absent where activity functions are called without a store (the test ping). */
  callbackAttempts?: CallbackAttemptStore;
  /** Operator logs: the detail behind a category (addresses, resolver codes) goes here, never to the owner. */
  log?: (line: string) => void;
  /** Counts and times each attempt sent, the held ones, and the episodes' callbacks given up; absent: nothing is recorded. */
  metrics?: Pick<Metrics, 'callbackAttempt' | 'callbackGaveUp' | 'callbackHeld'>;
  /** The worker's pacing per receiver origin (one per worker process); absent: attempts go out unpaced. */
  pacing?: OriginPacing;
  /** The deliveries' claims, held again by an attempt that may have found them stale (claimCheck); absent: not checked. */
  claims?: Pick<ClaimStore, 'renew' | 'graceMs'>;
}

const secondsOf = (ms: number | undefined): number | undefined =>
  ms === undefined ? undefined : Math.ceil(ms / 1000);

/** How many times a row is written before the attempt is reported without it (the send is what counts). */
const RECORD_TRIES = 3;

/**
 * The whole time the attempt log may take after the request (every try, every number probed): the row is
 * written after the receiver answered, so a store that stalls must not hold the activity past its start-to-close
 * (Temporal would run it again and POST a second time). Past it the row is lost, never the attempt's result.
 */
export const RECORD_DEADLINE_MS = 3000;

/**
 * A store write after a send (a claim's settle, the attempt log's clear), made within RECORD_DEADLINE_MS or not at all: a store failing or stalling must not
 * fail the activity nor hold it past its start-to-close (its retry would send again). True when it was made.
 */
export const writtenInTime = (write: Promise<unknown>): Promise<boolean> =>
  withDeadline(
    write.then(() => true),
    RECORD_DEADLINE_MS,
    () => false,
  ).catch(() => false);

/**
 * What an earlier try of this activity delivered (Temporal runs it again when its worker was lost after the
 * receiver's 2xx and the attempt's row, before its answer): the retry sends nothing, so a receiver refusing the copy
 * cannot turn the delivery into a give-up. Undefined on a first try, or when the log does not answer in time (the
 * attempt goes, as before: at least once). The sliver between the 2xx and the row is the webhook-id's to dedupe.
 */
export async function deliveredByEarlierTry(
  log: Pick<CallbackAttemptStore, 'deliveredBy'> | undefined,
  episodeId: string,
): Promise<CallbackAttempt | undefined> {
  const info = activityContext()?.info;
  const workflowRunId = info?.workflowExecution?.runId;
  if (!log || !info || info.attempt <= 1 || !workflowRunId) return undefined;
  const row = await withDeadline(
    log.deliveredBy(episodeId, workflowRunId, info.activityId),
    RECORD_DEADLINE_MS,
    () => undefined,
  ).catch(() => undefined);
  return row && { result: 'delivered', ...(row.status !== undefined ? { status: row.status } : {}) };
}

/**
 * Room an attempt needs beyond the request's own timeout: the guard's lookup before it, the writes after the answer
 * (the log's row, then a redelivery's clear of its give-up, or an endpoint's streak and a recover's claim settle),
 * and a margin.
 */
export const AFTER_REQUEST_MS = DEFAULT_LOOKUP_TIMEOUT_MS + 3 * RECORD_DEADLINE_MS + 2000;

/**
 * Room for the reads before the request (the run, an endpoint's rate; on Temporal's retry, whether an earlier try
 * delivered) that a start-to-close made for the timeout leaves; one that leaves less was made for a shorter timeout.
 */
const READS_ROOM_MS = 5000;

/** Between the longest wait for a slot and the request: a slot granted as the wait ends still finds its time. */
const SLOT_GRANT_SLACK_MS = 1000;

/** The shortest request timeout an attempt is made with; less left, it is held (nothing sent). */
export const MIN_REQUEST_MS = 1000;

/**
 * Whether the start-to-close was made for this timeout: the request, what comes with it and the reads before it fit.
 * One made for a shorter timeout (a delivery started before CALLBACK_TIMEOUT_SECONDS was raised, or by an API whose
 * config lags the worker's) never fits the whole of it.
 */
const madeFor = (startToCloseMs: number, timeoutMs: number): boolean =>
  startToCloseMs >= timeoutMs + AFTER_REQUEST_MS + READS_ROOM_MS;

/**
 * How long an attempt may wait for a slot to its origin, `elapsedMs` into an activity of `startToCloseMs`: what its
 * start-to-close leaves once the request's own timeout and what comes with it are counted, so the wait never eats
 * into the receiver's timeout and the activity never outlives its start-to-close (Temporal would run it again).
 */
export function slotWaitMs(startToCloseMs: number, elapsedMs: number, timeoutMs: number): number {
  const left = startToCloseMs - elapsedMs - AFTER_REQUEST_MS;
  // Made for a shorter timeout: half of what the request may have, never the shortest request's share of it.
  if (!madeFor(startToCloseMs, timeoutMs)) return (left - MIN_REQUEST_MS) / 2;
  return left - timeoutMs - SLOT_GRANT_SLACK_MS;
}

/**
 * The request's own timeout, `elapsedMs` into an activity of `startToCloseMs`: CALLBACK_TIMEOUT_SECONDS while the
 * start-to-close leaves room for it and what follows; none when a slow store before it took that room (the attempt
 * is held, not cut short: a timeout of ours is no failure of the receiver). A start-to-close made for a shorter
 * timeout gives its attempts what it leaves, or every one would be held.
 */
export function requestTimeoutMs(startToCloseMs: number, elapsedMs: number, configuredMs: number): number {
  const left = startToCloseMs - elapsedMs - AFTER_REQUEST_MS;
  if (!madeFor(startToCloseMs, configuredMs)) return Math.min(left, configuredMs);
  return left >= configuredMs ? configuredMs : 0;
}

/**
 * A part of the attempt's time (slotWaitMs, requestTimeoutMs) as it stands now in this activity, started at
 * `startedAt`; outside an activity, the request's timeout.
 */
function inThisActivity(
  part: (startToCloseMs: number, elapsedMs: number, timeoutMs: number) => number,
  startedAt: number,
  timeoutMs: number,
): number {
  const startToCloseMs = activityContext()?.info.startToCloseTimeoutMs;
  return startToCloseMs ? part(startToCloseMs, Date.now() - startedAt, timeoutMs) : timeoutMs;
}

/**
 * The request in its origin's slot, its outcome told to the origin's breaker: an answer worth another try (5xx,
 * 429, 408, 3xx), a timeout or a network error is the origin failing; any other answer is the origin up; a refusal
 * by the guard or a resolver without an answer never reached it.
 */
async function inSlot(
  entry: Extract<PacingEntry, { held: false }> | undefined,
  request: () => Promise<PinnedResponse>,
): Promise<PinnedResponse> {
  if (!entry) return request();
  try {
    const res = await request();
    entry.done(classifyCallbackStatus(res.status) === 'retry' ? 'failure' : 'success');
    return res;
  } catch (err) {
    const reached = !(err instanceof TargetRefusedError || err instanceof ResolverUnavailableError);
    entry.done(reached ? 'failure' : 'neutral');
    throw err;
  }
}

/**
 * Writes the attempt's row within RECORD_DEADLINE_MS; a store that stays down or slow loses the row. Answers
 * whether it was written.
 */
async function recordAttempt(
  deps: { log?: (line: string) => void; store?: CallbackAttemptStore },
  row: Omit<CallbackAttemptRow, '_id' | 'attempt'>,
  guess: number,
): Promise<boolean> {
  const store = deps.store;
  if (!store) return true;
  const deadline = Date.now() + RECORD_DEADLINE_MS;
  const notRecorded = (why: string) => {
    deps.log?.(`callback: attempt of episode ${row.episodeId} not recorded: ${why}`);
    return false;
  };
  const write = async (): Promise<boolean> => {
    for (let tries = 1; ; tries++) {
      try {
        // A later try asks first whether an earlier one's row landed after all (its answer lost, not its write).
        await (tries === 1 ? store.record(row, guess, deadline) : store.recordOnce(row, guess, deadline));
        return true;
      } catch (err) {
        const pause = 500 * tries;
        if (tries >= RECORD_TRIES || Date.now() + pause >= deadline) return notRecorded(String(err));
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  };
  return withDeadline(write(), RECORD_DEADLINE_MS, () =>
    notRecorded(`no answer from the store within ${RECORD_DEADLINE_MS} ms`),
  );
}

/**
 * Whether the episode's own schedule gives up on this answer (the workflow settles the claim gave_up on it): a
 * final refusal, or no delivery on the last attempt the schedule has (no wait after it). A redelivery's failure
 * changes nothing of the kind; an attempt without its place (activity tasks scheduled before it) is not told.
 */
function endsSchedule(outcome: CallbackAttempt, place: AttemptPlace | undefined): boolean {
  if (!place || (place.trigger ?? 'episode') !== 'episode' || outcome.result === 'delivered') return false;
  if (outcome.result === 'retry' && outcome.held && place.heldWaits) return false; // it waits, it is not spent
  return outcome.result === 'stop' || place.waitIfRetried === undefined;
}

/** The wait the workflow takes after this attempt, as its row tells it: a held one's, or the schedule's. */
function nextWaitSeconds(outcome: CallbackAttempt, place: AttemptPlace | undefined): number | undefined {
  if (outcome.result !== 'retry') return undefined;
  if (outcome.held && place?.heldWaits)
    return heldWaitSeconds(outcome.retryAfterSeconds, place.heldWaits.held);
  if (place?.waitIfRetried === undefined) return undefined;
  return callbackWaitSeconds(place.waitIfRetried, outcome.retryAfterSeconds, place.scheduleUncapped);
}

/**
 * An attempt the worker held back: worth another try and not the receiver's failure. An open breaker's cool-down
 * sets the next wait; with no slot free, one frees within a receiver's timeout (every request holding one ends by
 * then).
 */
function heldOutcome(
  entry: { held: PacingHold; retryAfterMs?: number; detail?: string },
  origin: string,
  timeoutMs: number,
): CallbackAttempt & { result: 'retry' } {
  const retryAfterSeconds =
    entry.retryAfterMs !== undefined ? secondsOf(entry.retryAfterMs) : Math.ceil(timeoutMs / 1000);
  const detail =
    entry.detail ??
    (entry.held === 'breaker_open'
      ? `breaker_open: ${origin} failed too often in a row for this team; this worker holds its callbacks for now`
      : `paced: no slot to ${origin} came free in time`);
  return { result: 'retry', detail, held: entry.held, ...(retryAfterSeconds ? { retryAfterSeconds } : {}) };
}

/** The attempt log's row for one sent (or held) attempt, with where it sits in the schedule and what ran it. */
function attemptRow(
  sent: {
    episodeId: string;
    runId: string;
    endpointId?: string;
    teamId: string;
    at: Date;
    durationMs: number;
    outcome: CallbackAttempt;
    error: DeliveryCategory | PacingHold;
    /** The Temporal activity attempt that made it, when not this one's (a row written after the fact). */
    activityAttempt?: number;
  },
  place: AttemptPlace | undefined,
): Omit<CallbackAttemptRow, '_id' | 'attempt'> {
  const { episodeId, runId, endpointId, teamId, at, durationMs, outcome } = sent;
  const info = activityContext()?.info;
  const wait = nextWaitSeconds(outcome, place);
  return {
    episodeId,
    runId,
    ...(endpointId !== undefined ? { endpointId } : {}),
    teamId,
    at,
    durationMs,
    result: outcome.result,
    ...(outcome.status !== undefined ? { status: outcome.status } : { error: sent.error }),
    ...(outcome.result === 'retry' && outcome.retryAfterSeconds !== undefined
      ? { retryAfterSeconds: outcome.retryAfterSeconds }
      : {}),
    // The workflow starts its timer as this activity returns: the next attempt comes about then.
    ...(wait !== undefined
      ? { nextWaitSeconds: wait, nextAttemptAt: new Date(at.getTime() + durationMs + wait * 1000) }
      : {}),
    trigger: place?.trigger ?? 'episode',
    ...(place?.recoverId ? { recoverId: place.recoverId } : {}),
    // What a recover of the team's give-ups looks for.
    ...(endsSchedule(outcome, place) ? { gaveUp: true as const } : {}),
    ...(info
      ? {
          activityAttempt: sent.activityAttempt ?? info.attempt,
          workflowId: info.workflowExecution?.workflowId,
          workflowRunId: info.workflowExecution?.runId,
          ...(sent.activityAttempt === undefined ? { activityId: info.activityId } : {}),
        }
      : {}),
  };
}

export function createCallbackActivities(deps: CallbackDeps) {
  return {
    /** The attempts the episode has logged (0 without a log). */
    async callbackAttemptCount(episodeId: string): Promise<number> {
      return (await deps.callbackAttempts?.countForEpisode(episodeId)) ?? 0;
    },

    /**
     * One attempt, recorded in the attempt log. `place` comes from the workflow (absent in activity tasks
     * scheduled before the log existed: then the log numbers it from 1 and notes no wait), and so does the run's
     * team, under which the run is read (absent in tasks scheduled before it was passed).
     */
    async sendCallback(
      episodeId: string,
      runId: string,
      place?: AttemptPlace,
      teamId?: string,
    ): Promise<CallbackAttempt> {
      const attempt = await attemptOnce(deps, episodeId, runId, place, teamId);
      const recorded = await logAttempt(deps, deps.callbackAttempts, { episodeId, runId }, attempt, place);
      // A give-up the log lost would be invisible to recovers (they find give-ups by its row): the workflow has it
      // written after this activity, which must end before Temporal would send it again.
      if (
        !recorded &&
        attempt.sent &&
        attempt.outcome.result !== 'delivered' &&
        endsSchedule(attempt.outcome, place)
      )
        return {
          ...attempt.outcome,
          unrecordedGiveUp: {
            teamId: attempt.teamId,
            at: attempt.at.toISOString(),
            durationMs: attempt.durationMs,
            error: attempt.error,
            activityAttempt: activityContext()?.info.attempt,
          },
        };
      // Delivered after it gave up: no recover looks at it again. Best effort, within the record's deadline (the
      // activity must end before Temporal would send it again): one not cleared costs a later recover a read of it
      // (its claim says redelivered, so nothing is sent).
      if (place?.trigger === 'redeliver' && attempt.outcome.result === 'delivered' && deps.callbackAttempts)
        await writtenInTime(deps.callbackAttempts.clearGaveUp(episodeId));
      return attempt.outcome;
    },

    async recordCallbackGiveUp(
      episodeId: string,
      runId: string,
      place: AttemptPlace,
      attempt: CallbackAttempt,
    ): Promise<void> {
      if (attempt.result === 'delivered' || !attempt.unrecordedGiveUp || !deps.callbackAttempts) return;
      const { unrecordedGiveUp: lost, ...outcome } = attempt;
      // The row names the attempt's own activity (this one is the workflow's later write of it).
      const row = attemptRow({ episodeId, runId, ...lost, at: new Date(lost.at), outcome }, place);
      await deps.callbackAttempts.recordOnce(row, place.attempt);
    },
  };
}

/**
 * An attempt's metrics and its row in `log` (a run's callbacks', or a team endpoint's), under `logged.episodeId`.
 * Without metrics (a team endpoint's), only the row. Answers whether the row, if one was owed, was written.
 */
export async function logAttempt(
  deps: Pick<CallbackDeps, 'log' | 'metrics'>,
  log: CallbackAttemptStore | undefined,
  logged: { episodeId: string; runId: string; endpointId?: string },
  attempt: AttemptResult,
  place: AttemptPlace | undefined,
): Promise<boolean> {
  let recorded = true;
  if (attempt.sent) {
    const { outcome, at, durationMs, teamId } = attempt;
    if (attempt.held) deps.metrics?.callbackHeld(attempt.held);
    else deps.metrics?.callbackAttempt(outcome.result, outcome.status, durationMs / 1000);
    recorded = await recordAttempt(
      { log: deps.log, store: log },
      attemptRow({ ...logged, teamId, at, durationMs, outcome, error: attempt.error }, place),
      // The schedule's own number: one taken already (held attempts, a replay, a redelivery) goes past the newest.
      place?.attempt ?? 1,
    );
  }
  // A claim found another's stops the schedule without giving up: the episode answers claimed_elsewhere.
  const claimedElsewhere = attempt.outcome.result === 'stop' && attempt.outcome.claimedElsewhere === true;
  if (endsSchedule(attempt.outcome, place) && !claimedElsewhere) deps.metrics?.callbackGaveUp();
  return recorded;
}

/** How one attempt went: `sent` when a request was tried (or held back by the worker), with what the log needs. */
export type AttemptResult =
  | { sent: false; outcome: CallbackAttempt }
  | {
      sent: true;
      outcome: CallbackAttempt;
      error: DeliveryCategory | PacingHold;
      /** The worker held it back (nothing went out): logged, but not the receiver's answer. */
      held?: PacingHold;
      at: Date;
      durationMs: number;
      teamId: string;
    };

/**
 * An attempt given its claim (place.claim) holds it again in the receiver's slot, just before the request: the
 * claim may have gone stale while the attempt waited in a backed-up task queue, and another holder (a recover, the
 * sweep) taken it over. Another's, nothing is sent and the attempt says so. A claim taken less than half the grace
 * ago cannot have gone stale (the half leaves room for the request and for clocks apart): not asked. Undefined
 * when there is nothing to check.
 */
export function claimCheck(
  claims: Pick<ClaimStore, 'renew' | 'graceMs'> | undefined,
  place: AttemptPlace | undefined,
): SignedSend['notOwed'] {
  const claim = place?.claim;
  if (!claim || !claims) return undefined;
  return async () => {
    if (claim.heldSince !== undefined && Date.now() - claim.heldSince < claims.graceMs / 2) return undefined;
    return (await claims.renew(claim.key, claim.holder))
      ? undefined
      : { result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true };
  };
}

/** What an attempt reports and what its log row names as its error. */
type Settled = { outcome: CallbackAttempt; error: DeliveryCategory | PacingHold };

/** What the owner sees (the claim's gave_up result) is a category; the detail is logged for operators. */
type NoteFailure = (category: DeliveryCategory, detail: string) => string;

/**
 * The attempt itself. `sent`: a request was tried (answered, refused by the guard, timed out...), so it
 * belongs in the log and the metrics, `at` and `durationMs` covering it from the guard's lookup to the last
 * byte; a run without a callback is not an attempt.
 */
async function attemptOnce(
  deps: CallbackDeps,
  episodeId: string,
  runId: string,
  place: AttemptPlace | undefined,
  runTeamId: string | undefined,
): Promise<AttemptResult> {
  const activityStarted = Date.now();
  const delivered = await deliveredByEarlierTry(deps.callbackAttempts, episodeId);
  if (delivered) return { sent: false, outcome: delivered };
  const stop = (detail: string) => ({ sent: false as const, outcome: { result: 'stop' as const, detail } });
  const run = runTeamId ? await deps.runs.getForTeam(runTeamId, runId) : await deps.runs.getById(runId);
  if (!run?.callback) return stop('the run has no callback');
  const body = callbackBody(run, episodeId);
  if (!body) return stop(`a ${run.status} run gets no callback`);
  // The breaker's say is the team's own at the receiver's origin (another team's failures there never hold it).
  return sendSigned(deps, {
    target: run.callback,
    webhookId: episodeId,
    json: JSON.stringify(body),
    teamId: run.teamId,
    breakerKey: run.teamId,
    about: `run ${runId} episode ${episodeId}`,
    place,
    activityStarted,
    notOwed: claimCheck(deps.claims, place),
  });
}

/** What a signed send needs: the POST's settings, the worker's pacing per origin and the operator log. */
export type SignedSendDeps = CallbackSendDeps & Pick<CallbackDeps, 'log' | 'pacing'>;

/** One signed attempt's target and body, and whose breaker at the origin judges it. */
export interface SignedSend {
  target: Pick<NonNullable<Run['callback']>, 'url' | 'secret' | 'previousSecret'>;
  webhookId: string;
  json: string;
  /** Absent: signed. */
  signing?: Signing;
  /** The team the attempt is for (its log row's). */
  teamId: string;
  /** Whose failures at the origin open the breaker that holds this attempt. */
  breakerKey: string;
  /** What the operator log names (never shown to the owner). */
  about: string;
  place: AttemptPlace | undefined;
  /** When the activity started: the wait for a slot fits in what its start-to-close leaves. */
  activityStarted: number;
  /** A hold of the caller's own before any slot is taken (a rate the receiver asked for). */
  admit?: () => Promise<{ held: PacingHold; retryAfterMs?: number; detail: string } | undefined>;
  /**
   * Asked once the slot is taken, just before the request, by a send owed only while something holds (a question
   * still open, the delivery's claim): an outcome answers instead of sending (the slot given back, no attempt).
   */
  notOwed?: () => Promise<CallbackAttempt | undefined>;
}

/**
 * One signed POST in its origin's slot, paced and judged by the breaker, answered as an attempt: `sent` when a
 * request was tried (or held back by the worker), with what the attempt log needs.
 */
export async function sendSigned(deps: SignedSendDeps, send: SignedSend): Promise<AttemptResult> {
  const { target, webhookId, place } = send;
  const failed: NoteFailure = (category, detail) => {
    deps.log?.(`callback: ${send.about}: ${category}: ${detail}`);
    return category;
  };
  const at = deps.now();
  const started = Date.now();
  const sent = ({ outcome, error }: Settled) => ({
    sent: true as const,
    outcome,
    error,
    at,
    durationMs: Date.now() - started,
    teamId: send.teamId,
  });
  const origin = originOf(target.url);
  const ownHold = await send.admit?.();
  if (ownHold) {
    const outcome = heldOutcome(ownHold, origin ?? target.url, deps.timeoutMs);
    return { ...sent({ outcome, error: ownHold.held }), held: ownHold.held };
  }
  // A slot of the receiver's origin, and the breaker's say. A manual redelivery (a human asked) goes past an open
  // breaker, still in a slot; a recover's does not. The wait for a slot comes before the request's own timeout.
  const trigger = place?.trigger ?? 'episode';
  const entry =
    deps.pacing && origin
      ? await deps.pacing.enter(origin, {
          maxWaitMs: inThisActivity(slotWaitMs, send.activityStarted, deps.timeoutMs),
          signal: activityContext()?.cancellationSignal,
          bypassBreaker: trigger === 'redeliver' && !place?.recoverId,
          tenant: send.breakerKey,
        })
      : undefined;
  if (entry?.held) {
    const outcome = heldOutcome(entry, origin!, deps.timeoutMs);
    return { ...sent({ outcome, error: entry.held }), held: entry.held };
  }
  const unowed = send.notOwed && (await notOwedInSlot(entry, send.notOwed));
  if (unowed) return { sent: false, outcome: unowed };
  // A slow store before the request (the run's read, the rate's hits) costs a held attempt, never a repeat.
  const timeoutMs = inThisActivity(requestTimeoutMs, send.activityStarted, deps.timeoutMs);
  if (timeoutMs < MIN_REQUEST_MS) {
    entry?.done('neutral');
    const late = {
      held: 'paced' as const,
      retryAfterMs: 1000,
      detail: 'paced: this attempt has no time left for the request (the store was slow before it)',
    };
    return {
      ...sent({ outcome: heldOutcome(late, origin ?? target.url, deps.timeoutMs), error: 'paced' }),
      held: 'paced',
    };
  }
  let res: PinnedResponse;
  try {
    res = await inSlot(entry, () =>
      postSignedCallback({ ...deps, timeoutMs }, target, webhookId, send.json, send.signing),
    );
  } catch (err) {
    return sent(unansweredOutcome(err, failed));
  }
  return sent(answeredOutcome(res, failed, deps.now()));
}

/** The caller's last say before the request; the slot is given back when it says no, or cannot say. */
async function notOwedInSlot(
  entry: Extract<PacingEntry, { held: false }> | undefined,
  notOwed: () => Promise<CallbackAttempt | undefined>,
): Promise<CallbackAttempt | undefined> {
  const release = () => entry?.done('neutral');
  const unowed = await notOwed().catch((err: unknown) => {
    release();
    throw err;
  });
  if (unowed) release();
  return unowed;
}

/**
 * A request that got no answer: no verdict from the resolver, or a name that does not exist now, follow the retry
 * schedule (a receiver's name can come back within it); every other refusal by the guard is final; a timeout or
 * a network error is worth another try.
 */
function unansweredOutcome(err: unknown, failed: NoteFailure): Settled {
  const error = failureCategory(err);
  if (err instanceof ResolverUnavailableError) {
    return { outcome: { result: 'retry', detail: failed(err.category, err.message) }, error };
  }
  if (err instanceof TargetRefusedError) {
    const result = err.category === 'refused: dns' ? 'retry' : 'stop';
    return { outcome: { result, detail: failed(err.category, err.reason) }, error };
  }
  return { outcome: { result: 'retry', detail: failed(error, String(err)) }, error };
}

/** The receiver's answer: delivered, refused for good, or worth another try (with its Retry-After). */
function answeredOutcome(res: PinnedResponse, failed: NoteFailure, now: Date): Settled {
  const error = `http ${res.status}` as const;
  const result = classifyCallbackStatus(res.status);
  if (result === 'delivered') return { outcome: { result, status: res.status }, error };
  const detail = failed(error, `receiver answered ${res.status}`);
  if (result === 'stop') return { outcome: { result, status: res.status, detail }, error };
  const retryAfterSeconds = secondsOf(retryAfterMs(res.headers['retry-after'], now.getTime()));
  return { outcome: { result, status: res.status, detail, retryAfterSeconds }, error };
}
