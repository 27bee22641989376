// push_deliveries: one row per (episode, subscription) that the push service accepted. A retried or resumed
// fan-out reads it to skip endpoints already reached, and GET /runs/:id/episodes shows it.
import type { Db } from 'mongodb';
import { CLAIM_RETENTION_SECONDS } from './claims';
import { isDuplicateKey, type IndexSpec } from './mongo';

export interface PushDeliveryRow {
  _id: string; // episodeId|subscriptionId
  episodeId: string;
  subscriptionId: string;
  userId: string;
  at: Date;
}

export const pushDeliveryIndexes: IndexSpec[] = [
  { collection: 'push_deliveries', key: { episodeId: 1 }, options: { name: 'episode' } },
  {
    collection: 'push_deliveries',
    key: { at: 1 },
    options: { name: 'at_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
];

export type PushDeliveryStore = ReturnType<typeof createPushDeliveryStore>;

export function createPushDeliveryStore(db: Db) {
  const deliveries = db.collection<PushDeliveryRow>('push_deliveries');
  return {
    async record(episodeId: string, subscriptionId: string, userId: string, at: Date): Promise<void> {
      try {
        await deliveries.insertOne({
          _id: `${episodeId}|${subscriptionId}`,
          episodeId,
          subscriptionId,
          userId,
          at,
        });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err; // already recorded by an earlier attempt
      }
    },

    async deliveredSubscriptions(episodeId: string): Promise<Set<string>> {
      const rows = await deliveries.find({ episodeId }, { projection: { subscriptionId: 1 } }).toArray();
      return new Set(rows.map((row) => row.subscriptionId));
    },

    async countForEpisode(episodeId: string): Promise<number> {
      return deliveries.countDocuments({ episodeId });
    },

    async reapExpired(now: Date): Promise<number> {
      const cutoff = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      return (await deliveries.deleteMany({ at: { $lt: cutoff } })).deletedCount;
    },
  };
}
