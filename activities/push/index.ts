// The push family's I/O: the standby veto, recipients, rendering and the bounded-parallel fan-out.
import type {
  DigestRef,
  DigestSend,
  DigestSendResult,
  FanOutResult,
  PushDeliveryResult,
} from '../../contract/activities';
import { DIGEST_MAX_LISTED, type DigestEntry } from '../../contract/workflows';
import type { RunOutcome } from '../../domain/outcome';
import {
  FAN_OUT_ATTEMPTS,
  kindFor,
  renderDigest,
  renderPush,
  type OutcomePushKind,
  type PushPayload,
} from '../../domain/push';
import type { ConfigFaultRule } from '../../domain/pushServices';
import { heldUntil } from '../../domain/quietHours';
import type { PushSender } from '../../delivery/push/sender';
import { fanOut, type FanOutDeps } from '../../delivery/push/fanOut';
import type { PushConfigFault } from '../../domain/ops';
import { mapBounded } from '../../platform/concurrency';
import { activityContext } from '../activityContext';
import type { NotificationPrefStore, Recipient } from '../../store/push/notificationPrefs';
import { digestEntryOf, holdId, type PushHoldRow, type PushHoldStore } from '../../store/push/holds';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import type { PushDelivery, PushDeliveryStore } from '../../store/push/deliveries';
import type { PushServiceStore } from '../../store/push/services';
import type { PushSubscriptionRow, PushSubscriptionStore } from '../../store/push/subscriptions';
import type { InteractionStore } from '../../store/interactions';
import type { RunStore } from '../../store/runs';
import type { WatchStore } from '../../store/watches';
import type { Metrics } from '../../platform/metrics';

/** How long a delivery-record write in flight keeps the fan-out's heartbeat going. */
const WRITE_BEATS_FOR_MS = 60_000;
/**
 * A device's last success is kept to the minute: a row written less than this before is not written again (on
 * FerretDB v1 an update costs a transaction per row, and a busy team's devices are pushed many times a minute).
 */
export const LAST_SUCCESS_GRAIN_MS = 60_000;

export interface PushActivityDeps {
  runs: RunStore;
  watches: WatchStore;
  interactions: InteractionStore;
  notificationPrefs: NotificationPrefStore;
  pushSubscriptions: PushSubscriptionStore;
  pushDeliveries: PushDeliveryStore;
  pushServices: PushServiceStore;
  /** PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS in PUSH_CONFIG_FAULT_WINDOW_SECONDS (default 3 in an hour). */
  configFaultRule?: ConfigFaultRule;
  /** Undefined when web push is off: nothing is addressable, and the claim is confirmed. */
  sender?: PushSender;
  studioUrl: string;
  fanOutWidth: number;
  /** PUSH_PRUNE_MIN_HOURS (default 24). */
  pruneMinHours?: number;
  now: () => Date;
  log: (line: string) => void;
  /** The fan-out's sends and prunes, and each episode's first push; absent: nothing is recorded. */
  metrics?: Pick<Metrics, 'pushSent' | 'pushPruned' | 'firstPush' | 'digestGaveUp'>;
  /** Raises a push_config_fault operator alert (deduped per origin and hour); absent: the operator family is off. */
  raiseConfigFault?: (fault: PushConfigFault) => Promise<void>;
  /** Holding pushes for digests; absent: every recipient is pushed at once (no quiet hours, no burst bound). */
  digests?: DigestDeps;
}

export interface DigestDeps {
  pushHolds: PushHoldStore;
  /** Where each person's pushes in a window are counted (one slot per push, keyed by person and team). */
  rateLimits: RateLimitStore;
  /** PUSH_BURST_LIMIT pushes in PUSH_BURST_WINDOW_SECONDS. */
  burst: RateLimit;
  /** Signal-with-start of the person's digest workflow. */
  add: (teamId: string, userId: string, entry: DigestEntry) => Promise<void>;
}

export function createPushActivities(deps: PushActivityDeps) {
  return {
    /**
     * The standby veto: a run holding watched issue ids, or an active assistant watch, gets no pause push; read
     * under the run's team (the team is absent only from tasks scheduled before it was passed: then the run says).
     */
    async isStandbyVetoed(runId: string, teamId?: string): Promise<boolean> {
      const run = teamId ? await deps.runs.getForTeam(teamId, runId) : await deps.runs.getById(runId);
      if (!run) return false;
      if (run.watchedIssueIds.length > 0) return true;
      return deps.watches.hasActiveWatch(run.teamId, runId);
    },

    /**
     * Renders the outcome and pushes it to every subscription of the owner and of the team members who chose
     * team-wide scope. Safe to run twice: endpoints already reached for this episode are skipped.
     */
    async deliverPush(outcome: RunOutcome): Promise<PushDeliveryResult> {
      const kind = kindFor(outcome);
      if (!kind) return { addressable: false, reason: 'no kind' };
      if (!deps.sender) return { addressable: false, reason: 'no sink' };
      // The reads that do not depend on each other go out together: each is a round trip before the first push.
      // Owner ∪ team-wide opt-ins, less whoever turned this kind off in this team: one query.
      const [listed, payload] = await Promise.all([
        deps.notificationPrefs.listRecipientPrefs(outcome.teamId, outcome.ownerId, kind),
        render(deps, outcome, kind),
      ]);
      const recipients = listed.filter((recipient) => recipient.userId !== '');
      if (!recipients.length) return { addressable: false, reason: 'no recipient' };
      const subs = await deps.pushSubscriptions.listForUsers(recipients.map((r) => r.userId));
      if (!subs.length) return { addressable: false, reason: 'no subscription' };
      // Per-kind prefs came first (listRecipientPrefs): a kind turned off is never held. Only people with a
      // device are held: a digest to no device is no digest.
      const withDevice = new Set(subs.map((sub) => sub.userId));
      const held = await holdWhereDue(
        deps,
        outcome,
        kind,
        recipients.filter((r) => withDevice.has(r.userId)),
      );
      const result = await sendRecorded(
        deps,
        outcome.episodeId,
        subs.filter((sub) => !held.has(sub.userId)),
        payload,
        {
          onFirstPush: () => deps.metrics?.firstPush(outcome.kind, outcome.occurredAt, deps.now()),
          onConfigFault: configFaultReporter(deps, outcome),
        },
      );
      return { addressable: true, ...result, ...(held.size ? { held: held.size } : {}) };
    },

    /** When the person can be reached by a digest now: undefined for now (epoch ms otherwise). */
    async digestReleaseAt(teamId: string, userId: string): Promise<number | undefined> {
      const now = deps.now();
      return heldUntil(await deps.notificationPrefs.get(userId, teamId, now), 'digest', now)?.getTime();
    },

    /**
     * One digest to every device of the person, recorded as an episode's push is (a retry, or a worker killed
     * mid-send, repeats nothing already sent). It sends the person's owed holds, taken at its first send; once a
     * device took it they are no longer owed.
     */
    async sendDigest(digest: DigestSend): Promise<DigestSendResult> {
      if (!deps.sender) return { addressable: false, reason: 'no sink' };
      if (digest.episodeIds) return sendListedDigest(deps, digest, digest.episodeIds);
      const holds = deps.digests?.pushHolds;
      if (!holds) return { addressable: false, reason: 'nothing owed' };
      await holds.take(digest.teamId, digest.userId, digest.digestId, deps.now());
      const contents = await holds.contentsOf(digest.digestId, DIGEST_MAX_LISTED);
      if (!contents.total) return { addressable: false, reason: 'nothing owed' };
      const result = await sendDigestPush(deps, digest, {
        counts: contents.counts,
        newest: contents.newest.map(digestEntryOf),
      });
      if (result.addressable && result.delivered + result.alreadyDelivered > 0)
        await holds.markDigestSent(digest.digestId, deps.now());
      return result;
    },

    async giveUpDigest(digest: DigestRef): Promise<void> {
      const holds = await deps.digests?.pushHolds.markDigestGaveUp(digest.digestId, deps.now());
      if (!holds) return;
      deps.metrics?.digestGaveUp(holds);
      deps.log(
        `digest ${digest.digestId}: no device of ${digest.userId} in ${digest.teamId} took it for a day; ` +
          `${holds} held push(es) gave up`,
      );
    },
  };
}

/** A digest started before digests took their holds from the store: it lists them, and marks them sent. */
async function sendListedDigest(
  deps: PushActivityDeps,
  digest: DigestSend,
  episodeIds: string[],
): Promise<DigestSendResult> {
  const result = await sendDigestPush(deps, digest, {
    counts: digest.counts ?? {},
    newest: digest.listed ?? [],
  });
  await deps.digests?.pushHolds.markSent(
    episodeIds.map((episodeId) => holdId(episodeId, digest.userId)),
    digest.digestId,
    deps.now(),
  );
  return result;
}

async function sendDigestPush(
  deps: PushActivityDeps,
  digest: DigestSend,
  contents: { counts: Record<string, number>; newest: DigestEntry[] },
): Promise<DigestSendResult> {
  const subs = await deps.pushSubscriptions.listForUsers([digest.userId]);
  if (!subs.length) return { addressable: false, reason: 'no subscription' };
  const payload = renderDigest({
    digestId: digest.digestId,
    tag: digest.tag,
    ...contents,
    studioUrl: deps.studioUrl,
  });
  const result = await sendRecorded(deps, digest.digestId, subs, payload, {
    onConfigFault: configFaultReporter(deps, {
      runId: '',
      teamId: digest.teamId,
      episodeId: digest.digestId,
    }),
  });
  return { addressable: true, ...result };
}

/**
 * Which of these recipients wait for their digest instead of a push now: held by an earlier attempt of this
 * episode (always held again: never sent to), in quiet hours or do-not-disturb, or past their burst bound.
 * Each held person gets a hold row and their digest the entry (both safe to repeat).
 */
async function holdWhereDue(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  kind: OutcomePushKind,
  recipients: Recipient[],
): Promise<Set<string>> {
  const digests = deps.digests;
  if (!digests || !recipients.length) return new Set();
  const now = deps.now();
  const earlier = await digests.pushHolds.heldOf(
    outcome.episodeId,
    recipients.map((r) => r.userId),
  );
  const holds: Omit<PushHoldRow, '_id'>[] = [];
  const fresh: Omit<PushHoldRow, '_id'>[] = [];
  const hold = (userId: string, reason: PushHoldRow['reason'], releaseAt: Date): void => {
    const { episodeId, runId, teamId, title } = outcome;
    const row = { episodeId, runId, teamId, userId, kind, title, reason, at: now, releaseAt };
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
      else counted.push(userId);
    }
  }
  // Counted once per episode (its id is the hit's): a retried fan-out is admitted again, not counted again. All
  // recipients in one go: a few round trips whatever the team's size.
  const burstKey = (userId: string): string => `push-burst|${outcome.teamId}|${userId}`;
  const admissions = await digests.rateLimits.hitMany(
    counted.map(burstKey),
    digests.burst,
    now,
    outcome.episodeId,
  );
  for (const userId of counted) {
    const admission = admissions.get(burstKey(userId))!;
    // One time for the whole burst: one timer in the digest.
    if (!admission.admitted) hold(userId, 'burst', admission.freeAt);
  }
  await digests.pushHolds.hold(fresh);
  // A hold whose digest went out already is not signalled again (a retry of an old episode).
  // Bounded like the sends: a burst across a big team is one signal-with-start per person.
  await mapBounded(
    holds.filter((row) => !row.digestId),
    deps.fanOutWidth,
    (row) => digests.add(row.teamId, row.userId, digestEntryOf(row)),
  );
  return new Set(holds.map((row) => row.userId));
}

/**
 * Pushes one payload to these subscriptions, skipping those an earlier attempt under the same id reached, and
 * records each accepted send before answering.
 */
async function sendRecorded(
  deps: PushActivityDeps,
  episodeId: string,
  subs: PushSubscriptionRow[],
  payload: PushPayload,
  hooks: { onFirstPush?: () => void; onConfigFault: FanOutDeps['onConfigFault'] },
): Promise<Omit<FanOutResult, 'held'>> {
  const sender = deps.sender;
  if (!sender) throw new Error('web push is off: nothing to send with');
  // By the batch rows' own ids: one indexed read whatever the episode's size.
  const { subscriptions: reached, nextBatch } = await deps.pushDeliveries.reached(
    episodeId,
    subs.map((sub) => sub._id),
  );
  const pending = subs.filter((sub) => !reached.has(sub._id));
  let firstPushSeen = false;
  const context = activityContext();
  // Heartbeats on progress, not on a timer: every step of a send is bounded (lookup 5 s, exchange 5 s, wait
  // slices 2 s), so a lane stuck longer than the heartbeat timeout is a wedge Temporal should notice and retry.
  const beat = (): void => context?.heartbeat();
  beat();
  // A delivery record being written is progress too (our own store, slow under load, not the outside world):
  // beat while it is in flight, but only for so long, so a wedged write is still noticed. A failed write is
  // tried again within that time: the push it records has gone out, and failing the activity for a store blip
  // (a MongoDB restart) would send it again on the next attempt.
  const persist = async (what: string, write: () => Promise<void>): Promise<void> => {
    const started = Date.now();
    const timer = setInterval(() => {
      if (Date.now() - started < WRITE_BEATS_FOR_MS) beat();
    }, 2000);
    try {
      for (let wait = 500; ; wait = Math.min(wait * 2, 5000)) {
        try {
          return await write();
        } catch (err) {
          if (Date.now() - started + wait >= WRITE_BEATS_FOR_MS) throw err;
          deps.log(`push: recording ${what} failed, retrying: ${String(err)}`);
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    } finally {
      clearInterval(timer);
    }
  };
  // One write per batch of accepted sends (group commit): a row of the episode's deliveries. A lane takes
  // its next endpoint while its record is written; only past `width` records not yet known written does it
  // wait for the oldest. So a crash repeats at most 2 × width sends (those in flight and those awaiting their
  // record), and a lane rarely waits on the store: it was most of a fan-out's time.
  const writeBatch = deps.pushDeliveries.batchWriter(episodeId, nextBatch);
  const recordDelivery = groupCommit((batch: PushDelivery[]) =>
    persist(`${batch.length} deliveries`, () => writeBatch(batch)),
  );
  const unrecorded: Promise<void>[] = [];
  // The devices' last success, on their subscription rows: one updateMany by _id per batch of its own, which
  // no lane waits for (FerretDB updates row by row: the slowest write of a fan-out), only the activity's end.
  const recordSuccess = groupCommit(async (batch: PushDelivery[]) => {
    const newest = new Date(Math.max(...batch.map((d) => d.at.getTime())));
    const ids = batch.map((d) => d.subscriptionId);
    await persist(`the last success of ${ids.length} subscriptions`, () =>
      deps.pushSubscriptions.recordSuccess(ids, newest),
    );
  });
  const successes: Promise<void>[] = [];
  const noteSuccess = (sub: PushSubscriptionRow, delivery: PushDelivery): void => {
    // A row with a streak gets its last success from the write that clears the streak (fanOut).
    if (sub.unresolved) return;
    const last = sub.lastSuccessAt?.getTime() ?? -Infinity;
    if (delivery.at.getTime() - last < LAST_SUCCESS_GRAIN_MS) return;
    const written = recordSuccess(delivery);
    written.catch(() => undefined); // awaited at the end
    successes.push(written);
  };
  // Reached by an attempt that ended (a crash) before it wrote their last success: written now, in one go.
  const behind = subs.filter((sub) => {
    const at = reached.get(sub._id);
    return at && !(sub.lastSuccessAt && sub.lastSuccessAt >= at);
  });
  if (behind.length) {
    const newest = new Date(Math.max(...behind.map((sub) => reached.get(sub._id)!.getTime())));
    const ids = behind.map((sub) => sub._id);
    const written = persist(`the last success of ${ids.length} subscriptions`, () =>
      deps.pushSubscriptions.recordSuccess(ids, newest),
    );
    written.catch(() => undefined); // awaited at the end
    successes.push(written);
  }
  const result = await fanOut(
    {
      subscriptions: deps.pushSubscriptions,
      sender,
      width: deps.fanOutWidth,
      log: deps.log,
      onProgress: beat,
      // A worker shutting down past its grace cancels the activity: the fan-out stops starting sends (the
      // ones reached are recorded), and the next attempt, on any worker, skips them.
      signal: context?.cancellationSignal,
      pushServices: deps.pushServices,
      configFaultRule: deps.configFaultRule,
      onConfigFault: hooks.onConfigFault,
      now: deps.now,
      pruneMinHours: deps.pruneMinHours,
      metrics: deps.metrics,
    },
    pending,
    payload,
    async (sub) => {
      // The episode's first push: no earlier attempt reached anyone, and this is this attempt's first.
      if (reached.size === 0 && !firstPushSeen) {
        firstPushSeen = true;
        hooks.onFirstPush?.();
      }
      const delivery = { subscriptionId: sub._id, userId: sub.userId, at: deps.now() };
      const written = recordDelivery(delivery);
      written.catch(() => undefined); // awaited below (its failure fails the fan-out), never unhandled
      unrecorded.push(written);
      noteSuccess(sub, delivery);
      while (unrecorded.length > deps.fanOutWidth) await unrecorded.shift();
    },
  ).finally(() => Promise.allSettled([...unrecorded, ...successes]));
  // Every accepted send recorded before the activity answers (or a failed record fails it: retried).
  await Promise.all([...unrecorded, ...successes]);
  // Endpoints that failed only transiently get another activity attempt (which skips the ones reached);
  // the last attempt reports instead, and the workflow settles on what was delivered.
  const attempt = context?.info.attempt ?? FAN_OUT_ATTEMPTS;
  if (result.retryable > 0 && attempt < FAN_OUT_ATTEMPTS) {
    throw new Error(`${result.retryable} of ${pending.length} endpoints failed transiently; retrying them`);
  }
  return { ...result, alreadyDelivered: subs.length - pending.length };
}

/**
 * Not awaited: the alert (a claim read, a workflow start) must never hold the activity's answer;
 * raisePushConfigFault bounds both. A failure to raise it is logged, never a failed push.
 */
function configFaultReporter(
  deps: PushActivityDeps,
  outcome: Pick<RunOutcome, 'runId' | 'teamId' | 'episodeId'>,
): FanOutDeps['onConfigFault'] {
  const raise = deps.raiseConfigFault;
  if (!raise) return undefined;
  const { runId, teamId, episodeId } = outcome;
  return async (fault) => {
    void raise({ ...fault, runId, teamId, episodeId }).catch((err: unknown) =>
      deps.log(`push: the push_config_fault alert for ${fault.origin} was not raised: ${String(err)}`),
    );
    return Promise.resolve();
  };
}

async function render(
  deps: PushActivityDeps,
  outcome: RunOutcome,
  kind: OutcomePushKind,
): Promise<PushPayload> {
  let prompt: string | undefined;
  if (kind === 'human_input_requested' && outcome.pause?.interactionId) {
    prompt = (await deps.interactions.get(outcome.runId, outcome.pause.interactionId))?.prompt;
  }
  return renderPush(outcome, kind, deps.studioUrl, prompt);
}

/**
 * Group commit: each item joins the next batch write, and its promise settles when that write does. While one
 * write is in flight the next batch gathers, so the store sees one write at a time instead of one per item, and
 * a caller that awaits its item still knows it is durable before going on (the fan-out's crash window stays the
 * sends in flight).
 */
export function groupCommit<T>(write: (items: T[]) => Promise<void>): (item: T) => Promise<void> {
  let queue: { item: T; resolve: () => void; reject: (err: unknown) => void }[] = [];
  let flushing = false;
  const flush = async (): Promise<void> => {
    flushing = true;
    while (queue.length) {
      const batch = queue;
      queue = [];
      try {
        await write(batch.map((entry) => entry.item));
        for (const entry of batch) entry.resolve();
      } catch (err) {
        for (const entry of batch) entry.reject(err);
      }
    }
    flushing = false;
  };
  return (item) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (!flushing) void flush();
    });
}
