// push_subscriptions: one row per browser endpoint, upserted on the endpoint with the caller's team as
// provenance, listed by user with no tenant filter, pruned when the push service says the endpoint is gone.
// A subscription's last success is kept on its row (lastSuccessAt), written once per batch of the fan-out.
// push_subscription_slots, kept here beside it, holds the per-user cap (see takeUserSlot).
import { createHash } from 'node:crypto';
import type { Collection, Db } from 'mongodb';
import { isDuplicateKey, type IndexSpec, type RetiredIndex } from '../mongo';
import { pageNewestFirst, type Page, type PageCursor } from '../paging';
import { takeSlot, type SlotRow } from '../slots';

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
   * from an unknown host) or was refused to our identity by a known one, and when the first of them was; absent after a success. `since` is absent on rows
   * counted before it was kept: the next episode sets it.
   */
  unresolved?: { count: number; episodeId: string; since?: Date };
  /** The user slot it holds (push_subscription_slots); absent on rows made before the cap had slots. */
  slotId?: string;
  /** The newest push the service accepted (absent: none since this was recorded here). */
  lastSuccessAt?: Date;
}

/** One use of one of a user's PUSH_MAX_SUBSCRIPTIONS_PER_USER slots; `key` is the user id. */
export interface SubscriptionSlotRow extends SlotRow {
  subscriptionId: string;
  /** Given back: the subscription was removed, moved to another user, or never written. */
  released?: true;
}

export const pushSubscriptionIndexes: IndexSpec[] = [
  // By user: the fan-out's $in and the device list newest first (_id breaks ties).
  {
    collection: 'push_subscriptions',
    key: { userId: 1, createdAt: -1, _id: -1 },
    options: { name: 'user_created' },
  },
  { collection: 'push_subscription_slots', key: { key: 1 }, options: { name: 'user' } },
  // usersOfTeam: an escalation rung to the whole team.
  { collection: 'push_subscriptions', key: { teamId: 1, userId: 1 }, options: { name: 'team_users' } },
];

/** Replaced by user_created, whose leading field serves what it did. */
export const retiredPushSubscriptionIndexes: RetiredIndex[] = [
  { collection: 'push_subscriptions', name: 'user' },
];

/**
 * A slot taken by a registration that never wrote its row (a crash in between), or whose row went away without
 * giving it back, is reclaimed when its user is full and it is older than this: far longer than a registration
 * takes between taking the slot and writing its row.
 */
const SLOT_RECLAIM_MS = 10 * 60_000;

/**
 * Deletes a subscription row and gives its user slot back. Every removal goes through here (the routes' delete,
 * prune); a removal that skips it only costs its user the slot until a registration finds it abandoned.
 */
export async function removeSubscription(db: Db, filter: { _id: string; userId?: string }): Promise<boolean> {
  const subs = db.collection<PushSubscriptionRow>('push_subscriptions');
  const row = await subs.findOne(filter, { projection: { userId: 1, slotId: 1 } });
  if (!row) return false;
  // The row as read: moved to another user since (a new slot), it is theirs now and stays.
  const asRead = { _id: row._id, userId: row.userId, slotId: row.slotId ?? { $exists: false } };
  const removed = (await subs.deleteOne(asRead)).deletedCount === 1;
  if (removed && row.slotId) await releaseSlot(db, row.slotId);
  return removed;
}

/** By its exact id: the slot's next use gets a new id, so this frees only the use it names. */
async function releaseSlot(db: Db, slotId: string): Promise<void> {
  await db
    .collection<SubscriptionSlotRow>('push_subscription_slots')
    .updateOne({ _id: slotId }, { $set: { released: true } });
}

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

/**
 * One of the user's `capacity` slots for subscription `subscriptionId`, or undefined when all are held. When
 * they are, a slot held past SLOT_RECLAIM_MS by no row that names it is given back first.
 */
async function takeUserSlot(
  db: Db,
  userId: string,
  subscriptionId: string,
  capacity: number,
  now: Date,
): Promise<SubscriptionSlotRow | undefined> {
  const slots = db.collection<SubscriptionSlotRow>('push_subscription_slots');
  const take = async () => {
    const rows = await slots.find({ key: userId }).toArray();
    const taken = await takeSlot(slots, {
      key: userId,
      capacity,
      rows,
      held: (row) => !row.released,
      at: now,
      fields: { subscriptionId },
    });
    // The slot's earlier uses were given back: only the newest is kept (a slot's rows never grow).
    for (const row of rows) {
      if (taken && row.slot === taken.slot && row.n < taken.n) await slots.deleteOne({ _id: row._id });
    }
    return taken;
  };
  const taken = await take();
  if (taken || !(await reclaimAbandoned(db, userId, now))) return taken;
  return take();
}

/** Gives back the user's slots that no row names, taken long enough ago. True when one was. */
async function reclaimAbandoned(db: Db, userId: string, now: Date): Promise<boolean> {
  const slots = db.collection<SubscriptionSlotRow>('push_subscription_slots');
  const subs = db.collection<PushSubscriptionRow>('push_subscriptions');
  const old = (await slots.find({ key: userId }).toArray()).filter(
    (row) => !row.released && row.at.getTime() < now.getTime() - SLOT_RECLAIM_MS,
  );
  if (!old.length) return false;
  const named = new Set(
    (await subs.find({ userId }, { projection: { slotId: 1 } }).toArray()).map((row) => row.slotId),
  );
  const abandoned = old.filter((row) => !named.has(row._id));
  for (const row of abandoned) await releaseSlot(db, row._id);
  return abandoned.length > 0;
}

/**
 * A subscription's streak of episodes whose send found no push service there (what pruning counts), kept on its
 * row: counted once per episode, restarted, cleared by a success.
 */
function unresolvedStreak(subs: Collection<PushSubscriptionRow>) {
  return {
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

    /**
     * The streak starts again at this episode: what it counted may have been the push service refusing us as a
     * whole, which says nothing about the subscription.
     */
    async restartUnresolved(id: string, episodeId: string, now: Date): Promise<void> {
      await subs.updateOne({ _id: id }, { $set: { unresolved: { count: 1, episodeId, since: now } } });
    },

    /**
     * A send went through: the streak (count and since) starts again, and the row's last success is `at`, in one
     * write.
     */
    async clearUnresolved(id: string, at: Date): Promise<void> {
      await subs.updateOne({ _id: id }, { $unset: { unresolved: '' }, $max: { lastSuccessAt: at } });
    },
  };
}

export type RegisterResult = 'created' | 'updated' | 'held_by_another_user' | 'limit_reached';

/** Reads a registration makes again when the row it read was gone or moved at its write (a prune, a delete). */
const REGISTER_TRIES = 3;

/**
 * The route's upsert, with the abuse guards: a row of another user is taken over only with the same keys.auth
 * (the browser that holds the subscription), and a user holds at most `maxPerUser` rows.
 *
 * The cap holds under concurrency on FerretDB v1 and MongoDB alike: a row new to the user first takes one of
 * the user's slots, and a slot is taken by an insert on its unique _id (store/slots.ts), the one write that is
 * exclusive on both servers. Counting the user's rows and then writing let racing registrations all pass the
 * count. A refusal stores nothing; a registration that loses after taking a slot gives it back (one whose write
 * failed keeps it: the row may be there, and a slot no row names is reclaimed). A row that went
 * or moved between the read and the write (pruned, deleted in another tab) is read again: nobody may hold it.
 */
async function register(...args: RegisterArgs): Promise<RegisterResult> {
  for (let tried = 1; ; tried++) {
    const result = await registerOnce(...args);
    if (result !== 'raced') return result;
    if (tried >= REGISTER_TRIES) return 'held_by_another_user';
  }
}

type RegisterArgs = [
  db: Db,
  owner: { userId: string; teamId: string },
  subscription: { endpoint: string; keys: { p256dh: string; auth: string } },
  now: Date,
  maxPerUser: number,
  /** What the device list shows for it (from the User-Agent when it subscribed). */
  label?: string,
];

/** register's one try: 'raced' when the row it read was gone or moved at its conditional write. */
async function registerOnce(
  ...[db, owner, subscription, now, maxPerUser, label]: RegisterArgs
): Promise<RegisterResult | 'raced'> {
  const subs = db.collection<PushSubscriptionRow>('push_subscriptions');
  const _id = subscriptionId(subscription.endpoint);
  const update = rowUpdate(owner, subscription, now, label);
  /** The row, if it is this user's; gone or moved meanwhile: raced. */
  const updateOwn = async () =>
    (await subs.updateOne({ _id, userId: owner.userId }, update)).matchedCount === 1
      ? ('updated' as const)
      : ('raced' as const);
  const existing = await subs.findOne({ _id }, { projection: { userId: 1, 'keys.auth': 1, slotId: 1 } });
  if (existing?.userId === owner.userId) return updateOwn(); // already the user's: it holds its slot
  if (existing && existing.keys.auth !== subscription.keys.auth) return 'held_by_another_user';
  const held = await subs.find({ userId: owner.userId }, { projection: { slotId: 1 } }).toArray();
  if (held.length >= maxPerUser) return 'limit_reached';
  // Rows made before the cap had slots hold none: they shrink what the slots may hand out.
  const unslotted = held.filter((row) => !row.slotId).length;
  const slot = await takeUserSlot(db, owner.userId, _id, maxPerUser - unslotted, now);
  if (!slot) return 'limit_reached';
  try {
    if (existing) {
      // The same browser under another user: the row moves here with its new slot, the old slot is freed.
      const moved = await subs.updateOne(
        { _id, userId: existing.userId, 'keys.auth': subscription.keys.auth },
        { ...update, $set: { ...update.$set, slotId: slot._id } },
      );
      if (moved.matchedCount !== 1) {
        await releaseSlot(db, slot._id);
        return 'raced';
      }
      if (existing.slotId) await releaseSlot(db, existing.slotId);
      return 'updated';
    }
    await subs.insertOne({ _id, ...update.$set, ...update.$setOnInsert, slotId: slot._id });
    return 'created';
  } catch (err) {
    // Any other failure may have written the row (its answer lost): its slot stays, reclaimed if no row names it.
    if (!isDuplicateKey(err)) throw err;
    await releaseSlot(db, slot._id);
    // The same endpoint registered concurrently: this user's now (an update), or another user's.
    return updateOwn();
  }
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
     * The route's upsert, with the abuse guards: a row of another user is taken over only with the same keys.auth,
     * and a user holds at most `maxPerUser` rows (see register).
     */
    register: (
      owner: { userId: string; teamId: string },
      subscription: { endpoint: string; keys: { p256dh: string; auth: string } },
      now: Date,
      maxPerUser: number,
      /** What the device list shows for it (from the User-Agent when it subscribed). */
      label?: string,
    ): Promise<RegisterResult> => register(db, owner, subscription, now, maxPerUser, label),

    /** Deletes only the caller's own row: one user cannot remove another's endpoint. */
    async deleteByEndpoint(userId: string, endpoint: string): Promise<boolean> {
      return removeSubscription(db, { _id: subscriptionId(endpoint), userId });
    },

    /** Removes one of the caller's own subscriptions by its id; another user's id removes nothing. */
    async deleteById(userId: string, id: string): Promise<boolean> {
      return removeSubscription(db, { _id: id, userId });
    },

    /** Removes the person's devices registered in the team (they left it), slots given back; answers how many. */
    async removeForTeam(teamId: string, userId: string): Promise<number> {
      const rows = await subs.find({ teamId, userId }, { projection: { _id: 1 } }).toArray();
      const removed = await Promise.all(rows.map((row) => removeSubscription(db, { _id: row._id, userId })));
      return removed.filter(Boolean).length;
    },

    /** Every subscription of these users, in one query. */
    async listForUsers(userIds: string[]): Promise<PushSubscriptionRow[]> {
      if (!userIds.length) return [];
      return subs.find({ userId: { $in: userIds } }).toArray();
    },

    /**
     * The people with a device registered under this team, at most `limit`, by id (an escalation to the team): read
     * in pages on the index, each past the last person of the one before, so people with many devices never crowd
     * out the rest. Most teams take one page.
     */
    async usersOfTeam(teamId: string, limit: number): Promise<string[]> {
      const page = limit * 4;
      const people = new Set<string>();
      for (let after: string | undefined; ;) {
        const rows = await subs
          .find(
            { teamId, ...(after === undefined ? {} : { userId: { $gt: after } }) },
            { projection: { _id: 0, userId: 1 } },
          )
          .sort({ userId: 1 })
          .limit(page)
          .toArray();
        for (const row of rows) people.add(row.userId);
        if (rows.length < page || people.size >= limit) return [...people].slice(0, limit);
        after = rows[rows.length - 1].userId;
      }
    },

    /** Which of these people have a device registered under this team (a rung's named people). */
    async membersAmong(teamId: string, userIds: string[]): Promise<Set<string>> {
      if (!userIds.length) return new Set();
      const rows = await subs
        .find({ teamId, userId: { $in: userIds } }, { projection: { userId: 1 } })
        .toArray();
      return new Set(rows.map((row) => row.userId));
    },

    /** One user's devices, newest first: `limit` of them from `before` on (never the keys). */
    async listForUser(
      userId: string,
      limit: number,
      before?: PageCursor,
    ): Promise<Page<Omit<PushSubscriptionRow, 'keys'>>> {
      return pageNewestFirst(subs, { userId }, 'createdAt', limit, before, { keys: 0 });
    },

    /** Endpoints by subscription id, never the keys (operator tools: which push service a delivery went to). */
    async endpointsByIds(ids: string[]): Promise<Map<string, string>> {
      if (!ids.length) return new Map();
      const rows = await subs.find({ _id: { $in: ids } }, { projection: { endpoint: 1 } }).toArray();
      return new Map(rows.map((row) => [row._id, row.endpoint]));
    },

    ...unresolvedStreak(subs),

    /** The push service said the endpoint is gone: the row goes, and its user's slot with it. */
    async prune(id: string): Promise<void> {
      await removeSubscription(db, { _id: id });
    },

    /** A fan-out's batch went through: one write for all of it, by _id (pushed down), never moving back. */
    async recordSuccess(ids: string[], at: Date): Promise<void> {
      if (!ids.length) return;
      await subs.updateMany({ _id: { $in: ids } }, { $max: { lastSuccessAt: at } });
    },
  };
}
