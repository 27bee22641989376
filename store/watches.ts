// assistant_run_watches: an assistant standing by on a run. The standby veto reads it: a watched run gets no
// pause push (its terminal push still goes out).
import type { Db } from 'mongodb';
import type { IndexSpec } from './mongo';
import { createRunStore } from './runs';

export interface AssistantRunWatch {
  /** assistantId|runId: one row per pair, so PUT is idempotent. */
  _id: string;
  assistantId: string;
  runId: string;
  teamId: string;
  active: boolean;
  updatedAt: Date;
  /** Set once start-up has made sure the run carries this watch (watches made before runs did). */
  onRun?: boolean;
}

export const watchIndexes: IndexSpec[] = [
  { collection: 'assistant_run_watches', key: { runId: 1, active: 1 }, options: { name: 'run_active' } },
];

/**
 * Start-up: the run's copy of every watch not known to have one (made before runs carried their watchers, or left
 * without one by a crash between the route's two writes), so the sweep sees the veto instead of restarting the
 * pause every pass. Idempotent; each watch is written once. Returns the watches it went through.
 */
export async function migrateWatchesOntoRuns(db: Db): Promise<number> {
  const watches = db.collection<AssistantRunWatch>('assistant_run_watches');
  const runs = createRunStore(db);
  let migrated = 0;
  for await (const w of watches.find({ active: true, onRun: { $ne: true } })) {
    await runs.addWatcher(w.teamId, w.runId, w.assistantId);
    // A DELETE that ran meanwhile removed the run's copy before the row: take back the copy just made.
    const kept = await watches.updateOne({ _id: w._id }, { $set: { onRun: true } });
    if (kept.matchedCount === 0) await runs.removeWatcher(w.teamId, w.runId, w.assistantId, new Date());
    migrated++;
  }
  return migrated;
}

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

    /** An active watch on the run, under the run's own team. */
    async hasActiveWatch(teamId: string, runId: string): Promise<boolean> {
      return (await watches.countDocuments({ runId, active: true, teamId }, { limit: 1 })) > 0;
    },
  };
}
