// push_deliveries: which subscriptions the push service accepted an episode's push for. A retried or resumed
// fan-out reads it to skip endpoints already reached; GET /runs/:id/episodes counts it and the operator tools
// list it.
//
// One row per batch the fan-out writes (its group commit: the sends accepted while the previous write was in
// flight), `_id` episodeId|#n with n = 0, 1, 2, ... A row per send cost more than encrypting and sending it
// (bench:push); a growing row per episode rewrote more with every batch. Rows are insert-only, the one write
// that is atomic on FerretDB v1 too: a writer takes the next free n (E11000: someone holds it, take the one
// after), so two attempts of one episode writing at once both keep their records, and the numbers stay a prefix
// 0..k that the fan-out reads back by `_id` (`$in`, pushed down to SQLite). A batch written twice (a write that
// failed after it landed, then retried) lists its sends twice: every reader counts a subscription once.
//
// Rows written before batches, one per (episode, subscription) with `_id` episodeId|subscriptionId, are still
// read (by that `_id`, and by episode id for the views) until the reaper removes them.
import type { Collection, Db } from 'mongodb';
import { followUpIdRange, interactionClaimKeys } from '../../domain/interaction';
import { CLAIM_RETENTION_SECONDS } from '../../domain/outcome';
import { isDuplicateKey, type IndexSpec } from '../mongo';

export interface PushDelivery {
  subscriptionId: string;
  userId: string;
  /** When the push service accepted it. */
  at: Date;
}

export interface PushDeliveryBatchRow {
  _id: string; // episodeId|#n
  episodeId: string;
  /** Its newest delivery: the reaper's clock. */
  at: Date;
  deliveries: PushDelivery[];
}

/** The shape before batches: one row per send, `_id` episodeId|subscriptionId. Read, no longer written. */
interface PushDeliveryLegacyRow extends PushDelivery {
  _id: string;
  episodeId: string;
}

type PushDeliveryRow = PushDeliveryBatchRow | PushDeliveryLegacyRow;

export const pushDeliveryIndexes: IndexSpec[] = [
  { collection: 'push_deliveries', key: { episodeId: 1 }, options: { name: 'episode' } },
  {
    collection: 'push_deliveries',
    key: { at: 1 },
    options: { name: 'at_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
  // A device's last success on rows of the old shape (the device list, for subscriptions that have had no push
  // since: newer ones carry lastSuccessAt on their push_subscriptions row).
  {
    collection: 'push_deliveries',
    key: { subscriptionId: 1, at: -1 },
    options: { name: 'subscription_at' },
  },
];

const legacyId = (episodeId: string, subscriptionId: string): string => `${episodeId}|${subscriptionId}`;
const batchId = (episodeId: string, n: number): string => `${episodeId}|#${n}`;
/** Batch numbers asked for in the first read; each further read asks for twice as many. */
const FIRST_PAGE = 64;

function deliveriesOf(row: PushDeliveryRow): PushDelivery[] {
  if ('deliveries' in row) return row.deliveries;
  return [{ subscriptionId: row.subscriptionId, userId: row.userId, at: row.at }];
}

/** Each subscription once, at its first delivery, oldest first. */
function firstDeliveries(rows: PushDeliveryRow[]): PushDelivery[] {
  const first = new Map<string, PushDelivery>();
  for (const delivery of rows.flatMap(deliveriesOf)) {
    const seen = first.get(delivery.subscriptionId);
    if (!seen || delivery.at < seen.at) first.set(delivery.subscriptionId, delivery);
  }
  return [...first.values()].sort((a, b) => a.at.getTime() - b.at.getTime());
}

/**
 * Who this episode reached among `subscriptionIds` (each with its newest delivery), everyone it reached on any
 * device (one removed since included), and the first batch number nobody holds yet.
 */
async function reachedBy(
  rows: Collection<PushDeliveryRow>,
  episodeId: string,
  subscriptionIds: string[],
): Promise<{ subscriptions: Map<string, Date>; people: Set<string>; nextBatch: number }> {
  const found = new Map<string, Date>();
  const people = new Set<string>();
  let nextBatch = 0;
  // Rows of the old shape go in the first read: one round trip for an episode of any age.
  let ids = subscriptionIds.map((subscriptionId) => legacyId(episodeId, subscriptionId));
  for (let from = 0, size = FIRST_PAGE; ; from += size, size *= 2) {
    for (let n = from; n < from + size; n++) ids.push(batchId(episodeId, n));
    const page = await rows.find({ _id: { $in: ids } }).toArray();
    for (const row of page) {
      for (const { subscriptionId, userId, at } of deliveriesOf(row)) {
        people.add(userId);
        const seen = found.get(subscriptionId);
        if (!seen || at > seen) found.set(subscriptionId, at);
      }
      const n = 'deliveries' in row ? Number(row._id.slice(row._id.lastIndexOf('|#') + 2)) : -1;
      nextBatch = Math.max(nextBatch, n + 1);
    }
    // The batch numbers are a prefix: a page whose last number is free is the last page.
    if (nextBatch < from + size) break;
    ids = [];
  }
  // A subscription pruned and subscribed again since is not among the caller's.
  const wanted = new Set(subscriptionIds);
  return { subscriptions: new Map([...found].filter(([id]) => wanted.has(id))), people, nextBatch };
}

function batchWriterOf(
  rows: Collection<PushDeliveryRow>,
  episodeId: string,
  nextBatch: number,
): (deliveries: PushDelivery[]) => Promise<void> {
  let n = nextBatch;
  return async (deliveries) => {
    if (!deliveries.length) return;
    const at = new Date(Math.max(...deliveries.map((d) => d.at.getTime())));
    for (;;) {
      try {
        await rows.insertOne({ _id: batchId(episodeId, n), episodeId, at, deliveries });
        n++;
        return;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        n++;
      }
    }
  };
}

/**
 * An input request's follow-up pushes, each (follow-up, device) once, oldest first, at most `limit` (operator
 * tools): its rungs' and snoozes' (ids `<episodeId>|<what>`, one range on the episode index) and the close of its
 * interaction's answer. `followUp` is the `<what>`, or `answered` for the close.
 */
async function followUpsOf(
  rows: Collection<PushDeliveryRow>,
  episodeId: string,
  interactionId: string,
  limit: number,
): Promise<(PushDelivery & { episodeId: string; followUp: string })[]> {
  const closeId = interactionClaimKeys.answered(interactionId);
  const [sent, closed] = await Promise.all([
    rows.find({ episodeId: followUpIdRange(episodeId) }).toArray(),
    rows.find({ episodeId: closeId }).toArray(),
  ]);
  const byFollowUp = new Map<string, PushDeliveryRow[]>();
  for (const row of [...sent, ...closed]) {
    const group = byFollowUp.get(row.episodeId);
    if (group) group.push(row);
    else byFollowUp.set(row.episodeId, [row]);
  }
  return [...byFollowUp]
    .flatMap(([id, group]) => {
      const followUp = id === closeId ? 'answered' : id.slice(episodeId.length + 1);
      return firstDeliveries(group).map((delivery) => ({ episodeId: id, followUp, ...delivery }));
    })
    .sort((a, b) => a.at.getTime() - b.at.getTime())
    .slice(0, limit);
}

export type PushDeliveryStore = ReturnType<typeof createPushDeliveryStore>;

export function createPushDeliveryStore(db: Db) {
  const rows = db.collection<PushDeliveryRow>('push_deliveries');

  return {
    reached: (episodeId: string, subscriptionIds: string[]) => reachedBy(rows, episodeId, subscriptionIds),

    /** Which of these subscriptions this episode already reached. */
    async deliveredSubscriptions(episodeId: string, subscriptionIds: string[]): Promise<Set<string>> {
      return new Set((await reachedBy(rows, episodeId, subscriptionIds)).subscriptions.keys());
    },

    /**
     * The writer of one fan-out's batches, one write at a time, from `nextBatch` (what `reached` answered): each
     * batch is one insert, at the first number nobody holds.
     */
    batchWriter: (episodeId: string, nextBatch: number) => batchWriterOf(rows, episodeId, nextBatch),

    /**
     * Each subscription's newest accepted push within the retention, for the caller's device list: its row's
     * lastSuccessAt, or for a row with none (no push since batches), its newest row of the old shape: a handful
     * of ids, bounded by PUSH_MAX_SUBSCRIPTIONS_PER_USER, one read each on its index, in parallel.
     */
    async lastSuccess(
      subscriptions: { _id: string; lastSuccessAt?: Date }[],
      now: Date,
    ): Promise<Map<string, Date>> {
      const cutoff = now.getTime() - CLAIM_RETENTION_SECONDS * 1000;
      const last = await Promise.all(
        subscriptions.map(async (sub) => {
          if (sub.lastSuccessAt) return [sub._id, sub.lastSuccessAt] as const;
          const row = await rows.findOne(
            { subscriptionId: sub._id },
            { sort: { at: -1 }, projection: { at: 1 } },
          );
          return [sub._id, row?.at] as const;
        }),
      );
      return new Map(last.flatMap(([id, at]) => (at && at.getTime() >= cutoff ? [[id, at] as const] : [])));
    },

    /**
     * The devices an episode and its follow-ups (ids `<episodeId>|…`) reached, each once: one range on the episode
     * index.
     */
    async reachedWithFollowUps(episodeId: string): Promise<PushDelivery[]> {
      const family = { $gte: episodeId, $lte: `${episodeId}|\uffff` };
      return firstDeliveries(await rows.find({ episodeId: family }).toArray());
    },

    /** Subscriptions the episode reached, each once. */
    async countForEpisode(episodeId: string): Promise<number> {
      return firstDeliveries(await rows.find({ episodeId }).toArray()).length;
    },

    /** One episode's deliveries, each subscription once, oldest first, at most `limit` (operator tools). */
    async listForEpisode(
      episodeId: string,
      limit: number,
    ): Promise<(PushDelivery & { episodeId: string })[]> {
      return firstDeliveries(await rows.find({ episodeId }).toArray())
        .slice(0, limit)
        .map((delivery) => ({ episodeId, ...delivery }));
    },

    /** An input request's follow-up pushes, its close's included (followUpsOf). */
    listFollowUps: (episodeId: string, interactionId: string, limit: number) =>
      followUpsOf(rows, episodeId, interactionId, limit),

    async reapExpired(now: Date): Promise<number> {
      const cutoff = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      return (await rows.deleteMany({ at: { $lt: cutoff } })).deletedCount;
    },
  };
}
