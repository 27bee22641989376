// An outcome's push: rendered, addressed to its recipients, held for a digest where due, the rest sent now.
import { runWaitsOn } from '../../domain/interaction';
import { episodeOfStatus, type RunOutcome } from '../../domain/outcome';
import type { FollowUpResult, PushDeliveryResult } from '../../contract/activities';
import type { InteractionAnswer, InteractionRef } from '../../contract/workflows';
import {
  kindFor,
  renderPush,
  type InteractionChoice,
  type OutcomePushKind,
  type PushPayload,
} from '../../domain/push';
import { heldUntil } from '../../domain/quietHours';
import { mapBounded } from '../../platform/concurrency';
import type { Interaction } from '../../store/interactions';
import { digestEntryOf, type PushHoldRow } from '../../store/push/holds';
import type { Recipient } from '../../store/push/notificationPrefs';
import type { PushSubscriptionRow } from '../../store/push/subscriptions';
import { payloadsWithActions } from './actionTokens';
import { closeAnswered } from './closeAnswered';
import type { DigestDeps, PushActivityDeps } from './pushActivityDeps';
import { activityContext, attemptStartedAt, keptAlive } from '../activityContext';
import { configFaultReporter, sendRecorded, STORE_WORK_BEATS_FOR_MS, type Reached } from './recordedSends';

/**
 * Renders the outcome and pushes it to every subscription of the owner and of the team members who chose
 * team-wide scope. Safe to run twice: endpoints already reached for this episode are skipped.
 */
export async function deliverPush(deps: PushActivityDeps, outcome: RunOutcome): Promise<PushDeliveryResult> {
  attemptStartedAt(); // its fan-out's time is counted from here
  const kind = kindFor(outcome);
  if (!kind) return { addressable: false, reason: 'no kind' };
  if (!deps.sender) return { addressable: false, reason: 'no sink' };
  // What comes before the first send (reads, holds, a signal to each held person's digest) may outlast the
  // heartbeat timeout under load: Temporal would start a second attempt beside this one.
  const ready = await keptAlive(async () => {
    // The reads that do not depend on each other go out together: each is a round trip before the first push.
    // Owner ∪ team-wide opt-ins, less whoever turned this kind off in this team: one query.
    const waits = kind === 'human_input_requested' || kind === 'usage_parked';
    const [listed, rendered, run] = await Promise.all([
      deps.notificationPrefs.listRecipientPrefs(outcome.teamId, outcome.ownerId, kind),
      render(deps, outcome, kind),
      waits ? deps.runs.waitingOf(outcome.teamId, outcome.runId) : undefined,
    ]);
    const { interaction } = rendered;
    // A question answered already is asked of nobody more (a retry of the people a fan-out missed, a replay).
    if (interaction?.status === 'answered') return answeredMeanwhile(deps, outcome, interaction);
    // Nor one its run stopped waiting on unanswered (cancelled, failed, finished meanwhile).
    if (interaction && !runWaitsOn(run, interaction._id)) return nobodyNow(deps, outcome, 'not waiting');
    // Nor is anyone told of a park that ended (the run resumed, or ended, meanwhile).
    if (kind === 'usage_parked' && (!run || episodeOfStatus(outcome.runId, run) !== outcome.episodeId))
      return nobodyNow(deps, outcome, 'not waiting');
    const recipients = listed.filter((recipient) => recipient.userId !== '');
    if (!recipients.length) return nobodyNow(deps, outcome, 'no recipient');
    // Per-kind prefs came first (listRecipientPrefs): a kind turned off is never held.
    const devices = await devicesToPush(deps, outcome, kind, recipients);
    if (!devices) return { addressable: false as const, reason: 'no subscription' as const };
    return { rendered, devices, run };
  }, STORE_WORK_BEATS_FOR_MS);
  if ('addressable' in ready) return ready;
  const { payload, choices, interaction } = ready.rendered;
  const { pending, held, reached } = ready.devices;
  const offered = ready.run?.pause?.offered === true;
  const result = await sendRecorded(deps, outcome.episodeId, pending, payload, {
    onFirstPush: () => deps.metrics?.firstPush(outcome.kind, outcome.occurredAt, deps.now()),
    onConfigFault: configFaultReporter(deps, outcome),
    receipts: {
      teamId: outcome.teamId,
      runId: outcome.runId,
      kind,
      ...(kind === 'human_input_requested' ? { pausedAt: new Date(outcome.occurredAt) } : {}),
    },
    payloadsFor: (pending) => payloadsWithActions(deps, outcome, choices, payload, pending),
    reached,
  });
  // A question that reached someone (a device, or a digest holding it) is noted so: a watch made and ended on it
  // later replays nothing. Not noted (the write failed), that watch's end replays it, its claims deduping it.
  if (interaction && !offered && (result.delivered + result.alreadyDelivered > 0 || held.size > 0))
    await deps.runs
      .noteQuestionOffered(outcome.teamId, outcome.runId, interaction._id)
      .catch(() => undefined);
  // The answer's close went to the devices reached when it ran; one reached since then is closed here.
  let closeOwed = false;
  if (interaction && result.delivered > 0) {
    const current = await deps.interactions.get(outcome.runId, interaction._id);
    if (current?.status === 'answered')
      closeOwed = stillOwed(
        await closeAnswered(deps, refOf(outcome, current), answerOf(current, deps.now())),
      );
  }
  return {
    addressable: true,
    ...result,
    retryable: result.retryable + (closeOwed ? 1 : 0),
    ...(held.size ? { held: held.size } : {}),
  };
}

/**
 * A close a device's push service failed transiently on every attempt: the devices the workflow's close reached
 * are settled, so nothing else replays it. Counted retryable, the episode tries it again with the people it missed.
 */
const stillOwed = (closed: FollowUpResult): boolean =>
  closed.result === 'failed' && closed.retry !== undefined;

/**
 * Nobody to push now (the run stopped waiting, the last recipient opted out): not addressable, unless an earlier
 * attempt of this push reached devices, which is how it settles then. Read only where an earlier attempt may have
 * run: a question or a park its run no longer waits on (it may have been pushed), or a retry (an owner with the
 * kind off, on a first attempt, costs no read).
 */
async function nobodyNow(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  reason: 'not waiting' | 'no recipient',
): Promise<PushDeliveryResult> {
  const retried = (activityContext()?.info.attempt ?? 1) > 1;
  if (reason === 'no recipient' && !retried) return { addressable: false, reason };
  const reached = await deps.pushDeliveries.countForEpisode(outcome.episodeId);
  return reached ? settledOnReached(reached, 0) : { addressable: false, reason };
}

/** A push that sends nothing now, settled on the devices its earlier attempts reached. */
const settledOnReached = (alreadyDelivered: number, retryable: number): PushDeliveryResult => ({
  addressable: true,
  attempted: 0,
  delivered: 0,
  alreadyDelivered,
  pruned: 0,
  failed: 0,
  retryable,
});

/**
 * A question's push that finds it answered: nobody new is asked, and the close goes again to every device the
 * question reached (a device an earlier attempt of this push reached after the close ran is closed here; those
 * closed already are skipped). Settles on who the question reached, as its first push would have.
 */
async function answeredMeanwhile(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  interaction: Interaction,
): Promise<PushDeliveryResult> {
  const [reached, closed] = await Promise.all([
    deps.pushDeliveries.countForEpisode(outcome.episodeId),
    closeAnswered(deps, refOf(outcome, interaction), answerOf(interaction, deps.now())),
  ]);
  if (!reached) return { addressable: false, reason: 'answered' };
  return settledOnReached(reached, stillOwed(closed) ? 1 : 0);
}

const refOf = (outcome: RunOutcome, interaction: Interaction): InteractionRef => ({
  runId: outcome.runId,
  teamId: outcome.teamId,
  interactionId: interaction._id,
});

const answerOf = (interaction: Interaction, now: Date): InteractionAnswer => ({
  answeredBy: interaction.answeredBy ?? '',
  at: (interaction.answeredAt ?? now).toISOString(),
});

/**
 * The recipients' devices, whom of them a digest holds, and who was reached under `outcome.episodeId` already:
 * the reads that do not depend on each other go out together (each is a round trip before the first push), so
 * the earlier holds are read beside the devices (one read spent when nobody has a device) and the devices
 * reached beside the holds. Only people with a device are held: a digest to no device is no digest. Undefined:
 * nobody has a device.
 */
export async function devicesToPush(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  kind: OutcomePushKind,
  recipients: Recipient[],
): Promise<{ pending: PushSubscriptionRow[]; held: Set<string>; reached: Promise<Reached> } | undefined> {
  const userIds = recipients.map((r) => r.userId);
  const earlierHolds = deps.digests?.pushHolds.heldOf(outcome.episodeId, userIds);
  earlierHolds?.catch(() => undefined); // awaited by holdWhereDue when someone has a device, never unhandled
  const subs = await deps.pushSubscriptions.listForUsers(userIds);
  if (!subs.length) return undefined;
  const withDevice = new Set(subs.map((sub) => sub.userId));
  const reached = deps.pushDeliveries.reached(
    outcome.episodeId,
    subs.map((sub) => sub._id),
  );
  reached.catch(() => undefined); // awaited by sendRecorded when someone is left to push, never unhandled
  // From the record, not the devices: someone reached on a device removed since was reached all the same.
  const reachedPeople = reached.then(({ people }) => people);
  reachedPeople.catch(() => undefined); // awaited by holdWhereDue when someone may be held
  const { held, resting } = await holdWhereDue(
    deps,
    outcome,
    kind,
    recipients.filter((r) => withDevice.has(r.userId)),
    earlierHolds,
    reachedPeople,
  );
  // The devices handed to the send: a resting person's are those reached already (skipped, counted as reached).
  const { subscriptions: reachedSubs } = resting.size ? await reached : { subscriptions: new Map() };
  const pending = subs.filter(
    (sub) => !held.has(sub.userId) && (!resting.has(sub.userId) || reachedSubs.has(sub._id)),
  );
  return { pending, held, reached };
}

/**
 * Which of these recipients wait for their digest instead of a push now (`held`): held by an earlier attempt of
 * this episode (always held again: never sent to), in quiet hours or do-not-disturb, or past their burst bound.
 * Each held person gets a hold row and their digest the entry (both safe to repeat). Someone an earlier attempt
 * reached on a device is never held (a digest would bring it again): due for holding, they are `resting`, pushed
 * nothing more now.
 */
async function holdWhereDue(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  kind: OutcomePushKind,
  recipients: Recipient[],
  /** Their holds of this episode, read by the caller beside its own reads (it may hold others too). */
  earlierHolds: Promise<Map<string, PushHoldRow>> | undefined,
  reachedAlready: Promise<Set<string>>,
): Promise<{ held: Set<string>; resting: Set<string> }> {
  const resting = new Set<string>();
  const digests = deps.digests;
  if (!digests || !earlierHolds || !recipients.length) return { held: new Set(), resting };
  const now = deps.now();
  const [earlier, reached] = await Promise.all([earlierHolds, reachedAlready]);
  const holds: Omit<PushHoldRow, '_id'>[] = [];
  const fresh: Omit<PushHoldRow, '_id'>[] = [];
  const viaTeam = new Set(recipients.filter((r) => r.viaTeam).map((r) => r.userId));
  const hold = (userId: string, reason: PushHoldRow['reason'], releaseAt: Date): void => {
    if (reached.has(userId)) return void resting.add(userId);
    const { episodeId, runId, teamId, title } = outcome;
    const row: Omit<PushHoldRow, '_id'> = {
      episodeId,
      runId,
      teamId,
      userId,
      kind,
      title,
      reason,
      at: now,
      releaseAt,
    };
    if (viaTeam.has(userId)) row.viaTeam = true;
    holds.push(row);
    fresh.push(row);
  };
  const counted: string[] = [];
  for (const { userId, hold: prefs } of recipients) {
    const before = earlier.get(userId);
    if (before) holds.push(before);
    // A kind that breaks through quiet hours passes the burst bound too: a run waits on it.
    else if (prefs.breakThrough.includes(kind)) continue;
    else {
      const quiet = heldUntil(prefs, kind, now);
      if (quiet) hold(userId, 'quiet', quiet);
      // Reached by an earlier attempt, they were counted then: a retry for their other devices past the window
      // would count them again, and hold (rest) them short of those devices.
      else if (!reached.has(userId)) counted.push(userId);
    }
  }
  for (const [userId, freeAt] of await pastBurst(digests, outcome, counted, now))
    hold(userId, 'burst', freeAt);
  await digests.pushHolds.hold(fresh);
  // A hold whose digest went out already is not signalled again (a retry of an old episode).
  // Bounded like the sends: a burst across a big team is one signal-with-start per person. One person's digest
  // that cannot be told fails nobody else's push: the hold row is written and owed, and the sweep offers it again.
  await mapBounded(
    holds.filter((row) => !row.digestId),
    deps.fanOutWidth,
    (row) =>
      digests.add(row.teamId, row.userId, digestEntryOf(row)).catch((err: unknown) => {
        deps.log(
          `push: the digest of ${row.userId} in ${row.teamId} was not told of ${row.episodeId}: ${String(err)}`,
        );
      }),
  );
  return { held: new Set(holds.map((row) => row.userId)), resting };
}

/** The recipients past their burst bound, with when their window frees (one time: one timer in the digest). */
async function pastBurst(
  digests: DigestDeps,
  outcome: RunOutcome,
  userIds: string[],
  now: Date,
): Promise<Map<string, Date>> {
  const past = new Map<string, Date>();
  if (!digests.burst || !userIds.length) return past;
  // Counted once per episode (its id is the hit's): a retried fan-out is admitted again, not counted again. All
  // recipients in one go: a few round trips whatever the team's size.
  const burstKey = (userId: string): string => `push-burst|${outcome.teamId}|${userId}`;
  const admissions = await digests.rateLimits.hitMany(
    userIds.map(burstKey),
    digests.burst,
    now,
    outcome.episodeId,
  );
  for (const userId of userIds) {
    const admission = admissions.get(burstKey(userId))!;
    if (!admission.admitted) past.set(userId, admission.freeAt);
  }
  return past;
}

/**
 * The payload every recipient shares, and the choices each recipient's copy offers with their own tokens. A
 * question's interaction is read here unless the caller has it.
 */
export async function render(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  kind: OutcomePushKind,
  known?: Interaction,
): Promise<{ payload: PushPayload; choices: InteractionChoice[]; interaction?: Interaction }> {
  const interaction =
    kind === 'human_input_requested' && outcome.pause?.interactionId
      ? (known ?? (await deps.interactions.get(outcome.runId, outcome.pause.interactionId)))
      : null;
  return {
    payload: renderPush(outcome, kind, deps.studioUrl, interaction?.prompt),
    choices: interaction?.choices ?? [],
    ...(interaction ? { interaction } : {}),
  };
}
