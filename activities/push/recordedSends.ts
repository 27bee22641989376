// Recorded sends: one payload to many devices through the fan-out, each accepted send recorded (in batches) before
// the activity answers, so a retry or a worker killed mid-send repeats nothing already sent. The episode's push and
// the digest both send this way.
import type { FanOutResult } from '../../contract/activities';
import type { RunOutcome } from '../../domain/outcome';
import { FAN_OUT_ATTEMPTS, FAN_OUT_RETRY_AFTER_CAP_MS, type PushPayload } from '../../domain/push';
import { fanOut, type FanOutDeps } from '../../delivery/push/fanOut';
import type { PushDelivery, PushDeliveryStore } from '../../store/push/deliveries';
import type { PushSubscriptionRow } from '../../store/push/subscriptions';
import { ApplicationFailure, type Context } from '@temporalio/activity';
import { activityContext, attemptStartedAt, keptAlive, startToCloseLeftMs } from '../activityContext';
import type { PushActivityDeps } from './pushActivityDeps';
import { payloadsWithReceipts, type ReceiptScope } from './receipts';

/**
 * How long the first accepted send of a batch waits for others before its record is written: the sends of a
 * small fan-out settle within a few ms of each other, and one write for them all is one round trip, not two.
 * A crash in that time repeats those sends, as it repeats the sends in flight (at most `fanOutWidth` each).
 */
const RECORD_LINGER_MS = 50;
/**
 * How long work on our own store (a delivery record's write, the reads and holds before the first send) keeps the
 * fan-out's heartbeat going: slow under load is progress, longer is a wedge Temporal should notice.
 */
export const STORE_WORK_BEATS_FOR_MS = 60_000;
/**
 * A device's last success is kept to the minute: a row written less than this before is not written again (on
 * FerretDB v1 an update costs a transaction per row, and a busy team's devices are pushed many times a minute).
 */
export const LAST_SUCCESS_GRAIN_MS = 60_000;

/**
 * What a send started now may take to end, its record written: its lookup and exchange deadlines (5 s each) and a
 * margin. A fan-out starts no send with less than this left of its start-to-close.
 */
export const PUSH_SEND_MARGIN_MS = 15_000;

/**
 * When the fan-out stops starting sends: the activity cancelled (a worker shutting down), or too little left of
 * its start-to-close for a send to end before Temporal starts the attempt again. Outside an activity, never.
 */
function sendsEnd(context: Context | undefined): AbortSignal | undefined {
  if (!context) return undefined;
  const timeLeft = startToCloseLeftMs(attemptStartedAt());
  // No start-to-close told (never so for our scheduled activities): cancellation alone stops it.
  if (timeLeft === undefined) return context.cancellationSignal;
  const left = timeLeft - PUSH_SEND_MARGIN_MS;
  const ends = new AbortController();
  const end = (): void => ends.abort(new Error('no time left in this attempt for a send'));
  if (context.cancellationSignal.aborted || left <= 0) end();
  else {
    context.cancellationSignal.addEventListener('abort', end, { once: true });
    setTimeout(end, left).unref();
  }
  return ends.signal;
}

/**
 * Pushes one payload to these subscriptions, skipping those an earlier attempt under the same id reached, and
 * records each accepted send before answering.
 */
export async function sendRecorded(
  deps: PushActivityDeps,
  episodeId: string,
  subs: PushSubscriptionRow[],
  payload: PushPayload,
  hooks: {
    onFirstPush?: () => void;
    onConfigFault: FanOutDeps['onConfigFault'];
    /** Each person's own payload, made once the devices still to reach are known (absent: `payload` to all). */
    payloadsFor?: (pending: PushSubscriptionRow[]) => Promise<FanOutDeps['payloadFor']>;
    /** What each device's receipt token reports on. */
    receipts: ReceiptScope;
    /** Who the episode reached already, read by the caller beside its own reads (absent: read here). */
    reached?: Promise<Reached>;
  },
): Promise<Omit<FanOutResult, 'held'>> {
  const sender = deps.sender;
  if (!sender) throw new Error('web push is off: nothing to send with');
  // By the batch rows' own ids: one indexed read whatever the episode's size.
  const { subscriptions: reached, nextBatch } = await (hooks.reached ??
    deps.pushDeliveries.reached(
      episodeId,
      subs.map((sub) => sub._id),
    ));
  const pending = subs.filter((sub) => !reached.has(sub._id));
  let firstPushSeen = false;
  const context = activityContext();
  // Heartbeats on progress, not on a timer: every step of a send is bounded (lookup 5 s, exchange 5 s, wait
  // slices 2 s), so a lane stuck longer than the heartbeat timeout is a wedge Temporal should notice and retry.
  const beat = (): void => context?.heartbeat();
  beat();
  const persist = persistBeating(deps.log);
  // The devices' tokens are stored before any push carries them (a big fan-out's rows take a while: beaten). A
  // retried write mints afresh, so it never meets its own earlier rows.
  let payloadFor: FanOutDeps['payloadFor'];
  if (pending.length)
    await persist(`the tokens of ${pending.length} devices`, async () => {
      // A person's action tokens and each device's receipt token are stored side by side (one round trip).
      let perPerson: FanOutDeps['payloadFor'];
      const [, withReceipts] = await Promise.all([
        hooks.payloadsFor?.(pending).then((made) => void (perPerson = made)),
        payloadsWithReceipts(deps, episodeId, hooks.receipts, pending, (sub) =>
          perPerson ? perPerson(sub) : payload,
        ),
      ]);
      payloadFor = withReceipts;
    });
  // One write per batch of accepted sends (group commit): a row of the episode's deliveries. A lane takes
  // its next endpoint while its record is written; only past `width` records not yet known written does it
  // wait for the oldest. So a crash repeats at most 2 × width sends (those in flight and those awaiting their
  // record), and a lane rarely waits on the store: it was most of a fan-out's time.
  const writeBatch = deps.pushDeliveries.batchWriter(episodeId, nextBatch);
  const recordDelivery = groupCommit(
    (batch: PushDelivery[]) => persist(`${batch.length} deliveries`, () => writeBatch(batch)),
    { ms: RECORD_LINGER_MS, fullAt: deps.fanOutWidth },
  );
  const unrecorded: Promise<void>[] = [];
  const lastSuccess = lastSuccessWriter(deps, persist);
  lastSuccess.catchUp(subs, reached);
  const result = await fanOut(
    {
      subscriptions: deps.pushSubscriptions,
      sender,
      width: deps.fanOutWidth,
      log: deps.log,
      onProgress: beat,
      // A worker shutting down past its grace cancels the activity, and what is left of its start-to-close ending
      // stops it too: the fan-out stops starting sends (the ones reached are recorded), and the next attempt, on
      // any worker, skips them. A send started later would race that attempt's own, to the same devices.
      signal: sendsEnd(context),
      pushServices: deps.pushServices,
      configFaultRule: deps.configFaultRule,
      onConfigFault: hooks.onConfigFault,
      now: deps.now,
      pruneMinHours: deps.pruneMinHours,
      metrics: deps.metrics,
      payloadFor,
      reachedBefore: subs.filter((sub) => reached.has(sub._id)),
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
      lastSuccess.note(sub, delivery);
      while (unrecorded.length > deps.fanOutWidth) await unrecorded.shift();
    },
  ).finally(() => {
    recordDelivery.flushNow();
    return Promise.allSettled([...unrecorded, ...lastSuccess.writes]);
  });
  // Every accepted send recorded before the activity answers (or a failed record fails it: retried).
  await Promise.all([...unrecorded, ...lastSuccess.writes]);
  // Endpoints that failed only transiently get another activity attempt (which skips the ones reached);
  // the last attempt reports instead, and the workflow settles on what was delivered.
  const attempt = context?.info.attempt ?? FAN_OUT_ATTEMPTS;
  if (result.retryable > 0 && attempt < FAN_OUT_ATTEMPTS) {
    const message = `${result.retryable} of ${pending.length} endpoints failed transiently; retrying them`;
    // A push service that asked us to wait (429 Retry-After) is not tried again before it; otherwise the policy's backoff.
    if (result.retryAfterMs === undefined) throw new Error(message);
    const nextRetryDelay = Math.min(result.retryAfterMs, FAN_OUT_RETRY_AFTER_CAP_MS);
    throw ApplicationFailure.create({ message, nextRetryDelay });
  }
  return { ...result, alreadyDelivered: subs.length - pending.length };
}

type Persist = (what: string, write: () => Promise<void>) => Promise<void>;

/** Who an episode reached among some devices, and its next batch number (`PushDeliveryStore.reached`). */
export type Reached = Awaited<ReturnType<PushDeliveryStore['reached']>>;

/**
 * A write of our own store that keeps the heartbeat going. A delivery record being written is progress too (our
 * own store, slow under load, not the outside world): beat while it is in flight, but only for so long, so a
 * wedged write is still noticed. A failed write is tried again within that time: the push it records has gone
 * out, and failing the activity for a store blip (a MongoDB restart) would send it again on the next attempt.
 */
function persistBeating(log: (line: string) => void): Persist {
  return (what, write) =>
    keptAlive(async () => {
      const started = Date.now();
      for (let wait = 500; ; wait = Math.min(wait * 2, 5000)) {
        try {
          return await write();
        } catch (err) {
          if (Date.now() - started + wait >= STORE_WORK_BEATS_FOR_MS) throw err;
          log(`push: recording ${what} failed, retrying: ${String(err)}`);
          await new Promise((resolve) => setTimeout(resolve, wait));
        }
      }
    }, STORE_WORK_BEATS_FOR_MS);
}

/**
 * The devices' last success, on their subscription rows: one updateMany by _id per batch of its own, which no
 * lane waits for (FerretDB updates row by row: the slowest write of a fan-out), only the activity's end
 * (`writes`).
 */
function lastSuccessWriter(deps: PushActivityDeps, persist: Persist) {
  const writes: Promise<void>[] = [];
  const keep = (written: Promise<void>): void => {
    written.catch(() => undefined); // awaited at the end
    writes.push(written);
  };
  const persistSuccess = (ids: string[], newest: Date): Promise<void> =>
    persist(`the last success of ${ids.length} subscriptions`, () =>
      deps.pushSubscriptions.recordSuccess(ids, newest),
    );
  const recordSuccess = groupCommit((batch: PushDelivery[]) =>
    persistSuccess(
      batch.map((d) => d.subscriptionId),
      new Date(Math.max(...batch.map((d) => d.at.getTime()))),
    ),
  );
  return {
    writes,
    /** An accepted send: its device's last success, unless written less than LAST_SUCCESS_GRAIN_MS before. */
    note(sub: PushSubscriptionRow, delivery: PushDelivery): void {
      // A row with a streak gets its last success from the write that clears the streak (fanOut).
      if (sub.unresolved) return;
      const last = sub.lastSuccessAt?.getTime() ?? -Infinity;
      if (delivery.at.getTime() - last < LAST_SUCCESS_GRAIN_MS) return;
      keep(recordSuccess(delivery));
    },
    /** Reached by an attempt that ended (a crash) before it wrote their last success: written now, in one go. */
    catchUp(subs: PushSubscriptionRow[], reached: Map<string, Date>): void {
      const behind = subs.filter((sub) => {
        const at = reached.get(sub._id);
        return at && !(sub.lastSuccessAt && sub.lastSuccessAt >= at);
      });
      if (!behind.length) return;
      keep(
        persistSuccess(
          behind.map((sub) => sub._id),
          new Date(Math.max(...behind.map((sub) => reached.get(sub._id)!.getTime()))),
        ),
      );
    },
  };
}

/**
 * Not awaited: the alert (a claim read, a workflow start) must never hold the activity's answer;
 * raisePushConfigFault bounds both. A failure to raise it is logged, never a failed push.
 */
export function configFaultReporter(
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

/**
 * Group commit: each item joins the next batch write, and its promise settles when that write does. While one
 * write is in flight the next batch gathers, so the store sees one write at a time instead of one per item, and
 * a caller that awaits its item still knows it is durable before going on (the fan-out's crash window stays the
 * sends in flight). With `linger`, a batch that finds no write in flight waits up to `ms` (or until it holds
 * `fullAt` items, or `flushNow`) for others to join: the few sends of a small fan-out, which settle together,
 * are then one write instead of one for the first and one for the rest.
 */
export function groupCommit<T>(
  write: (items: T[]) => Promise<void>,
  linger?: { ms: number; fullAt: number },
): ((item: T) => Promise<void>) & { flushNow: () => void } {
  let queue: { item: T; resolve: () => void; reject: (err: unknown) => void }[] = [];
  let flushing = false;
  let lingering: NodeJS.Timeout | undefined;
  const flush = async (): Promise<void> => {
    clearTimeout(lingering);
    lingering = undefined;
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
  const add = (item: T) =>
    new Promise<void>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (flushing) return;
      if (!linger || queue.length >= linger.fullAt) void flush();
      else lingering ??= setTimeout(() => void flush(), linger.ms);
    });
  return Object.assign(add, {
    /** Writes a lingering batch now (nothing more is coming). */
    flushNow: () => void (lingering && flush()),
  });
}
