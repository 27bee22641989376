// What the reconciliation sweep owes an episode: the claim keys of the families that should have acted on it.
// Pure, so the sweep can pre-check the claims of a whole window of listed runs at once.
import { shouldNotify } from './callback';
import { buildRunOutcome, claimKeys, type RunOutcome } from './outcome';
import { kindFor } from './push';
import type { Run } from './run';

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
 * A run as the sweep lists it: every field buildRunOutcome reads (the final answer and error included, so an owed
 * episode starts without loading its run again), without the checkpoint, and the callback's URL and events but
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

export function owedEpisode(ref: SweepRef, families: SweepFamilies): OwedEpisode | undefined {
  const outcome = buildRunOutcome({
    title: '',
    pauseCount: 0,
    watchedIssueIds: [],
    createdAt: ref.updatedAt,
    ...ref,
    callback: ref.callback ? { ...ref.callback, secret: '' } : undefined,
  });
  if (!outcome) return undefined;
  const keys: string[] = [];
  const kind = kindFor(outcome);
  // A vetoed pause owes no push while the veto holds: replaying it would only start a workflow that vetoes again
  // (on every pass). When the watch ends, its route touches the run, so the pause is owed again in the window.
  if (kind && !(kind === 'human_input_requested' && standbyVetoed(ref))) {
    keys.push(claimKeys.push(outcome.episodeId));
  }
  if (shouldNotify(outcome)) keys.push(claimKeys.callback(outcome.episodeId));
  if (families.ops && outcome.kind === 'run_failed') keys.push(claimKeys.ops(outcome.episodeId));
  return keys.length ? { runId: ref._id, episodeId: outcome.episodeId, keys, outcome } : undefined;
}
