// push_deliveries: one row per (episode, subscription) that the push service accepted. A retried or resumed
// fan-out reads it to skip endpoints already reached, and GET /runs/:id/episodes shows it.
//
// Rows are insert-only (atomic on MongoDB and FerretDB alike) and the fan-out reads them by _id, the lookup
// FerretDB v1 pushes down to SQLite (an `$in` on _id with our patch, tools/ferretdb/patch). Read by episode id
// instead, FerretDB decoded the whole collection in Go on every fan-out: the bench's episodes ran at half rate.
import { MongoBulkWriteError, type Db } from 'mongodb';
import { CLAIM_RETENTION_SECONDS } from './claims';
import type { IndexSpec } from './mongo';

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

const deliveryId = (episodeId: string, subscriptionId: string): string => `${episodeId}|${subscriptionId}`;

export type PushDeliveryStore = ReturnType<typeof createPushDeliveryStore>;

export function createPushDeliveryStore(db: Db) {
  const deliveries = db.collection<PushDeliveryRow>('push_deliveries');
  return {
    /** Records many deliveries in one write; rows an earlier attempt already recorded are left as they are. */
    async recordMany(rows: Omit<PushDeliveryRow, '_id'>[]): Promise<void> {
      if (!rows.length) return;
      try {
        await deliveries.insertMany(
          rows.map((row) => ({ _id: deliveryId(row.episodeId, row.subscriptionId), ...row })),
          { ordered: false },
        );
      } catch (err) {
        if (!(err instanceof MongoBulkWriteError)) throw err;
        const codes = ([] as { code: number }[]).concat(err.writeErrors).map((e) => e.code);
        if (!codes.length || codes.some((code) => code !== 11000)) throw err;
      }
    },

    /** Which of these subscriptions this episode already reached. */
    async deliveredSubscriptions(episodeId: string, subscriptionIds: string[]): Promise<Set<string>> {
      if (!subscriptionIds.length) return new Set();
      const ids = subscriptionIds.map((subscriptionId) => deliveryId(episodeId, subscriptionId));
      const rows = await deliveries
        .find({ _id: { $in: ids } }, { projection: { subscriptionId: 1 } })
        .toArray();
      return new Set(rows.map((row) => row.subscriptionId));
    },

    /**
     * Each subscription's newest accepted push, for the caller's device list (a handful of ids, bounded by
     * PUSH_MAX_SUBSCRIPTIONS_PER_USER): one sorted read per id, in parallel.
     */
    async lastSuccess(subscriptionIds: string[]): Promise<Map<string, Date>> {
      const rows = await Promise.all(
        subscriptionIds.map((subscriptionId) =>
          deliveries.findOne(
            { subscriptionId },
            { sort: { at: -1 }, projection: { subscriptionId: 1, at: 1 } },
          ),
        ),
      );
      return new Map(rows.flatMap((row) => (row ? [[row.subscriptionId, row.at] as const] : [])));
    },

    async countForEpisode(episodeId: string): Promise<number> {
      return deliveries.countDocuments({ episodeId });
    },

    /** One episode's deliveries, oldest first, at most `limit` (operator tools). */
    async listForEpisode(episodeId: string, limit: number): Promise<PushDeliveryRow[]> {
      return deliveries.find({ episodeId }).sort({ at: 1 }).limit(limit).toArray();
    },

    async reapExpired(now: Date): Promise<number> {
      const cutoff = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      return (await deliveries.deleteMany({ at: { $lt: cutoff } })).deletedCount;
    },
  };
}
