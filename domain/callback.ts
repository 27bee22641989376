// The run-completion callback: when it is owed and its versioned body. Pure, no Node builtins (the episode
// workflow imports shouldNotify).
import type { RunOutcome } from './outcome';
import { CALLBACK_EVENT_OF, type CallbackEvent, type Run } from './run';

/**
 * What a user may be shown of a refused or failed delivery. The detail (addresses, resolver codes) stays in
 * operator logs: it describes the inside of our network.
 */
export type DeliveryCategory =
  | 'refused: invalid url'
  | 'refused: not allowed'
  | 'refused: private address'
  | 'refused: dns'
  | 'dns: temporary failure'
  | 'timeout'
  | 'network error'
  | `http ${number}`;

/** What started a callback attempt: the episode's own schedule, or a redelivery (manual, or a recover's). */
export type CallbackTrigger = 'episode' | 'redeliver';

export interface CallbackBody {
  version: '1';
  type: CallbackEvent;
  episodeId: string;
  run: {
    id: string;
    status: Run['status'];
    finalAnswer: string | null;
    error: { code: string; message: string } | null;
    createdAt: string;
    endedAt: string | null;
  };
}

/** The launcher's test ping (run.test): what a receiver's verifier can be checked with before a run ends. */
export interface TestCallbackBody {
  version: '1';
  type: 'run.test';
  run: { id: string; status: Run['status'] };
}

export function testCallbackBody(run: Pick<Run, '_id' | 'status'>): TestCallbackBody {
  return { version: '1', type: 'run.test', run: { id: run._id, status: run.status } };
}

/**
 * The secrets a callback sent at `now` is signed with, newest first: the run's, and for `overlapSeconds` after a
 * rotation the one it replaced, so a receiver still holding that one keeps verifying until it has the new one.
 */
export function signingSecrets(
  callback: Pick<NonNullable<Run['callback']>, 'secret' | 'previousSecret'>,
  now: Date,
  overlapSeconds: number,
): string[] {
  const previous = callback.previousSecret;
  const overlapping =
    previous !== undefined && now.getTime() < previous.rotatedAt.getTime() + overlapSeconds * 1000;
  return overlapping ? [callback.secret, previous.secret] : [callback.secret];
}

/** shouldNotify: paused runs get no callback (they are waiting; the resume that ends them fires it then). */
export function shouldNotify(outcome: RunOutcome): boolean {
  return outcome.callbackRequested && outcome.kind !== 'run_paused';
}

/** The body, from the persisted run (resolveFinalAnswer: the final answer as the run stored it). */
export function callbackBody(run: Run, episodeId: string): CallbackBody | undefined {
  const type = CALLBACK_EVENT_OF[run.status];
  if (!type) return undefined;
  return {
    version: '1',
    type,
    episodeId,
    run: {
      id: run._id,
      status: run.status,
      finalAnswer: run.finalAnswer ?? null,
      error: run.error ?? null,
      createdAt: run.createdAt.toISOString(),
      endedAt: run.endedAt ? run.endedAt.toISOString() : null,
    },
  };
}

/**
 * The callback schedule unless CALLBACK_RETRY_SECONDS says otherwise: waits of 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
 * 10 h, so eight attempts over about 27 and a half hours (a receiver down for most of a day still gets its call).
 */
export const DEFAULT_CALLBACK_RETRY_SECONDS: readonly number[] = [5, 300, 1800, 7200, 18_000, 36_000, 36_000];

/** A receiver's Retry-After is honoured, up to this. */
export const MAX_CALLBACK_WAIT_SECONDS = 3600;

/**
 * The wait before the next attempt: the schedule's, or the receiver's Retry-After when longer (a Retry-After counts
 * up to an hour). `scheduleUncapped` (episodes started with a jitter, see EpisodeOptions.callbackRetryJitter): the
 * schedule's own wait stands whatever its length, so a day's schedule keeps its 10-hour waits; without it (histories
 * started before) the whole wait is capped at an hour, as it always was for them.
 */
export function callbackWaitSeconds(
  scheduled: number,
  retryAfterSeconds?: number,
  scheduleUncapped = false,
): number {
  const retryAfter = retryAfterSeconds ?? 0;
  if (scheduleUncapped) return Math.max(scheduled, Math.min(retryAfter, MAX_CALLBACK_WAIT_SECONDS));
  return Math.min(Math.max(scheduled, retryAfter), MAX_CALLBACK_WAIT_SECONDS);
}

/**
 * One wait of the schedule drawn within ±`jitter` of itself (0.1: ±10 %), in whole seconds and at least one, so
 * that the callbacks of receivers that failed together (an outage) do not all come back at the same second. `draw`
 * is uniform in [0, 1): in the workflow, Temporal's seeded Math.random, the same draw on every replay.
 */
export function jitteredWaitSeconds(scheduled: number, jitter: number, draw: number): number {
  return Math.max(1, Math.round(scheduled * (1 + jitter * (2 * draw - 1))));
}

/** An attempt the worker held back without sending: the receiver's breaker is open, or no slot came in time. */
export const PACING_HOLDS = ['breaker_open', 'paced'] as const;
export type PacingHold = (typeof PACING_HOLDS)[number];

/** Whether an attempt-log error says the worker held the attempt (nothing was sent). */
export const isPacingHold = (error: string | undefined): error is PacingHold =>
  (PACING_HOLDS as readonly string[]).includes(error ?? '');

/**
 * The longest the schedule's waits can take (`waits` as CALLBACK_RETRY_SECONDS lists them): each lengthened by
 * its jitter, or by a Retry-After up to an hour. Held attempts wait within it; past it, the schedule ends.
 */
export function callbackScheduleSpanSeconds(waits: number[], jitter?: number): number {
  return waits.reduce(
    (sum, wait) => sum + Math.max(Math.round(wait * (1 + (jitter ?? 0))), MAX_CALLBACK_WAIT_SECONDS),
    0,
  );
}

/** The floor of a held attempt's wait grows to this: a receiver back after a long hold waits at most this long. */
const MAX_HELD_BACKOFF_SECONDS = 600;

/**
 * The wait before an attempt the worker held (nothing sent) goes again: what the breaker asked (its cool-down
 * left), and at least 2^holds seconds up to 10 minutes, so an attempt held for a day is tried a few hundred times,
 * not thousands (each is an activity and a timer in the episode's history); at most an hour, as a Retry-After.
 */
export function heldWaitSeconds(retryAfterSeconds: number | undefined, holds: number): number {
  const backoff = Math.min(2 ** holds, MAX_HELD_BACKOFF_SECONDS);
  return Math.min(Math.max(retryAfterSeconds ?? 0, backoff), MAX_CALLBACK_WAIT_SECONDS);
}

/**
 * The rate-limit key of a team's redeliveries (CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM): the manual ones and a
 * recover's sends take from the same budget.
 */
export const teamRedeliveryBudgetKey = (teamId: string): string => `callback-redeliver-team|${teamId}`;
