// push_holds: a recipient an episode's push did not reach now but held for their digest (quiet hours,
// do-not-disturb, a burst), one row per (episode, person), `_id` episodeId|userId. Upserted, so a retried fan-out
// finds it and holds that person again (never sends to them); the digest that folded it in marks it with its id.
// GET /runs/:id/episodes and explain read a run's rows.
import type { Db } from 'mongodb';
import { CLAIM_RETENTION_SECONDS } from './claims';
import type { IndexSpec } from './mongo';

export interface PushHoldRow {
  _id: string; // episodeId|userId
  episodeId: string;
  runId: string;
  teamId: string;
  userId: string;
  kind: string;
  title: string;
  reason: 'quiet' | 'burst';
  /** When it was held; the reaper's clock. */
  at: Date;
  releaseAt: Date;
  /** The digest that went out with it. */
  digestId?: string;
  digestSentAt?: Date;
}

export const pushHoldIndexes: IndexSpec[] = [
  { collection: 'push_holds', key: { runId: 1 }, options: { name: 'run' } },
  {
    collection: 'push_holds',
    key: { at: 1 },
    options: { name: 'at_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
];

export const holdId = (episodeId: string, userId: string): string => `${episodeId}|${userId}`;

export type PushHoldStore = ReturnType<typeof createPushHoldStore>;

export function createPushHoldStore(db: Db) {
  const holds = db.collection<PushHoldRow>('push_holds');
  return {
    /** The episode's recipients already held (by an earlier attempt): by `_id`. */
    async heldOf(episodeId: string, userIds: string[]): Promise<Map<string, PushHoldRow>> {
      if (!userIds.length) return new Map();
      const rows = await holds.find({ _id: { $in: userIds.map((u) => holdId(episodeId, u)) } }).toArray();
      return new Map(rows.map((row) => [row.userId, row]));
    },

    /** Records holds; a row already there (a retry) keeps what it said first. */
    async hold(rows: Omit<PushHoldRow, '_id'>[]): Promise<void> {
      if (!rows.length) return;
      await holds.bulkWrite(
        rows.map((row) => ({
          updateOne: {
            filter: { _id: holdId(row.episodeId, row.userId) },
            update: { $setOnInsert: row },
            upsert: true,
          },
        })),
        { ordered: false },
      );
    },

    /** The holds a digest went out with. */
    async markSent(ids: string[], digestId: string, at: Date): Promise<void> {
      if (!ids.length) return;
      await holds.updateMany({ _id: { $in: ids } }, { $set: { digestId, digestSentAt: at } });
    },

    async listForRun(runId: string): Promise<PushHoldRow[]> {
      return holds.find({ runId }).toArray();
    },

    /** TTL does this where the server has it; the sweep's reaper where it has not. */
    async reapExpired(now: Date): Promise<number> {
      const before = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      return (await holds.deleteMany({ at: { $lte: before } })).deletedCount;
    },
  };
}
