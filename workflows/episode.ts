// One outcome episode: a run paused or ended. Each outbound family is an independent branch with its own
// claim key; one failing never holds up the others. The workflow only decides; activities do the I/O.
import { condition, isCancellation, patched, sleep } from '@temporalio/workflow';
import {
  EPISODE_OPTIONS_WHEN_ABSENT,
  type BranchResult,
  type EpisodeOptions,
  type EpisodeResult,
} from '../contract/workflows';
import type { AttemptPlace, CallbackAttempt } from '../contract/activities';
import { shouldNotify } from '../domain/callback';
import { claimKeys, type RunOutcome } from '../domain/outcome';
import { forPush, kindFor, MISSED_RECIPIENTS_RETRY_SECONDS } from '../domain/push';
import { teamEventFromOutcome } from '../domain/teamEvents';
import {
  callbackAttemptCalls,
  callsInTurn,
  fanOutCalls,
  holder,
  localStoreCalls,
  outlastingStoreOutages,
  QUICK_CALLS,
  quickCalls,
  type QuickCalls,
} from './common';
import { handOffOperatorAlert, sendOperatorAlert } from './operatorAlert';
import { deliverOnSchedule } from './signedDelivery';
import { handOffTeamEvent } from './teamEvent';

export { CALLBACK_HELD_ATTEMPT_WAITS_PATCH, CALLBACK_RELEASES_ON_THROW } from './signedDelivery';

/** Marks histories in which a released push is retried on a timer while a sibling branch still runs. */
export const RELEASED_PUSH_RETRIED_PATCH = 'released-family-retried-while-siblings-run';

/**
 * Marks histories in which a released push's retries back off (one sweep interval, doubling to an hour): with a
 * day-long callback schedule, one every sweep interval was hundreds of tries and thousands of history events.
 */
export const RELEASED_PUSH_BACKOFF_PATCH = 'released-push-retries-back-off';
const RELEASED_RETRY_MAX_SECONDS = 3600;

/** A push's n-th wait before it is tried again: one sweep interval, doubling to an hour (or the interval, if longer). */
const backedOffSeconds = (every: number, retried: number): number =>
  Math.min(every * 2 ** retried, Math.max(every, RELEASED_RETRY_MAX_SECONDS));

/**
 * Marks histories in which a push whose every send the push services refused as a message (400, 413: not retried as
 * is) settles given up. Before, it was released, and the sweep sent the same message again every pass for its reach.
 * Only such a fan-out reaches it.
 */
export const PUSH_REFUSED_GIVES_UP_PATCH = 'push-refused-everywhere-gives-up';
const PUSH_REFUSED_RESULT = 'gave_up: every push service refused the message';

/** Nobody reached or held, and every send refused as a message: sending it again changes nothing. */
const refusedEverywhere = (result: { failed: number; rejected?: number; held?: number }): boolean =>
  result.failed > 0 && result.rejected === result.failed && !result.held;

/**
 * Marks histories in which a recipient held for their digest is not a delivery: a fan-out that held someone but
 * whose sends all failed releases the claim (older ones settled it, and the others were never tried again).
 */
export const HELD_IS_NOT_DELIVERED_PATCH = 'held-recipient-is-not-a-delivery';

/**
 * Marks histories in which a push that reached someone but failed transiently for others (their push service down)
 * tries those others again on a durable timer (one sweep interval, doubling to an hour, for a day): the episode was
 * confirmed on the first success and the others were never tried again.
 */
export const PARTIAL_PUSH_RETRIED_PATCH = 'push-retries-recipients-a-partial-fan-out-missed';

/**
 * Marks histories in which a question's retry of the people its fan-out missed reads the standby veto first: an
 * assistant standing by since (a watch begun after the first push) was not asked, and they were pushed all the same.
 */
export const MISSED_RETRY_VETOED_PATCH = 'question-retry-of-missed-reads-standby-veto';

/** Marks histories in which an episode raises its team event: the team's endpoints hear of the pause or the end. */
export const TEAM_EVENT_PATCH = 'episode-raises-team-event';

/** Marks histories in which a callback that gave up raises a callback_exhausted operator alert. */
export const CALLBACK_EXHAUSTED_ALERT_PATCH = 'callback-gave-up-alerts-operator';

/**
 * Marks executions in which a give-up whose attempt could not write its row (the store away past the record's
 * deadline) has the row written after the settle and the alert, outlasting the outage. Recovers find give-ups by that row:
 * before, such a callback was never redelivered by one. Only such an attempt reaches the check.
 */
export const CALLBACK_GIVE_UP_RECORDED_AGAIN_PATCH = 'callback-give-up-recorded-again';

async function pushBranch(
  quick: QuickCalls,
  outcome: RunOutcome,
  options: EpisodeOptions,
): Promise<BranchResult> {
  const kind = kindFor(outcome);
  if (!kind) return 'not_owed';
  // The veto comes before any claim, so the episode stays replayable once the watch ends.
  if (kind === 'human_input_requested' && (await quick.isStandbyVetoed(outcome.runId, outcome.teamId)))
    return 'vetoed';
  const key = claimKeys.push(outcome.episodeId);
  const me = holder();
  if (!(await quick.tryMark(key, me))) return 'claimed_elsewhere';
  let settled: BranchResult;
  let missedSome = false;
  try {
    const result = await fanOutCalls.deliverPush(forPush(outcome));
    // Confirmed on one success; a deliberate no-op (no recipient, no sink) is confirmed too, never retried. A
    // recipient held for their digest is in their digest's hands: confirmed when nobody else was tried, released
    // when every send failed (the retry holds them again, with no second digest entry).
    const reached = result.addressable && result.delivered + result.alreadyDelivered > 0;
    if (!result.addressable) settled = 'not_addressable';
    else if (reached) {
      settled = 'delivered';
      missedSome = result.retryable > 0;
    } else if (refusedEverywhere(result) && patched(PUSH_REFUSED_GIVES_UP_PATCH)) settled = 'gave_up';
    else if (!result.held) settled = 'released';
    else settled = !patched(HELD_IS_NOT_DELIVERED_PATCH) || result.attempted === 0 ? 'delivered' : 'released';
  } catch {
    settled = 'released';
  }
  if (settled === 'released') await quick.unmark(key, me);
  else if (settled === 'gave_up') await quick.markDelivered(key, me, PUSH_REFUSED_RESULT);
  else await quick.markDelivered(key, me, settled);
  // Only fan-outs that missed someone reach the patch check: other histories replay unchanged.
  if (missedSome && patched(PARTIAL_PUSH_RETRIED_PATCH)) await retryMissed(quick, outcome, options);
  return settled;
}

/**
 * The recipients a confirmed fan-out missed (a transient failure of their push service) are tried again on a
 * durable timer, one sweep interval later, doubling to an hour, for a day: each try skips every device already
 * reached (and holds again whoever it held), so it reaches only those still owed it.
 */
async function retryMissed(quick: QuickCalls, outcome: RunOutcome, options: EpisodeOptions): Promise<void> {
  const every = options.releasedRetrySeconds ?? EPISODE_OPTIONS_WHEN_ABSENT.releasedRetrySeconds!;
  const until = Date.now() + MISSED_RECIPIENTS_RETRY_SECONDS * 1000;
  const question = kindFor(outcome) === 'human_input_requested';
  for (let retried = 0; Date.now() < until; retried++) {
    await sleep(backedOffSeconds(every, retried) * 1000);
    // An assistant standing by since the first push: nobody more is asked, as the first push would not have.
    if (question && patched(MISSED_RETRY_VETOED_PATCH))
      if (await quick.isStandbyVetoed(outcome.runId, outcome.teamId)) return;
    try {
      const result = await fanOutCalls.deliverPush(forPush(outcome));
      if (!result.addressable || result.retryable === 0) return;
    } catch {
      // Every attempt of this try failed: the next one comes later.
    }
  }
}

/**
 * The completion callback: its own claim, then the signed delivery's schedule (deliverOnSchedule) with the episode
 * id as webhook-id; one that gave up tells the operator.
 */
async function callbackBranch(
  quick: QuickCalls,
  inTurn: InTurn,
  outcome: RunOutcome,
  options: EpisodeOptions,
): Promise<BranchResult> {
  if (!shouldNotify(outcome)) return 'not_owed';
  const callbackAttempt = callbackAttemptCalls(options.callbackAttemptSeconds);
  // The last attempt, when the schedule gave up on it and its row in the attempt log was lost.
  let unrecorded: { place: AttemptPlace; attempt: CallbackAttempt } | undefined;
  return deliverOnSchedule(quick, {
    key: claimKeys.callback(outcome.episodeId),
    waits: options.callbackRetrySeconds,
    // Histories started without a jitter keep their waits as listed and draw nothing.
    jitter: options.callbackRetryJitter,
    attempt: async (place) => {
      const attempt = await callbackAttempt.sendCallback(
        outcome.episodeId,
        outcome.runId,
        place,
        outcome.teamId,
      );
      unrecorded =
        attempt.result !== 'delivered' && attempt.unrecordedGiveUp ? { place, attempt } : undefined;
      return attempt;
    },
    gaveUp: async (attempts, lastError) => {
      if (patched(CALLBACK_EXHAUSTED_ALERT_PATCH))
        await alertCallbackExhausted(quick, outcome, attempts, lastError);
      if (unrecorded && patched(CALLBACK_GIVE_UP_RECORDED_AGAIN_PATCH))
        await recordGiveUp(inTurn, outcome, unrecorded.place, unrecorded.attempt);
    },
  });
}

/**
 * A give-up's row that its attempt could not write, written after the settle and the alert (recovers find give-ups
 * by it), outlasting a store outage. Best effort past that: the claim's gave_up and the alert stand.
 */
async function recordGiveUp(
  inTurn: InTurn,
  outcome: RunOutcome,
  place: AttemptPlace,
  attempt: CallbackAttempt,
): Promise<void> {
  try {
    await outlastingStoreOutages(
      () =>
        inTurn(() => localStoreCalls.recordCallbackGiveUp(outcome.episodeId, outcome.runId, place, attempt)),
      () => true,
    );
  } catch (err) {
    if (isCancellation(err)) throw err;
    // Lost, as it was before: a manual redelivery still finds the callback by its claim.
  }
}

/**
 * The operator hears of a callback that gave up, through its own ops|callback:<episode> workflow; the branch only
 * waits for that start. Best effort: the callback's own result stands whatever happens here.
 */
async function alertCallbackExhausted(
  quick: QuickCalls,
  outcome: RunOutcome,
  attempts: number,
  lastError: string,
): Promise<void> {
  try {
    const alert = await quick.callbackExhaustedAlert(outcome, attempts, lastError);
    if (alert) await handOffOperatorAlert(alert, false);
  } catch {
    // The alert is lost, not the callback's settlement: the claim is settled already.
  }
}

/**
 * The operator alert for a failed run (classify reads the run as persisted now), handed to its own retrying
 * ops| workflow; the branch reports how it ended.
 */
async function opsBranch(quick: QuickCalls, outcome: RunOutcome): Promise<BranchResult> {
  if (outcome.kind !== 'run_failed') return 'not_owed';
  const alert = await quick.classifyFailedRun(outcome);
  if (!alert) return 'not_owed';
  return sendOperatorAlert(quick, alert, true);
}

/**
 * Marks histories in which a released push waits for its siblings' end or its next try, whichever comes first,
 * instead of asking at its release whether a sibling still runs. That answer came from the order of the
 * branches' last local activities within one activation: on a first run they resolve as they finish, on a replay
 * all at once, so a replay could answer otherwise and fail on the timer the first run did not start. A wait's end
 * is read where the history decides it: the timer fired, or was cancelled (or never sent) as the siblings ended.
 */
export const RELEASED_PUSH_WAITS_FOR_SIBLINGS_PATCH = 'released-push-waits-for-siblings-end';

/**
 * The push family apart from its siblings: the sweep replays a released episode only once its workflow closed,
 * and a callback can retry for a day. So while a sibling still runs, a released push is tried again here on a
 * durable timer, one sweep interval later, then doubling up to an hour, until it settles or the siblings are
 * done; then the workflow closes released and the sweep's next pass replays it.
 */
async function pushRetriedWhileSiblingsRun(
  quick: QuickCalls,
  outcome: RunOutcome,
  options: EpisodeOptions,
  siblingsRunning: () => boolean,
): Promise<BranchResult> {
  const every = options.releasedRetrySeconds ?? EPISODE_OPTIONS_WHEN_ABSENT.releasedRetrySeconds!;
  for (let retried = 0; ; retried++) {
    const result = await contained(pushBranch(quick, outcome, options));
    if (result !== 'released') return result;
    if (patched(RELEASED_PUSH_WAITS_FOR_SIBLINGS_PATCH)) {
      const siblingsEnded = await condition(
        () => !siblingsRunning(),
        backedOffSeconds(every, retried) * 1000,
      );
      if (siblingsEnded) return result;
      continue;
    }
    if (!siblingsRunning() || !patched(RELEASED_PUSH_RETRIED_PATCH)) return result;
    const wait = patched(RELEASED_PUSH_BACKOFF_PATCH) ? backedOffSeconds(every, retried) : every;
    await sleep(wait * 1000);
  }
}

/**
 * Marks histories in which a team event whose hand-off failed past its quick retries (a store outage outlasting
 * them) is handed off again after each wait of the callback schedule. Before, the failure was dropped, and an
 * event never recorded is one the sweep cannot replay: the team's endpoints never heard of the episode.
 */
export const TEAM_EVENT_HAND_OFF_RETRIED_PATCH = 'team-event-hand-off-retried';

/**
 * The team's endpoints hear of the episode through its team event's own workflow; this only waits for its start
 * (an operator soft-pause raises none, and records no marker). The hand-off is recorded and started at most once
 * (its record is keyed by the event, its workflow by the event's id), so it can be tried again.
 */
async function teamEventBranch(
  quick: QuickCalls,
  outcome: RunOutcome,
  options: EpisodeOptions,
): Promise<void> {
  const event = teamEventFromOutcome(outcome);
  if (!event || !patched(TEAM_EVENT_PATCH)) return;
  const waits = options.callbackRetrySeconds;
  for (let retried = 0; ; retried++) {
    try {
      return await handOffTeamEvent(quick, event);
    } catch (err) {
      // Only a failed hand-off reaches the patch check: histories without one replay unchanged.
      if (retried >= waits.length || !patched(TEAM_EVENT_HAND_OFF_RETRIED_PATCH)) throw err;
      await sleep(waits[retried] * 1000);
    }
  }
}

/**
 * Marks executions whose branches make their store calls one at a time once each made its first (callsInTurn).
 * Before, calls in flight together could resolve in another order on a replay than on the first run, and two
 * branches' next commands (a push's wait and a callback's give-up alert) swapped, failing the replay for good.
 */
export const STORE_CALLS_IN_TURN_PATCH = 'episode-store-calls-in-turn';

/**
 * Marks executions whose branches' first store calls are answered together, once all of them settled. Before, a
 * branch whose first call failed (the push's claim, the team event's record, in a store outage) went on to its
 * retry's wait after more promise steps than another's: answered in separate tasks on the first run and in one on
 * a replay, their waits were made in another order, and the replay failed (TMPRL1100). Every execution reaches it.
 */
export const FIRST_CALLS_ANSWERED_TOGETHER_PATCH = 'episode-first-store-calls-answered-together';

type InTurn = <T>(call: () => Promise<T>) => Promise<T>;

/** A branch that throws settles as released: the others carry on, and the sweep replays what was missed. */
const contained = (branch: Promise<BranchResult>): Promise<BranchResult> =>
  branch.catch(() => 'released' as const);

export async function episodeWorkflow(
  outcome: RunOutcome,
  options: EpisodeOptions = EPISODE_OPTIONS_WHEN_ABSENT,
): Promise<EpisodeResult> {
  const anyOrder = quickCalls();
  const inTurns = patched(STORE_CALLS_IN_TURN_PATCH)
    ? callsInTurn(anyOrder, QUICK_CALLS, {
        firstAnsweredTogether: patched(FIRST_CALLS_ANSWERED_TOGETHER_PATCH),
      })
    : undefined;
  const quick = inTurns?.calls ?? anyOrder;
  const inTurn: InTurn = inTurns?.inTurn ?? ((call) => call());
  // The episode's record (GET /runs/:id/episodes) is written beside the branches, not ahead of them: one write
  // less before the first push. It is a view: if it finally fails, the branches still settle their claims.
  let siblings = 2;
  const sibling = (branch: Promise<BranchResult>) => contained(branch).finally(() => siblings--);
  const branches = Promise.all([
    quick.recordEpisode(outcome).catch(() => undefined),
    teamEventBranch(quick, outcome, options).catch(() => undefined),
    pushRetriedWhileSiblingsRun(quick, outcome, options, () => siblings > 0),
    sibling(callbackBranch(quick, inTurn, outcome, options)),
    sibling(opsBranch(quick, outcome)),
  ]);
  // Each branch made its first store call above, at once; every later one waits its turn.
  inTurns?.engage();
  const [, , push, callback, ops] = await branches;
  return { episodeId: outcome.episodeId, push, callback, ops };
}
