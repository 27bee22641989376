// episodes: one row per outcome episode, written by the episode workflow, read by GET /runs/:id/episodes.
import type { Db } from 'mongodb';
import type { RunOutcome } from '../domain/outcome';
import type { IndexSpec, RetiredIndex } from './mongo';
import { pageNewestFirst, type Page, type PageCursor } from './paging';

export interface EpisodeRow {
  _id: string;
  runId: string;
  teamId: string;
  kind: RunOutcome['kind'];
  outcome: RunOutcome;
  recordedAt: Date;
}

export const episodeIndexes: IndexSpec[] = [
  // A run's episodes in either direction, _id breaking ties in recordedAt (the view pages newest first).
  {
    collection: 'episodes',
    key: { runId: 1, recordedAt: -1, _id: -1 },
    options: { name: 'run_recorded' },
  },
];

/** Replaced by run_recorded (it could not serve the tie-break on _id). */
export const retiredEpisodeIndexes: RetiredIndex[] = [{ collection: 'episodes', name: 'run_episodes' }];

export type EpisodeStore = ReturnType<typeof createEpisodeStore>;

export function createEpisodeStore(db: Db) {
  const episodes = db.collection<EpisodeRow>('episodes');
  return {
    /** Idempotent: a replayed or re-run episode keeps its first record. */
    async record(outcome: RunOutcome, now: Date): Promise<void> {
      await episodes.updateOne(
        { _id: outcome.episodeId },
        {
          $setOnInsert: {
            runId: outcome.runId,
            teamId: outcome.teamId,
            kind: outcome.kind,
            outcome,
            recordedAt: now,
          },
        },
        { upsert: true },
      );
    },

    /** The system's view (operator tools): no tenant filter, oldest first, at most `limit`. */
    async listForRunAnyTeam(runId: string, limit: number): Promise<EpisodeRow[]> {
      return episodes.find({ runId }).sort({ recordedAt: 1, _id: 1 }).limit(limit).toArray();
    },

    /** One episode of a run, in the caller's team; null when unknown there. */
    async getForRun(teamId: string, runId: string, episodeId: string): Promise<EpisodeRow | null> {
      return episodes.findOne({ _id: episodeId, runId, teamId });
    },

    /** A run's episodes in the caller's team, newest first: `limit` of them from `before` on. */
    async listForRun(
      teamId: string,
      runId: string,
      limit: number,
      before?: PageCursor,
    ): Promise<Page<EpisodeRow>> {
      return pageNewestFirst(episodes, { runId, teamId }, 'recordedAt', limit, before);
    },
  };
}
