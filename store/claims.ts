// sent_notifications: the episode claim, the one authority every family and every replica share.
//
//   absent     no row: never claimed, released (unmark), or expired
//   pending    delivered:false — a live fan-out holds it; it shields the episode for the claim grace
//   delivered  delivered:true — settled, never retried
//
// An episode's release, a team event delivery's and an answered close's also leave a note under released|<key> (born
// settled, never claimed): the sweep reaches a run by its updatedAt and an event by its recordedAt, and this note is
// how it reaches a release made after either left its window, and how long a replay that keeps failing rests.
//
// Exclusivity never depends on an atomic compare-and-swap (upstream FerretDB v1 has none): a claim is won by inserting
// the unique _id, and a stale claim is taken over by first inserting a takeover marker unique to that stale
// generation, so exactly one contender may replace it (a marker whose contender stopped before the replace is its
// own to finish, and anyone's past the grace). Keys: the episode id (push), cb|… (callback),
// ops|… (operator). No tenant field: the key is global.
import type { Collection, Db } from 'mongodb';
import { CLAIM_RETENTION_SECONDS, episodeOfClaimKey, type ClaimState } from '../domain/outcome';
import { closeOfClaimKey } from '../domain/interaction';
import { teamDeliveryOfClaimKey } from '../domain/teamEvents';
import { duplicatePositions, isDuplicateKey, type IndexSpec } from './mongo';

/** Rows per round trip when markedSince reads a range of claims. */
const CLAIM_SCAN_BATCH = 200_000;
/** What isShielding reads. */
const SHIELD_FIELDS = { _id: 1, delivered: 1, sent_at: 1, held_until: 1 };
/** The note an episode's release leaves (see the head of this file). */
const RELEASED_PREFIX = 'released|';
const RELEASED_RESULT = 'released';

export interface ClaimRow {
  _id: string;
  holder: string;
  delivered: boolean;
  /** Claim time while pending, settle time once delivered; the 30-day expiry counts from here. */
  sent_at: Date;
  /** How a settled episode ended, when not simply delivered (e.g. a callback that gave up after its retries). */
  result?: string;
  /** A pending claim's holder waits on a durable timer until then: in hand until then and a grace after it. */
  held_until?: Date;
  /** A release note's first release (its sent_at is the latest). */
  first_released_at?: Date;
}

/** When a key was first released, and last (its release note). */
export interface Releases {
  firstReleasedAt: Date;
  lastReleasedAt: Date;
}

/** An episode released since the range began, by its release note. */
export interface ReleasedEpisode extends Releases {
  runId: string;
  episodeId: string;
  /** The family's claim key it released. */
  key: string;
}

/** A team event's delivery to one endpoint released since the range began, by its release note. */
export interface ReleasedTeamDelivery extends Releases {
  eventId: string;
  endpointId: string;
}

/** The sweep's pre-check: the keys in hand, and the episodes and team event deliveries released, since a moment. */
export interface ClaimsSince {
  marked: Set<string>;
  released: ReleasedEpisode[];
  releasedTeamDeliveries: ReleasedTeamDelivery[];
  /** The answered closes released in the range, by interaction id. */
  releasedCloses: Map<string, Releases>;
}

export const claimIndexes: IndexSpec[] = [
  {
    collection: 'sent_notifications',
    key: { sent_at: 1 },
    options: { name: 'sent_at_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
];

export interface ClaimStoreOptions {
  graceSeconds: number;
  now?: () => Date;
  /** Told of every stale claim taken over (metrics). */
  onTakeover?: (key: string) => void;
}

export type ClaimStore = ReturnType<typeof createClaimStore>;

/** What the claim store's parts share: the collection, the clock, the grace rule. */
interface ClaimContext {
  claims: Collection<ClaimRow>;
  now: () => Date;
  /** "Someone has this in hand": delivered, or pending inside the grace at `at`. */
  isShielding: (row: ClaimRow, at: Date) => boolean;
  graceMs: number;
  onTakeover?: (key: string) => void;
}

/**
 * Claims the episode for holder. Wins when the key is absent, when holder already holds it pending (an
 * activity that runs twice re-enters), or when the pending claim outlived the grace (stale takeover).
 * Loses to a delivered claim and to another holder's pending claim inside the grace.
 */
async function tryMark(ctx: ClaimContext, key: string, holder: string): Promise<boolean> {
  const { claims, now, isShielding, onTakeover } = ctx;
  for (let attempt = 0; attempt < 5; attempt++) {
    const at = now();
    try {
      await claims.insertOne({ _id: key, holder, delivered: false, sent_at: at });
      return true;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    const row = await claims.findOne({ _id: key });
    if (!row) continue; // released between our insert and read: try again
    if (row.delivered) return false;
    if (row.holder === holder) return true;
    if (isShielding(row, at)) return false;
    // Stale: one contender per stale generation wins the right to replace it.
    const right = await takeoverRight(
      ctx,
      `takeover|${key}|${row.holder}|${row.sent_at.getTime()}`,
      holder,
      at,
    );
    if (right === 'lost') return false;
    if (right === 'again') continue;
    // Only the generation read: a holder that renewed (or settled) since keeps its claim.
    const removed = await claims.deleteOne({
      _id: key,
      holder: row.holder,
      delivered: false,
      sent_at: row.sent_at,
    });
    if (removed.deletedCount === 1) onTakeover?.(key);
  }
  return false;
}

/**
 * The right to replace one stale generation of a claim: won by inserting its marker, or held already when the
 * marker is ours (a retry after a store error, or a crash, between the marker and the delete). Another contender's
 * marker inside the grace: lost. One older than the grace was left by a contender that stopped there, and would
 * block the claim until it expired: removed, and the takeover tried again (one contender's insert wins it).
 */
async function takeoverRight(
  ctx: ClaimContext,
  generation: string,
  holder: string,
  at: Date,
): Promise<'won' | 'lost' | 'again'> {
  try {
    await ctx.claims.insertOne({ _id: generation, holder, delivered: true, sent_at: at });
    return 'won';
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
  }
  const marker = await ctx.claims.findOne({ _id: generation });
  if (!marker) return 'again';
  if (marker.holder === holder) return 'won';
  if (marker.sent_at.getTime() + ctx.graceMs > at.getTime()) return 'lost';
  await ctx.claims.deleteOne({ _id: generation, holder: marker.holder, sent_at: marker.sent_at });
  return 'again';
}

/**
 * tryMark for several keys: one insert of them all (one round trip, and on the embedded store one transaction,
 * for the usual case of keys never claimed), then tryMark's own rules for each key that was present.
 */
async function tryMarkEach(ctx: ClaimContext, keys: string[], holder: string): Promise<boolean[]> {
  if (!keys.length) return [];
  const at = ctx.now();
  let present = new Set<number>();
  try {
    const rows = keys.map((key) => ({ _id: key, holder, delivered: false, sent_at: at }));
    await ctx.claims.insertMany(rows, { ordered: false });
  } catch (err) {
    present = duplicatePositions(err);
  }
  return Promise.all(keys.map((key, i) => (present.has(i) ? tryMark(ctx, key, holder) : true)));
}

/** A holder's moves after winning a claim: settle it, keep it in hand, or let it go. */
function createClaimSettling({ claims, now }: ClaimContext) {
  return {
    /**
     * Settles the episode: never retried again. `result` notes how it ended when that was not a delivery.
     * False when holder no longer holds it (its claim went stale and was taken over). A settle made again (its
     * first answer lost) is true and changes nothing: a redelivery may have brought the result up to date since.
     */
    async markDelivered(key: string, holder: string, result = 'delivered'): Promise<boolean> {
      const update = await claims.updateOne(
        { _id: key, holder, delivered: false },
        { $set: { delivered: true, sent_at: now(), result } },
      );
      if (update.matchedCount === 1) return true;
      return (await claims.countDocuments({ _id: key, holder, delivered: true }, { limit: 1 })) === 1;
    },

    /**
     * A settled claim's result brought up to date (a redelivery of a callback that gave up): still settled, and
     * kept another retention period from now, in `holder`'s name when given (markDelivered then answers true to
     * it). False when it is not settled.
     */
    async resettle(key: string, result: string, holder?: string): Promise<boolean> {
      const update = await claims.updateOne(
        { _id: key, delivered: true },
        { $set: { sent_at: now(), result, ...(holder ? { holder } : {}) } },
      );
      return update.matchedCount === 1;
    },

    /**
     * Keeps a pending claim in hand for another grace (a holder that retries for hours), or, given `forSeconds`,
     * for that long and a grace after it (a holder about to wait that long on a durable timer: alive, not lost).
     * False when holder no longer holds it pending (taken over, or settled).
     */
    async renew(key: string, holder: string, forSeconds?: number): Promise<boolean> {
      const at = now();
      const held = forSeconds ? { held_until: new Date(at.getTime() + forSeconds * 1000) } : {};
      const update = await claims.updateOne(
        { _id: key, holder, delivered: false },
        { $set: { sent_at: at, ...held } },
      );
      return update.matchedCount === 1;
    },

    /**
     * Releases a pending claim so the sweep (or another replica) may try again. Never undoes a delivery. An
     * episode's (a team event delivery's, an answered close's) release is noted first: a crash between the two leaves a note beside a claim that goes stale,
     * which the sweep replays as it would a release.
     */
    async unmark(key: string, holder: string): Promise<void> {
      if (episodeOfClaimKey(key) || teamDeliveryOfClaimKey(key) || closeOfClaimKey(key)) {
        const at = now();
        await claims
          .updateOne(
            { _id: `${RELEASED_PREFIX}${key}` },
            {
              $set: { holder, delivered: true, sent_at: at, result: RELEASED_RESULT },
              $setOnInsert: { first_released_at: at },
            },
            { upsert: true },
          )
          .catch((err: unknown) => {
            if (!isDuplicateKey(err)) throw err; // a release beside it wrote the note
          });
      }
      await claims.deleteOne({ _id: key, holder, delivered: false });
    },
  };
}

/**
 * A claim's state and, once settled, how it ended; a pending one past its grace is `stale`: its holder is gone
 * (a release lost), and the next tryMark takes it over.
 */
export type ClaimDescription = { state: ClaimState; result?: string; stale?: true };

/** Whether an episode is in hand or settled, one key or a range at a time, and the reaping of expired rows. */
function createClaimReads({ claims, now, isShielding }: ClaimContext) {
  const describeRow = (row: ClaimRow | null, at: Date): ClaimDescription => {
    if (row === null) return { state: 'absent' };
    if (row.delivered) return { state: 'delivered', result: row.result ?? 'delivered' };
    return isShielding(row, at) ? { state: 'pending' } : { state: 'pending', stale: true };
  };
  const reads = {
    /** True for a delivered claim and for a pending one inside the grace: "someone has this in hand". */
    async isMarked(key: string): Promise<boolean> {
      const row = await claims.findOne({ _id: key });
      return row !== null && isShielding(row, now());
    },

    /** Strictly narrower than isMarked: only a settled delivery. Certify side-state off this, never isMarked. */
    async wasDelivered(key: string): Promise<boolean> {
      return (await claims.countDocuments({ _id: key, delivered: true }, { limit: 1 })) > 0;
    },

    async state(key: string): Promise<ClaimState> {
      return (await reads.describe(key)).state;
    },

    /** The state and, once settled, how it ended. */
    async describe(key: string): Promise<ClaimDescription> {
      return describeRow(await claims.findOne({ _id: key }), now());
    },

    /** describe() for each key, in one read by _id. */
    async describeEach(keys: string[]): Promise<Map<string, ClaimDescription>> {
      const rows = keys.length ? await claims.find({ _id: { $in: keys } }).toArray() : [];
      const found = new Map(rows.map((row) => [row._id, row]));
      const at = now();
      return new Map(keys.map((key) => [key, describeRow(found.get(key) ?? null, at)]));
    },

    /**
     * The sweep's pre-check: every key someone has in hand among the rows claimed or settled since `since`, read
     * before the runs are listed (one range on the sent_at index, however many keys). A claim is written after its
     * episode began and settling only moves sent_at later, so every claim of an episode that began after `since`
     * is in that range. A range also suits FerretDB v1, which evaluates `$in` by walking the whole key list for
     * every row of the collection (rows × keys). A key whose claim is older than the range, or newer than this
     * read, reads as not in hand: the caller replays an episode that then loses its claim, never a duplicate.
     * The range's release notes come apart: the episodes, the team event deliveries and the closes released in it.
     */
    async markedSince(since: Date): Promise<ClaimsSince> {
      const at = now();
      const marked = new Set<string>();
      const released: ReleasedEpisode[] = [];
      const releasedTeamDeliveries: ReleasedTeamDelivery[] = [];
      const releasedCloses = new Map<string, Releases>();
      // One batch for up to CLAIM_SCAN_BATCH rows (~70 bytes each projected: well under the 16 MB reply cap).
      const cursor = claims.find(
        { sent_at: { $gte: since } },
        { projection: { ...SHIELD_FIELDS, first_released_at: 1 }, batchSize: CLAIM_SCAN_BATCH },
      );
      for await (const row of cursor) {
        if (!row._id.startsWith(RELEASED_PREFIX)) {
          if (isShielding(row, at)) marked.add(row._id);
          continue;
        }
        const key = row._id.slice(RELEASED_PREFIX.length);
        const releases = {
          firstReleasedAt: row.first_released_at ?? row.sent_at,
          lastReleasedAt: row.sent_at,
        };
        const episode = episodeOfClaimKey(key);
        if (episode) released.push({ ...episode, key, ...releases });
        const delivery = !episode && teamDeliveryOfClaimKey(key);
        if (delivery) releasedTeamDeliveries.push({ ...delivery, ...releases });
        const close = closeOfClaimKey(key);
        if (close) releasedCloses.set(close, releases);
      }
      return { marked, released, releasedTeamDeliveries, releasedCloses };
    },

    /** The keys among these that someone has in hand (isMarked of each, in one read by _id). */
    async markedAmong(keys: string[]): Promise<Set<string>> {
      if (!keys.length) return new Set();
      const at = now();
      const rows = await claims.find({ _id: { $in: keys } }, { projection: SHIELD_FIELDS }).toArray();
      return new Set(rows.filter((row) => isShielding(row, at)).map((row) => row._id));
    },

    /** Where the server has no TTL index, the sweep calls this: drops rows past the 30-day retention. */
    async reapExpired(): Promise<number> {
      const cutoff = new Date(now().getTime() - CLAIM_RETENTION_SECONDS * 1000);
      const result = await claims.deleteMany({ sent_at: { $lt: cutoff } });
      return result.deletedCount;
    },
  };
  return reads;
}

export function createClaimStore(
  db: Db,
  { graceSeconds, now = () => new Date(), onTakeover }: ClaimStoreOptions,
) {
  const graceMs = graceSeconds * 1000;
  const ctx: ClaimContext = {
    claims: db.collection<ClaimRow>('sent_notifications'),
    now,
    isShielding: (row, at) =>
      row.delivered ||
      Math.max(row.sent_at.getTime(), row.held_until?.getTime() ?? 0) + graceMs > at.getTime(),
    graceMs,
    onTakeover,
  };
  const settling = createClaimSettling(ctx);
  return {
    /** How long a pending claim shields its episode after it was taken or last held. */
    graceMs,
    /** Claims the episode for holder, or takes a stale claim over (see tryMark). */
    tryMark: (key: string, holder: string): Promise<boolean> => tryMark(ctx, key, holder),
    /** tryMark for each key, in one insert where none was claimed yet. */
    tryMarkEach: (keys: string[], holder: string): Promise<boolean[]> => tryMarkEach(ctx, keys, holder),
    /**
     * Records that something happened, once: a row born settled, never a claim anyone works under (a question
     * whose workflow was started, for the sweep). One write; a second note of the key changes nothing.
     */
    async noteOnce(key: string, holder: string, result: string): Promise<void> {
      try {
        await ctx.claims.insertOne({ _id: key, holder, delivered: true, sent_at: now(), result });
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
    },
    /**
     * Settles a claim nobody delivers any more given up (`result`), in holder's name: taken like any claim (a stale
     * one taken over), then settled, `beforeSettle` run while it is held; false when another holds it (a holder
     * that came back meanwhile keeps it).
     */
    async giveUp(
      key: string,
      holder: string,
      result: string,
      beforeSettle?: (key: string) => Promise<void>,
    ): Promise<boolean> {
      if (!(await tryMark(ctx, key, holder))) return false;
      await beforeSettle?.(key);
      return settling.markDelivered(key, holder, result);
    },
    ...settling,
    ...createClaimReads(ctx),
  };
}

/**
 * Plain reads of claim rows, for operator tools (flow-notify explain): no grace, no writes. `keys` is looked up by
 * _id; `prefix` reads one run's ops|health:… or ops|route:… keys as an _id range (an index range on MongoDB).
 */
export function createClaimReader(db: Db) {
  const claims = db.collection<ClaimRow>('sent_notifications');
  return {
    async byKeys(keys: string[]): Promise<ClaimRow[]> {
      if (!keys.length) return [];
      return claims.find({ _id: { $in: keys } }).toArray();
    },

    async byPrefix(prefix: string, limit: number): Promise<ClaimRow[]> {
      // The key just after every key that starts with prefix: its last character bumped by one.
      const end = prefix.slice(0, -1) + String.fromCharCode(prefix.charCodeAt(prefix.length - 1) + 1);
      return claims
        .find({ _id: { $gte: prefix, $lt: end } })
        .sort({ _id: 1 })
        .limit(limit)
        .toArray();
    },
  };
}

export type ClaimReader = ReturnType<typeof createClaimReader>;
