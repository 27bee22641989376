// What the reconciliation sweep owes an episode: the claim keys of the families that should have acted on it.
// Pure, so the sweep can pre-check the claims of a whole window of listed runs at once.
import { callbackScheduleSpanSeconds, shouldNotify } from './callback';
import { buildRunOutcome, claimKeys, type RunOutcome } from './outcome';
import { kindFor, MISSED_RECIPIENTS_RETRY_SECONDS } from './push';
import type { Run } from './run';
import { teamEventFromOutcome, type TeamEvent } from './teamEvents';

/** The sweep looks back at least this far: a day of runs that paused or ended. */
const MIN_LOOKBACK_SECONDS = 24 * 3600;

/** What bounds an episode's life: its callback schedule (EpisodeOptions) and its operator alert's retries. */
export interface EpisodeLife {
  callbackRetrySeconds: number[];
  callbackRetryJitter?: number;
  /** One attempt's start-to-close (absent: a minute). */
  callbackAttemptSeconds?: number;
  opsAlertRetryHours: number;
}

/** One call's quick retries through a store outage: 20 attempts of 30 s, 1 s backoff doubling to a minute. */
const QUICK_CALL_SPAN_SECONDS = 20 * 30 + (1 + 2 + 4 + 8 + 16 + 32) + 13 * 60;

/**
 * The longest an episode workflow can run (docs/versioning.md, "How long each workflow type can run"): its
 * callback's waits (each lengthened by its jitter, or by a Retry-After up to an hour) and attempts (each tried
 * three times with backoff, a worker lost mid-attempt), its team event's hand-off (tried again after each of
 * those waits, unjittered, each try a call's quick retries), its operator alert's retries, or a push's retries of
 * the recipients its fan-out missed, plus an hour of quick calls through a store outage.
 */
export function episodeLifetimeSeconds(life: EpisodeLife): number {
  const rounds = life.callbackRetrySeconds.length + 1;
  const waits = callbackScheduleSpanSeconds(life.callbackRetrySeconds, life.callbackRetryJitter);
  const attempts = rounds * (3 * (life.callbackAttemptSeconds ?? 60) + 15);
  const handOff =
    life.callbackRetrySeconds.reduce((sum, wait) => sum + wait, 0) + rounds * QUICK_CALL_SPAN_SECONDS;
  // A push that missed some recipients tries them again for a day, its last wait up to an hour.
  const missedPush = MISSED_RECIPIENTS_RETRY_SECONDS + 3600;
  return Math.max(life.opsAlertRetryHours * 3600 + 30, waits + attempts, handOff, missedPush) + 3600;
}

/**
 * How far back the sweep lists runs: far enough that an episode which closes with a family released, however
 * long it ran, is still in the window at the next pass (a run's updatedAt is its episode's start).
 */
export function sweepLookbackSeconds(life: EpisodeLife, sweepIntervalSeconds: number): number {
  return Math.max(MIN_LOOKBACK_SECONDS, episodeLifetimeSeconds(life) + 2 * sweepIntervalSeconds);
}

export interface SweepFamilies {
  /** Failed runs get an operator alert when the operator family is on. */
  ops: boolean;
}

export interface OwedEpisode {
  runId: string;
  episodeId: string;
  keys: string[];
  /** What the sweep starts the episode with when one of its claims is missing. */
  outcome: RunOutcome;
}

/**
 * A run as the sweep lists it: every field buildRunOutcome reads but the final answer (up to 1 MB; the sweep reads
 * it apart for the few runs that owe an episode), without the checkpoint, and the callback's URL and events but
 * never its secret.
 */
export type SweepRef = Pick<Run, '_id' | 'teamId' | 'ownerId' | 'status' | 'pause' | 'updatedAt'> &
  Partial<
    Pick<
      Run,
      | 'title'
      | 'pauseCount'
      | 'watchedIssueIds'
      | 'assistantWatchers'
      | 'createdAt'
      | 'endedAt'
      | 'finalAnswer'
      | 'error'
    >
  > & {
    callback?: Omit<NonNullable<Run['callback']>, 'secret'>;
  };

/** The standby veto as the listed run shows it: watched issue ids, or an assistant's active watch. */
export const standbyVetoed = (ref: SweepRef): boolean =>
  (ref.watchedIssueIds?.length ?? 0) > 0 || (ref.assistantWatchers?.length ?? 0) > 0;

/** The outcome a listed run owes (what its emitter built), if any. */
export function outcomeOfRef(ref: SweepRef): RunOutcome | undefined {
  return buildRunOutcome({
    title: '',
    pauseCount: 0,
    watchedIssueIds: [],
    createdAt: ref.updatedAt,
    ...ref,
    callback: ref.callback ? { ...ref.callback, secret: '' } : undefined,
  });
}

/** The episode a listed run owes, if any; `outcome`: its outcome, when the caller built it already. */
export function owedEpisode(
  ref: SweepRef,
  families: SweepFamilies,
  outcome: RunOutcome | undefined = outcomeOfRef(ref),
): OwedEpisode | undefined {
  if (!outcome) return undefined;
  const keys: string[] = [];
  // A vetoed pause owes no push while the veto holds: replaying it would only start a workflow that vetoes again
  // (on every pass). When the watch ends, its route touches the run, so the pause is owed again in the window.
  if (kindFor(outcome) && !isVetoedPause(ref, outcome)) {
    keys.push(claimKeys.push(outcome.episodeId));
  }
  if (shouldNotify(outcome)) keys.push(claimKeys.callback(outcome.episodeId));
  if (families.ops && outcome.kind === 'run_failed') keys.push(claimKeys.ops(outcome.episodeId));
  return keys.length ? { runId: ref._id, episodeId: outcome.episodeId, keys, outcome } : undefined;
}

/**
 * The team event of a listed pause the standby veto keeps the sweep from replaying (its episode would only veto
 * again): the episode raises it, so a vetoed pause whose emit failed is announced by the sweep itself.
 */
export function vetoedPauseEvent(ref: SweepRef, outcome: RunOutcome | undefined): TeamEvent | undefined {
  return outcome && isVetoedPause(ref, outcome) ? teamEventFromOutcome(outcome) : undefined;
}

/** A question the standby veto holds back: its push is not owed while the veto holds. */
const isVetoedPause = (ref: SweepRef, outcome: RunOutcome): boolean =>
  kindFor(outcome) === 'human_input_requested' && standbyVetoed(ref);
