// push_receipts: what a device's service worker reported of one push (shown, clicked, the action taken), one row per
// (episode, device) and fan-out attempt, keyed by the sha256 of the receipt token the push carried (the token itself
// lives only in the encrypted payload and on the device). push_first_shown: an episode's first `shown`, taken once
// by an insert (the unique _id), so pause → first shown is observed exactly once per episode.
import type { Db } from 'mongodb';
import { followUpIdRange, interactionClaimKeys } from '../../domain/interaction';
import { isDuplicateKey, type IndexSpec, type RetiredIndex } from '../mongo';

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

/**
 * At most this many receipt rows of one episode's pushes are read for a view: a row per device and fan-out attempt
 * that tried it, so far past what an episode's recipients make.
 */
export const MAX_RECEIPTS_PER_EPISODE = 10_000;

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
  { collection: 'push_receipts', key: { episodeId: 1 }, options: { name: 'episode' } },
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

/** The run's receipts, newest first, were read whole for a view; a view now reads its episodes' own. */
export const retiredPushReceiptIndexes: RetiredIndex[] = [
  { collection: 'push_receipts', name: 'run_created' },
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

    /**
     * The receipts of one episode's pushes (the views read them a page of episodes at a time, so their cost follows
     * the page, not the run's history); with `interactionId` (an input request) its follow-ups'
     * (`<episodeId>|<rung or snooze>`) and its close's too.
     */
    async listForEpisode(episodeId: string, interactionId?: string): Promise<PushReceiptRow[]> {
      const own = interactionId ? [episodeId, interactionClaimKeys.answered(interactionId)] : [episodeId];
      const [sent, followUps] = await Promise.all([
        receipts
          .find({ episodeId: { $in: own } })
          .limit(MAX_RECEIPTS_PER_EPISODE)
          .toArray(),
        interactionId
          ? receipts
              .find({ episodeId: followUpIdRange(episodeId) })
              .limit(MAX_RECEIPTS_PER_EPISODE)
              .toArray()
          : [],
      ]);
      return [...sent, ...followUps];
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
