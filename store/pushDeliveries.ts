// push_deliveries: one row per episode, holding the subscriptions the push service accepted its push for. A
// retried or resumed fan-out reads it to skip endpoints already reached, and GET /runs/:id/episodes counts it.
//
// One row per episode rather than per send: every read and write goes by _id, the one lookup FerretDB v1 pushes
// down to SQLite. A per-send row read back by episode id made FerretDB decode the whole collection in Go on every
// fan-out (the bench's episodes ran at half the rate). One fan-out writes its row one batch at a time
// (groupCommit); two attempts of one episode writing at once is the rare case of a worker cut off from Temporal
// but not from the push service. MongoDB applies $addToSet atomically; FerretDB v1 reads, modifies and writes
// back, so there one of two concurrent batches can be lost: a later attempt then repeats those sends (with
// the same tag), never skips one.
import type { Db } from 'mongodb';
import { CLAIM_RETENTION_SECONDS } from './claims';
import { isDuplicateKey, type IndexSpec } from './mongo';

export interface PushDeliveryRow {
  /** The episode id. */
  _id: string;
  subscriptionIds: string[];
  /** When the latest delivery was recorded (the reaper's clock). */
  at: Date;
}

export const pushDeliveryIndexes: IndexSpec[] = [
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
    /** Adds deliveries to an episode's row in one write; ids an earlier attempt already recorded stay once. */
    async record(episodeId: string, subscriptionIds: string[], at: Date): Promise<void> {
      if (!subscriptionIds.length) return;
      const write = () =>
        deliveries.updateOne(
          { _id: episodeId },
          { $addToSet: { subscriptionIds: { $each: subscriptionIds } }, $set: { at } },
          { upsert: true },
        );
      try {
        await write();
      } catch (err) {
        // Two first writes for one episode (a retried attempt beside a slow one) race to insert; the loser's
        // second try finds the row and adds to it.
        if (!isDuplicateKey(err)) throw err;
        await write();
      }
    },

    async deliveredSubscriptions(episodeId: string): Promise<Set<string>> {
      const row = await deliveries.findOne({ _id: episodeId });
      return new Set(row?.subscriptionIds ?? []);
    },

    async countForEpisode(episodeId: string): Promise<number> {
      return (await deliveries.findOne({ _id: episodeId }))?.subscriptionIds.length ?? 0;
    },

    async reapExpired(now: Date): Promise<number> {
      const cutoff = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      return (await deliveries.deleteMany({ at: { $lt: cutoff } })).deletedCount;
    },
  };
}
