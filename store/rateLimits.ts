// rate_limits: one row per admitted hit of a rate-limited action (a sliding window per key), so a limit holds
// across every API process. A hit is counted before it writes, so a refusal stores nothing; two hits racing for
// the last slot are settled by counting again after the insert (the loser deletes its row and is refused).
// Rows expire by TTL where the server has it; every hit also deletes its own key's rows older than the window.
import { randomUUID } from 'node:crypto';
import type { Db } from 'mongodb';
import { isDuplicateKey, type IndexSpec } from './mongo';

export interface RateLimitRow {
  /** `<key>|<hit id>` when the hit has an id (a repeat of it is not counted again), else random. */
  _id: string;
  key: string;
  at: Date;
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
    }
  | { admitted: false; retryAfterSeconds: number };

export const rateLimitIndexes: IndexSpec[] = [
  { collection: 'rate_limits', key: { key: 1, at: 1 }, options: { name: 'key_at' } },
  {
    collection: 'rate_limits',
    key: { expiresAt: 1 },
    options: { name: 'expires_ttl', expireAfterSeconds: 0 },
  },
];

export type RateLimitStore = ReturnType<typeof createRateLimitStore>;

export function createRateLimitStore(db: Db) {
  const rows = db.collection<RateLimitRow>('rate_limits');

  async function refusal(key: string, rule: RateLimit, now: Date): Promise<Admission> {
    const since = new Date(now.getTime() - rule.windowSeconds * 1000);
    const [oldest] = await rows.find({ key, at: { $gt: since } }, { sort: { at: 1 }, limit: 1 }).toArray();
    const freeAt = oldest ? oldest.at.getTime() + rule.windowSeconds * 1000 : now.getTime();
    return { admitted: false, retryAfterSeconds: Math.max(1, Math.ceil((freeAt - now.getTime()) / 1000)) };
  }

  return {
    /**
     * Admits a hit on `key` when fewer than `rule.limit` were admitted in the last `rule.windowSeconds`. A hit with
     * an id that was already admitted inside the window is admitted again without counting (a retried request).
     */
    async hit(key: string, rule: RateLimit, now: Date, hitId?: string): Promise<Admission> {
      const since = new Date(now.getTime() - rule.windowSeconds * 1000);
      const inWindow = { key, at: { $gt: since } };
      await rows.deleteMany({ key, at: { $lte: since } });
      const _id = hitId === undefined ? randomUUID() : `${key}|${hitId}`;
      const noop = { admitted: true as const, release: async () => undefined };
      if (hitId !== undefined && (await rows.countDocuments({ _id, ...inWindow }, { limit: 1 }))) return noop;
      if ((await rows.countDocuments(inWindow)) >= rule.limit) return refusal(key, rule, now);
      try {
        await rows.insertOne({
          _id,
          key,
          at: now,
          expiresAt: new Date(now.getTime() + rule.windowSeconds * 1000),
        });
      } catch (err) {
        if (hitId !== undefined && isDuplicateKey(err)) return noop; // the same hit, admitted concurrently
        throw err;
      }
      const release = async (): Promise<void> => void (await rows.deleteOne({ _id }));
      if ((await rows.countDocuments(inWindow)) > rule.limit) {
        await release();
        return refusal(key, rule, now);
      }
      return { admitted: true, release };
    },
  };
}
