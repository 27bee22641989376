// push_receipts: what a device's service worker reported of one push (shown, clicked, the action taken), one row per
// (episode, device) and fan-out attempt, keyed by the sha256 of the receipt token the push carried (the token itself
// lives only in the encrypted payload and on the device). push_first_shown: an episode's first `shown`, taken once
// by an insert (the unique _id), so pause → first shown is observed exactly once per episode.
import type { Db } from 'mongodb';
import { isDuplicateKey, type IndexSpec } from '../mongo';

export const RECEIPT_EVENTS = ['shown', 'clicked', 'action'] as const;
export type ReceiptEvent = (typeof RECEIPT_EVENTS)[number];

export interface PushReceiptRow {
  /** sha256 of the receipt token, base64url. */
  _id: string;
  teamId: string;
  /** Empty for a digest (it is no run's). */
  runId: string;
  episodeId: string;
  kind: string;
  userId: string;
  subscriptionId: string;
  /** When the run paused, for a human-input push: pause → first shown is measured from it. */
  pausedAt?: Date;
  /** Minted just before the send. */
  createdAt: Date;
  /** Receipts are taken until then; the row is kept RECEIPT_RETENTION_SECONDS longer (what the views read). */
  expiresAt: Date;
  shownAt?: Date;
  clickedAt?: Date;
  actedAt?: Date;
  /** The action (choice id) the person took from the notification. */
  action?: string;
}

/** A receipt is taken for a week after its push: a notification left on screen longer tells little. */
export const RECEIPT_TOKEN_TTL_SECONDS = 7 * 24 * 3600;
/** Kept past that for the views as long as the episode's claims (30 days after the push). */
export const RECEIPT_RETENTION_SECONDS = 23 * 24 * 3600;

/** At most this many receipt rows of one run are read for a view (its newest). */
export const MAX_RECEIPTS_READ = 2000;

const EVENT_FIELD: Record<ReceiptEvent, 'shownAt' | 'clickedAt' | 'actedAt'> = {
  shown: 'shownAt',
  clicked: 'clickedAt',
  action: 'actedAt',
};

interface FirstShownRow {
  /** The episode id. */
  _id: string;
  at: Date;
  expiresAt: Date;
}

export const pushReceiptIndexes: IndexSpec[] = [
  { collection: 'push_receipts', key: { runId: 1, createdAt: -1 }, options: { name: 'run_created' } },
  {
    collection: 'push_receipts',
    key: { expiresAt: 1 },
    options: { name: 'expires_ttl', expireAfterSeconds: RECEIPT_RETENTION_SECONDS },
  },
  {
    collection: 'push_first_shown',
    key: { expiresAt: 1 },
    options: { name: 'expires_ttl', expireAfterSeconds: RECEIPT_RETENTION_SECONDS },
  },
];

export type PushReceiptStore = ReturnType<typeof createPushReceiptStore>;

export function createPushReceiptStore(db: Db) {
  const receipts = db.collection<PushReceiptRow>('push_receipts');
  const firstShown = db.collection<FirstShownRow>('push_first_shown');
  return {
    /** Stored before any push carries their tokens: a token on a device always has its row. */
    async insertMany(rows: PushReceiptRow[]): Promise<void> {
      if (rows.length) await receipts.insertMany(rows, { ordered: false });
    },

    async get(hash: string): Promise<PushReceiptRow | null> {
      return receipts.findOne({ _id: hash });
    },

    /**
     * Records the event once: true when this call recorded it, false when it was there already (a repeated receipt
     * changes nothing). The action taken is kept with its time.
     */
    async record(hash: string, event: ReceiptEvent, at: Date, action?: string): Promise<boolean> {
      const field = EVENT_FIELD[event];
      const result = await receipts.updateOne(
        { _id: hash, [field]: { $exists: false } },
        { $set: { [field]: at, ...(event === 'action' && action !== undefined ? { action } : {}) } },
      );
      return result.modifiedCount === 1;
    },

    /** True for the first `shown` of the episode, whoever reported it; false for every later one. */
    async takeFirstShown(episodeId: string, at: Date, expiresAt: Date): Promise<boolean> {
      try {
        await firstShown.insertOne({ _id: episodeId, at, expiresAt });
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    /** The run's receipt rows, newest first, at most MAX_RECEIPTS_READ (the views). */
    async listForRun(runId: string): Promise<PushReceiptRow[]> {
      return receipts.find({ runId }).sort({ createdAt: -1 }).limit(MAX_RECEIPTS_READ).toArray();
    },

    /** TTL does this where the server has it; the sweep's reaper where it has not. */
    async reapExpired(now: Date): Promise<number> {
      const before = new Date(now.getTime() - RECEIPT_RETENTION_SECONDS * 1000);
      const [rows, firsts] = await Promise.all([
        receipts.deleteMany({ expiresAt: { $lte: before } }),
        firstShown.deleteMany({ expiresAt: { $lte: before } }),
      ]);
      return rows.deletedCount + firsts.deletedCount;
    },
  };
}
