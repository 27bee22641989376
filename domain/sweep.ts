// What the reconciliation sweep owes an episode: the claim keys of the families that should have acted on it.
// Pure, so the sweep can pre-check claims for a whole page of runs before loading any of them.
import { shouldNotify } from './callback';
import { buildRunOutcome, claimKeys } from './outcome';
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
}

/** A run as the sweep lists it: without its large fields, and with the callback's URL but never its secret. */
export type SweepRef = Pick<Run, '_id' | 'teamId' | 'ownerId' | 'status' | 'pause' | 'updatedAt'> &
  Partial<Pick<Run, 'title' | 'pauseCount' | 'watchedIssueIds' | 'createdAt' | 'endedAt'>> & {
    callback?: { url: string };
  };

export function owedEpisode(ref: SweepRef, families: SweepFamilies): OwedEpisode | undefined {
  const outcome = buildRunOutcome({
    title: '',
    pauseCount: 0,
    watchedIssueIds: [],
    createdAt: ref.updatedAt,
    ...ref,
    callback: ref.callback ? { url: ref.callback.url, secret: '' } : undefined,
  });
  if (!outcome) return undefined;
  const keys: string[] = [];
  if (kindFor(outcome)) keys.push(claimKeys.push(outcome.episodeId));
  if (shouldNotify(outcome)) keys.push(claimKeys.callback(outcome.episodeId));
  if (families.ops && outcome.kind === 'run_failed') keys.push(claimKeys.ops(outcome.episodeId));
  return keys.length ? { runId: ref._id, episodeId: outcome.episodeId, keys } : undefined;
}
