// push_subscriptions: one row per browser endpoint, upserted on the endpoint with the caller's team as
// provenance, listed by user with no tenant filter, pruned when the push service says the endpoint is gone.
// A subscription's last success is its newest push_deliveries row (insert-only, see activities/push.ts).
import { createHash } from 'node:crypto';
import type { Db } from 'mongodb';
import { isDuplicateKey, type IndexSpec } from './mongo';

export interface PushSubscriptionRow {
  /** sha256 of the endpoint: upserting on _id keeps "one row per endpoint" without a compare-and-swap. */
  _id: string;
  endpoint: string;
  keys: { p256dh: string; auth: string };
  userId: string;
  teamId: string;
  createdAt: Date;
  updatedAt: Date;
  /** From the User-Agent of the latest subscribe (domain/deviceLabel.ts, bounded); absent on older rows. */
  label?: string;
  /**
   * Consecutive episodes whose send found no push service there (no such host, a forbidden address, a 401/403
   * from an unknown host), and when the first of them was; absent after a success. `since` is absent on rows
   * counted before it was kept: the next episode sets it.
   */
  unresolved?: { count: number; episodeId: string; since?: Date };
}

export const pushSubscriptionIndexes: IndexSpec[] = [
  { collection: 'push_subscriptions', key: { userId: 1 }, options: { name: 'user' } },
];

export const subscriptionId = (endpoint: string): string =>
  createHash('sha256').update(endpoint).digest('hex');

/** The upsert of a subscription row: who holds it now, its keys, and (kept from the first time) when it came. */
function rowUpdate(
  owner: { userId: string; teamId: string },
  subscription: { endpoint: string; keys: { p256dh: string; auth: string } },
  now: Date,
  label?: string,
) {
  return {
    $set: {
      endpoint: subscription.endpoint,
      keys: subscription.keys,
      userId: owner.userId,
      teamId: owner.teamId,
      updatedAt: now,
      ...(label ? { label } : {}),
    },
    $setOnInsert: { createdAt: now },
  };
}

export type PushSubscriptionStore = ReturnType<typeof createPushSubscriptionStore>;

export function createPushSubscriptionStore(db: Db) {
  const subs = db.collection<PushSubscriptionRow>('push_subscriptions');
  return {
    /** True when the endpoint is new, false when an existing row was updated. No guards: seeding and tests. */
    async upsert(
      owner: { userId: string; teamId: string },
      subscription: { endpoint: string; keys: { p256dh: string; auth: string } },
      now: Date,
      label?: string,
    ): Promise<boolean> {
      const result = await subs.updateOne(
        { _id: subscriptionId(subscription.endpoint) },
        rowUpdate(owner, subscription, now, label),
        { upsert: true },
      );
      return result.upsertedCount === 1;
    },

    /**
     * The route's upsert, with the abuse guards: a row of another user is taken over only with the same keys.auth
     * (the browser that holds the subscription), and a user holds at most `maxPerUser` rows (checked before the
     * write, so a refusal stores nothing; registrations racing each other may pass it together).
     */
    async register(
      owner: { userId: string; teamId: string },
      subscription: { endpoint: string; keys: { p256dh: string; auth: string } },
      now: Date,
      maxPerUser: number,
      /** What the device list shows for it (from the User-Agent when it subscribed). */
      label?: string,
    ): Promise<'created' | 'updated' | 'held_by_another_user' | 'limit_reached'> {
      const _id = subscriptionId(subscription.endpoint);
      const existing = await subs.findOne({ _id }, { projection: { userId: 1, 'keys.auth': 1 } });
      const sameUser = existing?.userId === owner.userId;
      if (existing && !sameUser && existing.keys.auth !== subscription.keys.auth)
        return 'held_by_another_user';
      if (!sameUser && (await subs.countDocuments({ userId: owner.userId })) >= maxPerUser)
        return 'limit_reached';
      try {
        const result = await subs.updateOne(
          // The guard again in the write: a row that changed hands meanwhile is not matched, and the upsert's
          // insert then hits its _id.
          { _id, $or: [{ userId: owner.userId }, { 'keys.auth': subscription.keys.auth }] },
          rowUpdate(owner, subscription, now, label),
          { upsert: true },
        );
        return result.upsertedCount === 1 ? 'created' : 'updated';
      } catch (err) {
        if (isDuplicateKey(err)) return 'held_by_another_user';
        throw err;
      }
    },

    /** Deletes only the caller's own row: one user cannot remove another's endpoint. */
    async deleteByEndpoint(userId: string, endpoint: string): Promise<boolean> {
      const result = await subs.deleteOne({ _id: subscriptionId(endpoint), userId });
      return result.deletedCount === 1;
    },

    /** Removes one of the caller's own subscriptions by its id; another user's id removes nothing. */
    async deleteById(userId: string, id: string): Promise<boolean> {
      const result = await subs.deleteOne({ _id: id, userId });
      return result.deletedCount === 1;
    },

    /** Every subscription of these users, in one query. */
    async listForUsers(userIds: string[]): Promise<PushSubscriptionRow[]> {
      if (!userIds.length) return [];
      return subs.find({ userId: { $in: userIds } }).toArray();
    },

    /** Endpoints by subscription id, never the keys (operator tools: which push service a delivery went to). */
    async endpointsByIds(ids: string[]): Promise<Map<string, string>> {
      if (!ids.length) return new Map();
      const rows = await subs.find({ _id: { $in: ids } }, { projection: { endpoint: 1 } }).toArray();
      return new Map(rows.map((row) => [row._id, row.endpoint]));
    },

    /**
     * Counts one more episode whose send found no push service there, once per episode however often the fan-out
     * is retried, and answers the streak: how many episodes, and since when (the first one's `now`).
     */
    async markUnresolved(id: string, episodeId: string, now: Date): Promise<{ count: number; since: Date }> {
      await subs.updateOne(
        { _id: id, 'unresolved.episodeId': { $ne: episodeId } },
        {
          $inc: { 'unresolved.count': 1 },
          $set: { 'unresolved.episodeId': episodeId },
          // Set by the streak's first episode only (an absent field is set by $min).
          $min: { 'unresolved.since': now },
        },
      );
      const row = await subs.findOne({ _id: id }, { projection: { unresolved: 1 } });
      return { count: row?.unresolved?.count ?? 0, since: row?.unresolved?.since ?? now };
    },

    /** A send went through: the streak (count and since) starts again. */
    async clearUnresolved(id: string): Promise<void> {
      await subs.updateOne({ _id: id }, { $unset: { unresolved: '' } });
    },

    async prune(id: string): Promise<void> {
      await subs.deleteOne({ _id: id });
    },
  };
}
