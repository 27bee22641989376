// assistant_run_watches: an assistant standing by on a run. The standby veto reads it: a watched run gets no
// pause push (its terminal push still goes out).
import type { Db } from 'mongodb';
import type { IndexSpec } from './mongo';

export interface AssistantRunWatch {
  /** assistantId|runId: one row per pair, so PUT is idempotent. */
  _id: string;
  assistantId: string;
  runId: string;
  teamId: string;
  active: boolean;
  updatedAt: Date;
}

export const watchIndexes: IndexSpec[] = [
  { collection: 'assistant_run_watches', key: { runId: 1, active: 1 }, options: { name: 'run_active' } },
];

export type WatchStore = ReturnType<typeof createWatchStore>;

export function createWatchStore(db: Db) {
  const watches = db.collection<AssistantRunWatch>('assistant_run_watches');
  return {
    async activate(teamId: string, assistantId: string, runId: string, now: Date): Promise<void> {
      await watches.updateOne(
        { _id: `${assistantId}|${runId}` },
        { $set: { assistantId, runId, teamId, active: true, updatedAt: now } },
        { upsert: true },
      );
    },

    async remove(teamId: string, assistantId: string, runId: string): Promise<boolean> {
      const result = await watches.deleteOne({ _id: `${assistantId}|${runId}`, teamId });
      return result.deletedCount === 1;
    },

    async exists(teamId: string, assistantId: string, runId: string): Promise<boolean> {
      return (await watches.countDocuments({ _id: `${assistantId}|${runId}`, teamId }, { limit: 1 })) > 0;
    },

    async hasActiveWatch(runId: string): Promise<boolean> {
      return (await watches.countDocuments({ runId, active: true }, { limit: 1 })) > 0;
    },
  };
}
