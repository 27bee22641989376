// rate_limits: a sliding window per key held in `limit` slots (store/slots.ts), so a limit holds across every API
// process and a burst racing on one key admits up to the limit and at least one. A hit is one use of a slot whose
// last use has left the window; a refusal stores nothing.
// Rows expire by TTL where the server has it; the sweep's reaper removes them where it has not (FerretDB v1). Only
// the reaper and a hit giving back its own row (at once, or later by its useId) delete, so no one deletes a row
// someone else just wrote.
import type { Db } from 'mongodb';
import type { IndexSpec } from './mongo';
import { takeSlots, type SlotRow } from './slots';

export interface RateLimitRow extends SlotRow {
  /** The hit's id, when it has one: a repeat of it inside the window is not counted again. */
  hitId?: string;
  expiresAt: Date;
}

export interface RateLimit {
  limit: number;
  windowSeconds: number;
}

export type Admission =
  | {
      admitted: true;
      /** Gives the slot back (a later step refused the request). */ release(): Promise<void>;
      /** The slot's use this hit holds (giveBack takes it back later, from another process). */
      useId?: string;
    }
  | {
      admitted: false;
      retryAfterSeconds: number;
      /** When the oldest hit in the window leaves it: the same for every hit refused meanwhile. */
      freeAt: Date;
    };

export const rateLimitIndexes: IndexSpec[] = [
  { collection: 'rate_limits', key: { key: 1, at: 1 }, options: { name: 'key_at' } },
  {
    collection: 'rate_limits',
    key: { expiresAt: 1 },
    options: { name: 'expires_ttl', expireAfterSeconds: 0 },
  },
];

export type RateLimitStore = ReturnType<typeof createRateLimitStore>;

function groupByKey(rows: RateLimitRow[]): Map<string, RateLimitRow[]> {
  const byKey = new Map<string, RateLimitRow[]>();
  for (const row of rows) byKey.set(row.key, [...(byKey.get(row.key) ?? []), row]);
  return byKey;
}

export function createRateLimitStore(db: Db) {
  const rows = db.collection<RateLimitRow>('rate_limits');

  function refusal(inWindow: RateLimitRow[], rule: RateLimit, now: Date): Admission {
    const oldest = Math.min(...inWindow.map((row) => row.at.getTime()));
    const freeAt = Number.isFinite(oldest) ? oldest + rule.windowSeconds * 1000 : now.getTime();
    return {
      admitted: false,
      retryAfterSeconds: Math.max(1, Math.ceil((freeAt - now.getTime()) / 1000)),
      freeAt: new Date(Math.max(freeAt, now.getTime())),
    };
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
     * hit for several keys at once (the same rule, the same hit): one read of every key's rows, their slots taken
     * together (store/slots.ts takeSlots), so a fan-out to many people costs a few round trips, not a few each.
     */
    async hitMany(
      keys: string[],
      rule: RateLimit,
      now: Date,
      hitId?: string,
    ): Promise<Map<string, Admission>> {
      const since = now.getTime() - rule.windowSeconds * 1000;
      const held = (row: RateLimitRow) => row.at.getTime() > since;
      const unique = [...new Set(keys)];
      const answers = new Map<string, Admission>();
      if (!unique.length) return answers;
      // The keys' rows, in the window or not yet reaped: the latter carry each slot's last use.
      const byKey = groupByKey(await rows.find({ key: { $in: unique } }).toArray());
      const wanted: string[] = [];
      for (const key of unique) {
        const inWindow = (byKey.get(key) ?? []).filter(held);
        const repeated = hitId !== undefined ? inWindow.find((row) => row.hitId === hitId) : undefined;
        if (repeated) {
          answers.set(key, { admitted: true, release: async () => undefined, useId: repeated._id });
        } else if (inWindow.length >= rule.limit) answers.set(key, refusal(inWindow, rule, now));
        else wanted.push(key);
      }
      const uses = await takeSlots(
        rows,
        wanted.map((key) => ({
          key,
          capacity: rule.limit,
          rows: byKey.get(key) ?? [],
          held,
          at: now,
          fields: {
            expiresAt: new Date(now.getTime() + rule.windowSeconds * 1000),
            ...(hitId !== undefined ? { hitId } : {}),
          },
        })),
      );
      const refused = wanted.filter((_, i) => !uses[i]);
      const again = refused.length
        ? groupByKey(await rows.find({ key: { $in: refused } }).toArray())
        : new Map<string, RateLimitRow[]>();
      wanted.forEach((key, i) => {
        const use = uses[i];
        answers.set(
          key,
          use
            ? { admitted: true, release: () => store.giveBack(use._id), useId: use._id }
            : refusal((again.get(key) ?? []).filter(held), rule, now),
        );
      });
      return answers;
    },

    /**
     * Gives back the slot use a hit was admitted with (its useId), when what it counted did not happen after all:
     * the hit's own row, which no one else writes (a slot's next use is a row of its own).
     */
    async giveBack(useId: string): Promise<void> {
      await rows.deleteOne({ _id: useId });
    },

    /** TTL does this where the server has it; the sweep's reaper where it has not. */
    async reapExpired(now: Date): Promise<number> {
      return (await rows.deleteMany({ expiresAt: { $lte: now } })).deletedCount;
    },
  };
  return store;
}
