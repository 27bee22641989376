// rate_limits: a sliding window per key, counted in one document per key (a window row): the window's hits in
// buckets of 1/60 of the window. A hit reads that row (and its hit row, when it has an id) whatever the limit and
// however many hits the window holds, and is admitted by one conditional $inc of it, which MongoDB and the
// project's FerretDB apply atomically per document (docs/store.md): a limit holds across every process, and a burst
// racing on one key admits up to the limit and at least one. A refusal stores nothing.
// Granularity: a bucket leaves the window when its newest hit does, so a hit counts up to 1/60 of the window longer
// than an exact sliding window would count it (stricter, never looser); freeAt is when the oldest bucket leaves, so
// Retry-After is never more than the window.
// Rows expire by TTL where the server has it; the sweep's reaper removes them where it has not (FerretDB v1): a
// window row once its newest hit has left the window, a hit row once its own hit has.
import { randomBytes } from 'node:crypto';
import type { AnyBulkWriteOperation, Collection, Db } from 'mongodb';
import { duplicatePositions, type IndexSpec } from './mongo';

/** One window row per key: `window|<key>`. */
interface WindowRow {
  _id: string;
  /** The newest bucket (milliseconds since the epoch / bucketMs): the one hits are counted in. */
  head: number;
  bucketMs: number;
  /** Hits per bucket still in the window, by `b<bucket>`. */
  counts: Record<string, number>;
  /** Each bucket's newest hit, by `b<bucket>`: the bucket leaves the window when it does. */
  latest: Record<string, Date>;
  total: number;
  /** Changes with every write: moving the head on is a compare-and-swap on it. */
  token: string;
  expiresAt: Date;
}

/** A hit with an id: `hit|<key>|<hitId>`, so a repeat inside the window is not counted again. */
interface HitRow {
  _id: string;
  window: string;
  bucket: number;
  expiresAt: Date;
}

type RateLimitRow = WindowRow | HitRow;

export interface RateLimit {
  limit: number;
  windowSeconds: number;
}

export type Admission =
  | {
      admitted: true;
      /** Gives the hit back (a later step refused the request), once however often it is called. */
      release(): Promise<void>;
      /** The hit's row, for a hit with an id (giveBack takes it back later, from another process). */
      useId?: string;
    }
  | {
      admitted: false;
      retryAfterSeconds: number;
      /** When the oldest bucket in the window leaves it: the same for every hit refused meanwhile. */
      freeAt: Date;
    };

export const rateLimitIndexes: IndexSpec[] = [
  {
    collection: 'rate_limits',
    key: { expiresAt: 1 },
    options: { name: 'expires_ttl', expireAfterSeconds: 0 },
  },
];

/** Buckets per window: the granularity, and the size of a window row, whatever the limit. */
const BUCKETS = 60;
/** Write rounds a hit takes at most: a round is lost only to another writer of its key (or a full window). */
const MAX_ROUNDS = 8;

const windowId = (key: string): string => `window|${key}`;
const hitRowId = (key: string, hitId: string): string => `hit|${key}|${hitId}`;
const countField = (bucket: number): string => `counts.b${bucket}`;
const latestField = (bucket: number): string => `latest.b${bucket}`;
const newToken = (): string => randomBytes(9).toString('base64url');

/** A window as counted at `now`: its buckets still in it, and whether its row already counts it so. */
interface WindowView {
  head: number;
  bucketMs: number;
  /** The buckets still in the window: their hits and newest hit. */
  buckets: Map<number, { n: number; latest: Date }>;
  total: number;
  /** The row has this head and nothing of it left the window: a conditional $inc admits. Else it is replaced. */
  current: boolean;
  token?: string;
}

const windowMs = (rule: RateLimit): number => rule.windowSeconds * 1000;

function windowView(row: WindowRow | undefined, rule: RateLimit, now: Date): WindowView {
  const bucketMs = Math.ceil(windowMs(rule) / BUCKETS);
  const since = now.getTime() - windowMs(rule);
  const buckets = new Map<number, { n: number; latest: Date }>();
  for (const [field, n] of Object.entries(row?.counts ?? {})) {
    const latest = row?.latest?.[field];
    if (!(latest instanceof Date) || latest.getTime() <= since || !(n > 0)) continue;
    // A row counted in buckets of another size (the window was changed): each bucket where its newest hit falls.
    const bucket =
      row?.bucketMs === bucketMs ? Number(field.slice(1)) : Math.floor(latest.getTime() / bucketMs);
    const before = buckets.get(bucket);
    buckets.set(bucket, {
      n: n + (before?.n ?? 0),
      latest: before && before.latest > latest ? before.latest : latest,
    });
  }
  // A clock behind the row's counts in the row's newest bucket.
  const sameSize = row?.bucketMs === bucketMs;
  const head = Math.max(Math.floor(now.getTime() / bucketMs), ...buckets.keys(), sameSize ? row.head : 0);
  const total = [...buckets.values()].reduce((sum, { n }) => sum + n, 0);
  const current = sameSize && row.head === head && row.total === total;
  return { head, bucketMs, buckets, total, current, token: row?.token };
}

function refusal(view: WindowView, rule: RateLimit, now: Date): Admission {
  const oldest = Math.min(...[...view.buckets.values()].map(({ latest }) => latest.getTime()));
  const freeAt = Math.max(Number.isFinite(oldest) ? oldest + windowMs(rule) : now.getTime(), now.getTime());
  return {
    admitted: false,
    retryAfterSeconds: Math.max(1, Math.ceil((freeAt - now.getTime()) / 1000)),
    freeAt: new Date(freeAt),
  };
}

/**
 * The write that counts one hit in the view's head: a conditional $inc while the row has that head, or the row
 * replaced when the head moved on (or there is no row). Either is an upsert, so a write that finds the row changed
 * under it inserts its _id again and fails with E11000 (another writer won; read again).
 */
function countHit(
  id: string,
  view: WindowView,
  rule: RateLimit,
  now: Date,
): AnyBulkWriteOperation<RateLimitRow> {
  const { head, bucketMs } = view;
  const expiresAt = new Date(now.getTime() + windowMs(rule));
  if (view.current) {
    return {
      updateOne: {
        filter: { _id: id, head, bucketMs, total: { $lt: rule.limit } },
        update: {
          $inc: { total: 1, [countField(head)]: 1 },
          $max: { [latestField(head)]: now, expiresAt },
          $set: { token: newToken() },
        },
        upsert: true,
      },
    };
  }
  const buckets = new Map(view.buckets);
  const before = buckets.get(head);
  buckets.set(head, { n: (before?.n ?? 0) + 1, latest: before && before.latest > now ? before.latest : now });
  const field = ([bucket]: [number, unknown]): string => `b${bucket}`;
  const counts = Object.fromEntries([...buckets].map((entry) => [field(entry), entry[1].n]));
  const latest = Object.fromEntries([...buckets].map((entry) => [field(entry), entry[1].latest]));
  const newest = Math.max(...[...buckets.values()].map((bucket) => bucket.latest.getTime()));
  const total = view.total + 1;
  return {
    updateOne: {
      filter: { _id: id, token: view.token ?? { $exists: false } },
      update: {
        $set: {
          head,
          bucketMs,
          counts,
          latest,
          total,
          token: newToken(),
          expiresAt: new Date(newest + windowMs(rule)),
        },
      },
      upsert: true,
    },
  };
}

/**
 * Counts the round's hits in one command: the positions whose write lost (read them again), any other failure
 * thrown. With a hit id, each count is followed by its hit row, in order, so a hit row exists only where its
 * count was written. An ordered command stops at the first write that loses (FerretDB, before the project's patch,
 * also named the wrong one), so a failure sends every key of the round back to be read again: one whose hit row is
 * there was counted.
 */
async function writeCounts(
  rows: Collection<RateLimitRow>,
  writes: { key: string; view: WindowView }[],
  rule: RateLimit,
  now: Date,
  hitId?: string,
): Promise<Set<number>> {
  if (!writes.length) return new Set();
  const ops = writes.flatMap(({ key, view }): AnyBulkWriteOperation<RateLimitRow>[] => {
    const count = countHit(windowId(key), view, rule, now);
    if (hitId === undefined) return [count];
    const hitRow = {
      window: windowId(key),
      bucket: view.head,
      expiresAt: new Date(now.getTime() + windowMs(rule)),
    };
    // A copy of this hit racing this one wrote its row first: both counted (stricter), one row. A row there is
    // otherwise one that expired unreaped: it names this count now, so a give-back uncounts this one.
    return [
      count,
      {
        updateOne: {
          filter: { _id: hitRowId(key, hitId) },
          update: { $set: hitRow },
          upsert: true,
        },
      },
    ];
  });
  try {
    await rows.bulkWrite(ops, { ordered: hitId !== undefined });
    return new Set();
  } catch (err) {
    const lost = duplicatePositions(err);
    return hitId === undefined ? lost : new Set(writes.keys());
  }
}

/** `give` the first time it is called; nothing after: a release called twice gives one hit back. */
function once(give: () => Promise<void>): () => Promise<void> {
  let given: Promise<void> | undefined;
  return () => (given ??= give());
}

export type RateLimitStore = ReturnType<typeof createRateLimitStore>;

export function createRateLimitStore(db: Db) {
  const rows = db.collection<RateLimitRow>('rate_limits');
  const windows = db.collection<WindowRow>('rate_limits');
  const hitRows = db.collection<HitRow>('rate_limits');

  /** Uncounts one hit of `bucket`, unless the bucket has left the window (and the row) since. */
  async function uncount(window: string, bucket: number): Promise<void> {
    await windows.updateOne(
      { _id: window, [countField(bucket)]: { $gt: 0 } },
      { $inc: { total: -1, [countField(bucket)]: -1 }, $set: { token: newToken() } },
    );
  }

  const store = {
    /**
     * Admits a hit on `key` when fewer than `rule.limit` were admitted in the last `rule.windowSeconds`. A hit with
     * an id that was already admitted inside the window is admitted again without counting (a retried request;
     * two copies of one hit racing each other may both count: stricter, never looser).
     */
    async hit(key: string, rule: RateLimit, now: Date, hitId?: string): Promise<Admission> {
      return (await store.hitMany([key], rule, now, hitId)).get(key)!;
    },

    /**
     * hit for several keys at once (the same rule, the same hit): each round reads every pending key's rows in one
     * query and writes their counts in one bulk write, so a fan-out to many people costs a few round trips, and
     * each key one window row and one hit row, whatever the limit or the hits already counted.
     */
    async hitMany(
      keys: string[],
      rule: RateLimit,
      now: Date,
      hitId?: string,
    ): Promise<Map<string, Admission>> {
      const answers = new Map<string, Admission>();
      const counted: { key: string; bucket: number }[] = [];
      // With an id: the keys a write of this call tried to count (a failed write may have counted some).
      const tried = new Set<string>();
      let pending = [...new Set(keys)];
      for (let round = 1; pending.length; round++) {
        const ids = pending.flatMap((key) =>
          hitId === undefined ? [windowId(key)] : [windowId(key), hitRowId(key, hitId)],
        );
        const found = new Map(
          (await rows.find({ _id: { $in: ids } }).toArray()).map((row) => [row._id, row]),
        );
        const writes: { key: string; view: WindowView }[] = [];
        for (const key of pending) {
          const repeated =
            hitId !== undefined ? (found.get(hitRowId(key, hitId)) as HitRow | undefined) : undefined;
          const view = windowView(found.get(windowId(key)) as WindowRow | undefined, rule, now);
          if (repeated && repeated.expiresAt > now) {
            // Its row was written by a failed write of this call, after its count (or by a copy racing it).
            if (tried.has(key)) counted.push({ key, bucket: repeated.bucket });
            else answers.set(key, { admitted: true, release: async () => undefined, useId: repeated._id });
          } else if (view.total >= rule.limit || round > MAX_ROUNDS)
            answers.set(key, refusal(view, rule, now));
          else writes.push({ key, view });
        }
        for (const { key } of writes) tried.add(key);
        const lost = await writeCounts(rows, writes, rule, now, hitId);
        writes.forEach(({ key, view }, i) => {
          if (!lost.has(i)) counted.push({ key, bucket: view.head });
        });
        pending = writes.filter((_, i) => lost.has(i)).map(({ key }) => key);
      }
      for (const { key, bucket } of counted) {
        answers.set(
          key,
          hitId === undefined
            ? { admitted: true, release: once(() => uncount(windowId(key), bucket)) }
            : {
                admitted: true,
                release: () => store.giveBack(hitRowId(key, hitId)),
                useId: hitRowId(key, hitId),
              },
        );
      }
      return answers;
    },

    /**
     * Gives back the hit a hit with an id was admitted with (its useId), when what it counted did not happen after
     * all: its hit row goes, and the hit is uncounted once (a second give-back finds no row).
     */
    async giveBack(useId: string): Promise<void> {
      const row = await hitRows.findOneAndDelete({ _id: useId });
      if (row) await uncount(row.window, row.bucket);
    },

    /** TTL does this where the server has it; the sweep's reaper where it has not. */
    async reapExpired(now: Date): Promise<number> {
      return (await rows.deleteMany({ expiresAt: { $lte: now } })).deletedCount;
    },
  };
  return store;
}
