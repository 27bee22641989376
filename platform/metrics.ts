// The application's Prometheus metrics: one object over a registry passed in, with one small method per event,
// called where the result is known. Every label value comes from a closed set (families, kinds, results, status
// classes), never from a run, an episode or a user: a series per run would grow without bound.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { HEALTH_ALERT_KINDS } from '../domain/health';
import { INTERACTION_CLAIM_PREFIXES } from '../domain/interaction';
import { OPERATOR_ALERT_KINDS } from '../domain/ops';
import { claimFamily, OUTCOME_KINDS } from '../domain/outcome';
import { PUSH_RESULTS } from '../domain/push';
import { ENDPOINT_CLAIM_PREFIX } from '../domain/teamEvents';

export type Emitter = 'api' | 'runner' | 'sweep';

/** A bounded label value: anything outside the domain's set is counted as "other". */
const bounded = (value: string, known: readonly string[]): string =>
  known.includes(value) ? value : 'other';

const HEALTH_KINDS: readonly string[] = HEALTH_ALERT_KINDS;

/** The family a claim's takeover counts under: an outcome's three, an interaction's sends, a team endpoint's events. */
export function takeoverFamily(key: string): string {
  if (INTERACTION_CLAIM_PREFIXES.some((prefix) => key.startsWith(prefix))) return 'interaction';
  if (key.startsWith(ENDPOINT_CLAIM_PREFIX)) return 'endpoint';
  return claimFamily(key);
}

/** 2xx, 4xx, ...; "none" when no HTTP answer came (network, deadline, guard). */
export function statusClass(status: number | undefined): string {
  return status === undefined || status < 100 || status > 599 ? 'none' : `${Math.floor(status / 100)}xx`;
}

export interface MetricsOptions {
  /** Process metrics (CPU, memory, event loop lag, GC), prefixed flow_notify_process_. Default on. */
  processMetrics?: boolean;
}

type Registers = Registry[];

/** Episode starts, by who started them. */
function createEpisodeMetrics(registers: Registers) {
  const episodesStarted = new Counter({
    name: 'flow_notify_episodes_started_total',
    help: 'Episode workflows started, by who started them and the outcome kind (a start refused as a duplicate is not counted).',
    labelNames: ['emitter', 'kind'] as const,
    registers,
  });
  return {
    episodeStarted(emitter: Emitter, kind: string): void {
      episodesStarted.inc({ emitter, kind: bounded(kind, OUTCOME_KINDS) });
    },
  };
}

/** The push family: sends, prunes, digests giving up, and the latency to a run's first push. */
function createPushMetrics(registers: Registers) {
  const pushSends = new Counter({
    name: 'flow_notify_push_sends_total',
    help: `Web Push sends by result (${PUSH_RESULTS.join(', ')}).`,
    labelNames: ['result'] as const,
    registers,
  });
  const pushPrunes = new Counter({
    name: 'flow_notify_push_prunes_total',
    help:
      'Push subscriptions pruned by the fan-out (gone, refused, or no push service there in 3 episodes ' +
      'in a row spanning PUSH_PRUNE_MIN_HOURS).',
    registers,
  });
  const digestHoldsGivenUp = new Counter({
    name: 'flow_notify_digest_holds_given_up_total',
    help: 'Held pushes whose digest no device took for a day: the digest gave up on them (explain shows which).',
    registers,
  });
  const firstPush = new Histogram({
    name: 'flow_notify_outcome_to_first_push_seconds',
    help: 'From the outcome (the run paused or ended) to the first push of its episode accepted by a push service.',
    labelNames: ['kind'] as const,
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800],
    registers,
  });
  return {
    pushSent(result: string): void {
      pushSends.inc({ result: bounded(result, PUSH_RESULTS) });
    },
    pushPruned(): void {
      pushPrunes.inc();
    },
    digestGaveUp(holds: number): void {
      digestHoldsGivenUp.inc(holds);
    },
    firstPush(kind: string, occurredAt: string, now: Date): void {
      const seconds = (now.getTime() - Date.parse(occurredAt)) / 1000;
      if (Number.isFinite(seconds))
        firstPush.observe({ kind: bounded(kind, OUTCOME_KINDS) }, Math.max(0, seconds));
    },
  };
}

/** The callback family: attempts and their duration, give-ups, breakers and held attempts. */
function createCallbackMetrics(registers: Registers) {
  const callbackAttempts = new Counter({
    name: 'flow_notify_callback_attempts_total',
    help: 'Callback attempts by result (delivered, retry, stop) and HTTP status class (2xx..5xx, none).',
    labelNames: ['result', 'status_class'] as const,
    registers,
  });
  const callbackDuration = new Histogram({
    name: 'flow_notify_callback_attempt_duration_seconds',
    help: "One callback attempt: the guard's lookup, connect and the whole exchange.",
    labelNames: ['result'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  const callbacksGivenUp = new Counter({
    name: 'flow_notify_callbacks_given_up_total',
    help: 'Callbacks settled as given up (a final refusal, or the retry schedule ran out).',
    registers,
  });
  // The one label not from a closed set: receiver origins, bounded by the pacing's cap on origins it tracks (a
  // series exists from an origin's first opening until the pacing forgets the origin).
  const breakerOpen = new Gauge({
    name: 'flow_notify_callback_breaker_open',
    help:
      "Teams whose circuit breaker at a receiver origin holds this worker's callbacks to it (open or half-open); 0 " +
      'once none does (each team has its own breaker at an origin).',
    labelNames: ['origin'] as const,
    registers,
  });
  const callbacksHeld = new Counter({
    name: 'flow_notify_callback_attempts_held_total',
    help:
      "Callback attempts that did not go out: their origin's breaker was open (breaker_open), or no slot " +
      'under CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN came free in time (paced).',
    labelNames: ['reason'] as const,
    registers,
  });
  return {
    callbackAttempt(
      result: 'delivered' | 'retry' | 'stop',
      status: number | undefined,
      seconds: number,
    ): void {
      callbackAttempts.inc({ result, status_class: statusClass(status) });
      callbackDuration.observe({ result }, seconds);
    },
    callbackGaveUp(): void {
      callbacksGivenUp.inc();
    },
    callbackHeld(reason: 'breaker_open' | 'paced'): void {
      callbacksHeld.inc({ reason });
    },
    /** How many teams' breakers at an origin are open now; undefined: the origin is no longer tracked. */
    callbackBreaker(origin: string, openTeams: number | undefined): void {
      if (openTeams === undefined) breakerOpen.remove({ origin });
      else breakerOpen.set({ origin }, openTeams);
    },
  };
}

/** Operator alerts (run-health ones counted by kind too) and stale claims taken over. */
function createOperatorMetrics(registers: Registers) {
  const operatorAlerts = new Counter({
    name: 'flow_notify_operator_alerts_total',
    help: 'Operator alert POSTs by alert kind and result (sent, already_sent, failed).',
    labelNames: ['kind', 'result'] as const,
    registers,
  });
  const healthAlerts = new Counter({
    name: 'flow_notify_health_alerts_total',
    help: `Run-health alerts (${HEALTH_ALERT_KINDS.join(', ')}) handed to the operator, by kind.`,
    labelNames: ['kind'] as const,
    registers,
  });
  const claimTakeovers = new Counter({
    name: 'flow_notify_claim_takeovers_total',
    help: 'Stale claims taken over (a holder died or stalled past CLAIM_GRACE_SECONDS), by family.',
    labelNames: ['family'] as const,
    registers,
  });
  return {
    operatorAlert(kind: string, result: 'sent' | 'already_sent' | 'failed'): void {
      operatorAlerts.inc({ kind: bounded(kind, OPERATOR_ALERT_KINDS), result });
      if (result === 'sent' && HEALTH_KINDS.includes(kind)) healthAlerts.inc({ kind });
    },
    claimTakeover(key: string): void {
      claimTakeovers.inc({ family: takeoverFamily(key) });
    },
  };
}

/** The reconciliation sweep: passes, and what each listed, found owed and started. */
function createSweepMetrics(registers: Registers) {
  const sweepPasses = new Histogram({
    name: 'flow_notify_sweep_pass_seconds',
    help: 'Reconciliation sweep passes and how long each took (its _count is the number of passes).',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120],
    registers,
  });
  const sweepRuns = new Counter({
    name: 'flow_notify_sweep_runs_listed_total',
    help: 'Runs the sweep listed in its lookback window.',
    registers,
  });
  const sweepOwed = new Counter({
    name: 'flow_notify_sweep_episodes_owed_total',
    help: 'Episodes the sweep found with a claim missing.',
    registers,
  });
  const sweepStarted = new Counter({
    name: 'flow_notify_sweep_episodes_started_total',
    help: 'Of those, episodes the sweep started (the rest were running already).',
    registers,
  });
  return {
    sweepPass(seconds: number, pass: { scanned: number; unsettled: number; started: number }): void {
      sweepPasses.observe(seconds);
      sweepRuns.inc(pass.scanned);
      sweepOwed.inc(pass.unsettled);
      sweepStarted.inc(pass.started);
    },
  };
}

/** A person's side of a pause: how long until a device showed it, and until someone answered it. */
function createAnswerMetrics(registers: Registers) {
  const buckets = [1, 5, 15, 30, 60, 300, 900, 1800, 3600, 4 * 3600, 24 * 3600];
  const firstShown = new Histogram({
    name: 'flow_notify_pause_to_first_shown_seconds',
    help: "From a run's pause to the first device that reported its push shown (a browser that sends no receipt is not counted).",
    buckets,
    registers,
  });
  const answered = new Histogram({
    name: 'flow_notify_pause_to_answer_seconds',
    help: "From a run's pause to the answer that resumed it (the studio, the API or a notification's action).",
    buckets,
    registers,
  });
  const observe = (histogram: Histogram, from: Date, to: Date): void => {
    const seconds = (to.getTime() - from.getTime()) / 1000;
    if (Number.isFinite(seconds)) histogram.observe(Math.max(0, seconds));
  };
  return {
    pauseFirstShown(pausedAt: Date, shownAt: Date): void {
      observe(firstShown, pausedAt, shownAt);
    },
    pauseAnswered(pausedAt: Date, answeredAt: Date): void {
      observe(answered, pausedAt, answeredAt);
    },
  };
}

export function createMetrics(registry: Registry, options: MetricsOptions = {}) {
  const registers = [registry];
  if (options.processMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'flow_notify_' });
  return {
    registry,
    ...createEpisodeMetrics(registers),
    ...createPushMetrics(registers),
    ...createCallbackMetrics(registers),
    ...createOperatorMetrics(registers),
    ...createSweepMetrics(registers),
    ...createAnswerMetrics(registers),
  };
}

export type Metrics = ReturnType<typeof createMetrics>;

/** The Prometheus text exposition content type prom-client writes. */
export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;
