// The push mechanism: one payload to many subscriptions, at most `width` at a time, pruning what is dead and
// weighing a push service's refusals. No Temporal in it: the episode's activity and the API's test push both use it.
import { createHash } from 'node:crypto';
import type { Config } from '../../config';
import type { FanOutResult } from '../../contract/activities';
import type { PushPayload, SendOutcome } from '../../domain/push';
import { judgeRefusals, type ConfigFaultRule } from '../../domain/pushServices';
import type { PushSender } from './sender';
import { mapBounded } from '../../platform/concurrency';
import type { PushServiceStore } from '../../store/push/services';
import type { PushSubscriptionRow, PushSubscriptionStore } from '../../store/push/subscriptions';
import type { Metrics } from '../../platform/metrics';
import { inPushSendSpan } from '../../platform/tracing';

export interface FanOutDeps {
  subscriptions: PushSubscriptionStore;
  sender: PushSender;
  /** How many sends are in flight at once. */
  width: number;
  log: (line: string) => void;
  /** Called on every step forward (an attempt settled, a send handled): the fan-out's heartbeat. */
  onProgress?: () => void;
  /** Aborted: start no new send (the activity is cancelled). */
  signal?: AbortSignal;
  /**
   * Where a known push service's refusals of our VAPID identity are weighed (judgeRefusals); absent: each refusal
   * only counts toward pruning its subscription.
   */
  pushServices?: Pick<PushServiceStore, 'get' | 'record'>;
  /** PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS and PUSH_CONFIG_FAULT_WINDOW_SECONDS. Default 3 in an hour. */
  configFaultRule?: ConfigFaultRule;
  /** A known push service refuses our VAPID identity as a whole: the operator is told (push_config_fault). */
  onConfigFault?: (fault: ConfigFaultSeen) => Promise<void>;
  /** When an episode happens, for the prune streak's span. Default: the system clock. */
  now?: () => Date;
  /** PUSH_PRUNE_MIN_HOURS: how long a streak must span before it prunes. Default 24. */
  pruneMinHours?: number;
  /** Counts each send's result and each prune; absent: nothing is recorded (the API's test push). */
  metrics?: Pick<Metrics, 'pushSent' | 'pushPruned'>;
  /** A device's own copy of the payload (its person's action tokens); absent: the same payload to every device. */
  payloadFor?: (sub: PushSubscriptionRow) => PushPayload;
  /**
   * Devices an earlier attempt of the same push reached: their push services took our key, so what they refuse in
   * this attempt was made under another key, as if they had taken it in this very fan-out.
   */
  reachedBefore?: PushSubscriptionRow[];
}

/** What a fan-out saw of a push service refusing our identity as a whole. */
export interface ConfigFaultSeen {
  origin: string;
  status: number;
  subscriptions: number;
  users: number;
  windowSeconds: number;
}

/** PUSH_CONFIG_FAULT_MIN_SUBSCRIPTIONS and PUSH_CONFIG_FAULT_WINDOW_SECONDS as a rule. */
export function configFaultRuleOf(
  config: Pick<Config, 'pushConfigFaultMinSubscriptions' | 'pushConfigFaultWindowSeconds'>,
): ConfigFaultRule {
  return {
    minSubscriptions: config.pushConfigFaultMinSubscriptions,
    windowSeconds: config.pushConfigFaultWindowSeconds,
  };
}

export const DEFAULT_CONFIG_FAULT_RULE: ConfigFaultRule = { minSubscriptions: 3, windowSeconds: 3600 };

const HUMAN_INPUT_TTL_S = 24 * 3600;

/**
 * A subscription that found no push service there (unresolved, denied) in this many consecutive episodes,
 * spanning at least PUSH_PRUNE_MIN_HOURS, is pruned.
 */
export const PRUNE_AFTER_UNRESOLVED_EPISODES = 3;
const DEFAULT_PRUNE_MIN_HOURS = 24;
const OUTCOME_TTL_S = 4 * 24 * 3600;

/**
 * Web Push Topic: at most 32 base64url characters, one per episode (each digest its own), so a queued older copy
 * of the same message is replaced. A person's digests share a tag but not a Topic: a newer digest tells only what
 * came since, so it must not replace an older one the device has not received (the service worker adds them up).
 */
export function topicFor(episodeId: string): string {
  return createHash('sha256').update(episodeId).digest('base64url').slice(0, 32);
}

export function pushOptionsFor(payload: PushPayload) {
  return {
    ttlSeconds: payload.kind === 'human_input_requested' ? HUMAN_INPUT_TTL_S : OUTCOME_TTL_S,
    urgency: payload.kind === 'human_input_requested' ? ('high' as const) : ('normal' as const),
    topic: topicFor(payload.episodeId),
  };
}

type Refusal = { sub: PushSubscriptionRow; status: number };

/** One fan-out in progress: what it was given and what it has seen so far. */
interface FanOutRun {
  deps: FanOutDeps;
  payload: PushPayload;
  onDelivered: (sub: PushSubscriptionRow) => Promise<void>;
  result: Omit<FanOutResult, 'alreadyDelivered'>;
  now: () => Date;
  pruneMinMs: number;
  // A known push service's 401/403, by origin, weighed once the fan-out is over: whether the same service took
  // another of its sends tells a subscription made under another key from our key refused as a whole.
  keyRefused: Map<string, Refusal[]>;
  acceptedAt: Set<string>;
}

const originOf = (sub: PushSubscriptionRow): string => new URL(sub.endpoint).origin;

/**
 * Sends one payload to many subscriptions, at most `width` at a time. Dead endpoints (404/410, refused by the
 * outbound guard, or no push service there in PRUNE_AFTER_UNRESOLVED_EPISODES episodes in a row spanning
 * pruneMinHours) are pruned; a resolver that could not answer is a transient failure like a 5xx. onDelivered
 * runs right after each accepted send and the lane waits for it (the worker records the delivery there; how long
 * that takes bounds what a crash repeats, see deliverPush).
 */
export async function fanOut(
  deps: FanOutDeps,
  subs: PushSubscriptionRow[],
  payload: PushPayload,
  onDelivered: (sub: PushSubscriptionRow) => Promise<void> = async () => undefined,
): Promise<Omit<FanOutResult, 'alreadyDelivered'>> {
  const options = pushOptionsFor(payload);
  const run: FanOutRun = {
    deps,
    payload,
    onDelivered,
    result: { attempted: subs.length, delivered: 0, pruned: 0, failed: 0, retryable: 0 },
    now: deps.now ?? (() => new Date()),
    pruneMinMs: (deps.pruneMinHours ?? DEFAULT_PRUNE_MIN_HOURS) * 3600_000,
    keyRefused: new Map(),
    acceptedAt: new Set((deps.reachedBefore ?? []).map(originOf)),
  };
  // One resolution per host for the whole fan-out (2,000 endpoints on one push service = one lookup, not 2,000
  // through libuv's 4-thread pool); a retried activity starts a new fan-out, so it asks again.
  const hooks = { onProgress: deps.onProgress, resolved: new Map() };
  await mapBounded(
    subs,
    deps.width,
    async (sub) => {
      await handleOutcome(
        run,
        sub,
        await inPushSendSpan(sub.endpoint, () =>
          deps.sender.send(sub, deps.payloadFor?.(sub) ?? payload, options, hooks),
        ),
      );
      deps.onProgress?.();
    },
    deps.signal,
  );
  for (const [origin, refused] of run.keyRefused) {
    await weighRefusals(run, origin, refused);
    deps.onProgress?.();
  }
  return run.result;
}

/** What one send's outcome does to the subscription and to the fan-out's counts. */
async function handleOutcome(run: FanOutRun, sub: PushSubscriptionRow, outcome: SendOutcome): Promise<void> {
  const { deps, result } = run;
  deps.metrics?.pushSent(outcome.result);
  switch (outcome.result) {
    case 'delivered':
      result.delivered++;
      run.acceptedAt.add(originOf(sub));
      await run.onDelivered(sub);
      // Only rows that carry a count pay for the write: the common send stays one write (onDelivered's).
      if (sub.unresolved)
        await bookkept(run, sub, 'clear its unresolved count', () =>
          deps.subscriptions.clearUnresolved(sub._id, run.now()),
        );
      return;
    case 'unresolved':
    case 'denied':
      // Not worth another attempt in this episode; the next episodes tell whether it is really gone.
      if (
        !(await bookkept(run, sub, 'count it toward pruning', () =>
          countTowardPrune(run, sub, outcome.detail ?? outcome.result),
        ))
      )
        result.failed++;
      return;
    case 'gone':
    case 'refused':
      if (!(await bookkept(run, sub, 'prune it', () => deps.subscriptions.prune(sub._id)))) {
        result.failed++; // still there: the next episode finds it gone again
        return;
      }
      result.pruned++;
      deps.metrics?.pushPruned();
      deps.log(`push: pruned subscription ${sub._id} of ${sub.userId} (${outcome.status ?? outcome.detail})`);
      return;
    case 'key_refused': {
      const origin = originOf(sub);
      run.keyRefused.set(origin, [
        ...(run.keyRefused.get(origin) ?? []),
        { sub, status: outcome.status ?? 0 },
      ]);
      return;
    }
    case 'failed':
      result.failed++;
      result.retryable++; // 5xx, 429 past its wait, network, resolver down: worth another activity attempt
      // The next attempt waits only while every device it owes was asked to (429 Retry-After), the soonest: one
      // whose service failed without asking is not held up by another service.
      if (result.retryable === 1) result.retryAfterMs = outcome.retryAfterMs;
      else if (result.retryAfterMs !== undefined)
        result.retryAfterMs =
          outcome.retryAfterMs === undefined
            ? undefined
            : Math.min(result.retryAfterMs, outcome.retryAfterMs);
      return;
    case 'rejected':
      result.failed++;
      result.rejected = (result.rejected ?? 0) + 1;
      return;
    default:
      result.failed++;
  }
}

/**
 * A subscription's bookkeeping after a send (its prune, its unresolved count): a write that fails is logged and
 * fails nothing else. Failing the fan-out for it would have its retry send again to everyone not yet recorded.
 */
async function bookkept(
  run: FanOutRun,
  sub: PushSubscriptionRow,
  what: string,
  write: () => Promise<unknown>,
): Promise<boolean> {
  try {
    await write();
    return true;
  } catch (err) {
    run.deps.log(`push: subscription ${sub._id} of ${sub.userId}: could not ${what}: ${String(err)}`);
    return false;
  }
}

/**
 * One more episode in which this subscription reached no push service willing to take it: counted, and pruned
 * once the streak has lasted (PRUNE_AFTER_UNRESOLVED_EPISODES spanning pruneMinHours). One wrong DNS answer (a
 * sinkhole, a split horizon) meets every subscription of a push service in one fan-out, and close episodes are
 * not independent evidence. `faultAt`: when the push service last refused us as a whole; a streak that
 * overlaps it proves nothing about the subscription, and starts again.
 */
async function countTowardPrune(
  run: FanOutRun,
  sub: PushSubscriptionRow,
  detail: string,
  faultAt?: Date,
): Promise<void> {
  const { deps, result, payload } = run;
  const at = run.now();
  const streak = await deps.subscriptions.markUnresolved(sub._id, payload.episodeId, at);
  const spanMs = at.getTime() - streak.since.getTime();
  const inARow = `${streak.count} episodes in a row over ${(spanMs / 3600_000).toFixed(1)} h`;
  const due = streak.count >= PRUNE_AFTER_UNRESOLVED_EPISODES && spanMs >= run.pruneMinMs;
  // Counted once its writes are done: one that throws is counted by the caller.
  if (due && faultAt && faultAt >= streak.since) {
    await deps.subscriptions.restartUnresolved(sub._id, payload.episodeId, at);
    result.failed++;
    deps.log(
      `push: subscription ${sub._id} of ${sub.userId}: ${detail} (${inARow}); kept, its push service refused ` +
        'our identity as a whole meanwhile: counted again from this episode',
    );
  } else if (due) {
    await deps.subscriptions.prune(sub._id);
    result.pruned++;
    deps.metrics?.pushPruned();
    deps.log(`push: pruned subscription ${sub._id} of ${sub.userId} (${detail}, ${inARow})`);
  } else {
    result.failed++;
    deps.log(`push: subscription ${sub._id} of ${sub.userId}: ${detail} (${inARow})`);
  }
}

/**
 * One origin's refusals of this fan-out: our key refused as a whole (the operator's), or theirs (pruned). Its
 * bookkeeping is best effort, as a subscription's is: a store call that fails is logged, and fails no send.
 */
async function weighRefusals(run: FanOutRun, origin: string, refused: Refusal[]): Promise<void> {
  const { deps, result } = run;
  const rule = deps.configFaultRule ?? DEFAULT_CONFIG_FAULT_RULE;
  const at = run.now();
  const unweighed = (err: unknown) => {
    deps.log(`push: ${origin}: could not weigh its refusals: ${String(err)}`);
    result.failed += refused.length;
  };
  let row: Awaited<ReturnType<PushServiceStore['get']>> | undefined;
  try {
    row = await deps.pushServices?.get(origin);
  } catch (err) {
    return unweighed(err);
  }
  let faultAt = row?.faultAt;
  if (run.acceptedAt.has(origin)) {
    // It took our key in this very fan-out: what it refused was made under another key. Earlier evidence is void.
    if (row?.refusals.length)
      await deps.pushServices
        ?.record(origin, [])
        .catch((err: unknown) => deps.log(`push: ${origin}: could not clear its refusals: ${String(err)}`));
  } else if (deps.pushServices) {
    const fresh = refused.map(({ sub }) => ({ subscriptionId: sub._id, userId: sub.userId, at }));
    const judged = judgeRefusals(row?.refusals ?? [], fresh, at, rule);
    try {
      await deps.pushServices.record(origin, judged.evidence, judged.fault ? at : undefined);
    } catch (err) {
      return unweighed(err);
    }
    if (judged.fault) {
      faultAt = at;
      result.failed += refused.length;
      const { status } = refused[0];
      deps.log(
        `push: OPERATOR ACTION NEEDED: ${origin} refuses our VAPID identity as a whole (${status} to ` +
          `${judged.subscriptions} subscriptions of ${judged.users} users, none accepted); check ` +
          'VAPID_PUBLIC_KEY / VAPID_PRIVATE_KEY / VAPID_SUBJECT (subscriptions kept, not counted toward pruning)',
      );
      const { subscriptions, users } = judged;
      await deps.onConfigFault?.({
        origin,
        status,
        subscriptions,
        users,
        windowSeconds: rule.windowSeconds,
      });
      return;
    }
  }
  for (const { sub, status } of refused) {
    const detail = `${origin} answered ${status} to our VAPID identity`;
    if (
      !(await bookkept(run, sub, 'count it toward pruning', () =>
        countTowardPrune(run, sub, detail, faultAt),
      ))
    )
      result.failed++;
  }
}
