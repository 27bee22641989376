// runs: one document per run. Reads are team-scoped for the API; the outcome emitters and the sweep read
// without a tenant filter (they act for the system, not for a caller).
import type { Collection, Db } from 'mongodb';
import type { Run } from '../domain/run';
import type { RunStatus } from '../domain/runStatus';
import type { IndexSpec } from './mongo';

export const runIndexes: IndexSpec[] = [
  { collection: 'runs', key: { teamId: 1, createdAt: -1 }, options: { name: 'team_recent' } },
  // listNotifiableRuns: runs that changed inside the sweep's lookback window.
  { collection: 'runs', key: { updatedAt: 1 }, options: { name: 'updated_at' } },
];

export type RunStore = ReturnType<typeof createRunStore>;

export function createRunStore(db: Db) {
  const runs: Collection<Run> = db.collection<Run>('runs');
  return {
    async insert(run: Run): Promise<void> {
      await runs.insertOne(run);
    },

    /** A caller's view: another team's run does not exist. */
    async getForTeam(teamId: string, runId: string): Promise<Run | null> {
      return runs.findOne({ _id: runId, teamId });
    },

    /** The system's view (outcome emitters, sweep, delivery): no tenant filter. */
    async getById(runId: string): Promise<Run | null> {
      return runs.findOne({ _id: runId });
    },

    async listForTeam(teamId: string, limit = 100): Promise<Run[]> {
      return runs.find({ teamId }).sort({ createdAt: -1 }).limit(limit).toArray();
    },

    /**
     * Applies a transition only if the run still has the status it was read with, so two concurrent
     * operations cannot both win. Returns the updated run, or null when the status moved meanwhile.
     */
    async transition(
      runId: string,
      expected: RunStatus,
      set: Partial<Run>,
      unset: (keyof Run)[] = [],
    ): Promise<Run | null> {
      const update: Record<string, unknown> = { $set: set };
      if (unset.length) update.$unset = Object.fromEntries(unset.map((k) => [k, '']));
      const result = await runs.updateOne({ _id: runId, status: expected }, update);
      if (result.modifiedCount !== 1) return null;
      return runs.findOne({ _id: runId });
    },
  };
}
