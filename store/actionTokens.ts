// action_tokens: the single-use tokens a human-input push gives each recipient, one per choice. Only a token's hash
// is stored (its _id): the token itself lives in the encrypted payload and on the person's device, nowhere else.
import { createHash, randomBytes } from 'node:crypto';
import type { Db } from 'mongodb';
import type { IndexSpec } from './mongo';

export interface ActionTokenRow {
  /** sha256 of the token, base64url. */
  _id: string;
  teamId: string;
  runId: string;
  interactionId: string;
  /** The person it was pushed to: the answer is taken as theirs. */
  userId: string;
  choiceId: string;
  /** It snoozes the question (a push without choices offers that) instead of answering it. */
  snooze?: true;
  /** The push episode that minted it. */
  episodeId: string;
  createdAt: Date;
  expiresAt: Date;
  /** Set when a request took it; cleared again only if that request failed before answering. */
  usedAt?: Date;
  /**
   * Taken, its effect not done yet (still so later: its request died in between): an answer's not stored, a
   * snooze's question's workflow not told. Tokens taken before this was noted have neither.
   */
  untold?: true;
  /** When its effect was done: the answer stored, or the snooze's workflow told. */
  toldAt?: Date;
}

/** How long a row is kept past its expiry, so a late click still reads "expired" (410) instead of "unknown". */
export const ACTION_TOKEN_RETENTION_SECONDS = 7 * 24 * 3600;

export const actionTokenIndexes: IndexSpec[] = [
  {
    collection: 'action_tokens',
    key: { expiresAt: 1 },
    options: { name: 'expires_ttl', expireAfterSeconds: ACTION_TOKEN_RETENTION_SECONDS },
  },
];

/** A new token: 32 random bytes, base64url (43 characters). */
export const newActionToken = (): string => randomBytes(32).toString('base64url');

export const hashActionToken = (token: string): string =>
  createHash('sha256').update(token).digest('base64url');

export type ActionTokenStore = ReturnType<typeof createActionTokenStore>;

export function createActionTokenStore(db: Db) {
  const tokens = db.collection<ActionTokenRow>('action_tokens');
  return {
    async insertMany(rows: ActionTokenRow[]): Promise<void> {
      if (rows.length) await tokens.insertMany(rows, { ordered: false });
    },

    async get(hash: string): Promise<ActionTokenRow | null> {
      return tokens.findOne({ _id: hash });
    },

    /**
     * Takes the token for one request: false when another took it first (or it expired meanwhile). Taken `untold`
     * until told() says its effect is done (the answer stored, the snooze's workflow told).
     */
    async take(hash: string, now: Date, taking: { untold?: true } = {}): Promise<boolean> {
      const result = await tokens.updateOne(
        { _id: hash, usedAt: { $exists: false }, expiresAt: { $gt: now } },
        { $set: { usedAt: now, ...taking } },
      );
      return result.modifiedCount === 1;
    },

    /**
     * The request that took it failed before any answer was stored (or its snooze told): the token works again. A
     * snooze another request told meanwhile is not given back.
     */
    async giveBack(hash: string, takenAt: Date): Promise<void> {
      await tokens.updateOne(
        { _id: hash, usedAt: takenAt, toldAt: { $exists: false } },
        { $unset: { usedAt: '', untold: '' } },
      );
    },

    /** The token's effect is done (the answer stored, the snooze's workflow told): a later use of it is a replay. */
    async told(hash: string, now: Date): Promise<void> {
      await tokens.updateOne({ _id: hash }, { $set: { toldAt: now }, $unset: { untold: '' } });
    },

    /** TTL does this where the server has it; the sweep's reaper where it has not. */
    async reapExpired(now: Date): Promise<number> {
      const before = new Date(now.getTime() - ACTION_TOKEN_RETENTION_SECONDS * 1000);
      return (await tokens.deleteMany({ expiresAt: { $lte: before } })).deletedCount;
    },
  };
}
