// push_holds: a recipient an episode's push did not reach now but held for their digest (quiet hours,
// do-not-disturb, a burst), one row per (episode, person), `_id` episodeId|userId. Upserted, so a retried fan-out
// finds it and holds that person again (never sends to them). A row is owed until a digest a device took went out
// with it, that digest gave up, or the person opted out of it (its kind turned off, or own runs only): the digest
// takes the person's owed rows when it sends (marking them with its id), so what one digest carries is in the
// store, not in its workflow. `owedAt` is when the sweep looks at a row still owed: a row no live digest took by
// then is offered to the person's digest again, so a digest lost for any reason loses nothing. GET
// /runs/:id/episodes and explain read an episode's rows. A row settled is kept 30 days, one owed for as long as it
// is owed.
import type { Collection, Db } from 'mongodb';
import type { DigestEntry } from '../../contract/workflows';
import { episodeOfDelivery } from '../../domain/interaction';
import { DIGEST_CLOSED_KIND } from '../../domain/push';
import { CLAIM_RETENTION_SECONDS } from '../../domain/outcome';
import type { IndexSpec, RetiredIndex } from '../mongo';

export interface PushHoldRow {
  _id: string; // episodeId|userId
  episodeId: string;
  runId: string;
  teamId: string;
  userId: string;
  kind: string;
  title: string;
  reason: 'quiet' | 'burst';
  /** Held as a team-wide member, not the run's owner: switching to own runs opts them out of it. */
  viaTeam?: true;
  /** When it was held. */
  at: Date;
  releaseAt: Date;
  /** The digest that took it. */
  digestId?: string;
  /** A device took that digest (the reaper's clock, as is the give-up's). */
  digestSentAt?: Date;
  /** That digest found no device for a day and gave up. */
  digestGaveUpAt?: Date;
  /** The person opted out of it before a digest took it (its kind turned off, or own runs only): never told. */
  optedOutAt?: Date;
  /** While owed: when the sweep offers it again if no digest has settled it by then. */
  owedAt?: Date;
  /** While a digest that took it is still trying (a day): another digest takes it only after this. */
  takenUntil?: Date;
}

/** How long after its release (or a digest's last try, or an offer) an owed row waits before the sweep offers it. */
export const HOLD_REOFFER_AFTER_SECONDS = 3600;
/** How long a digest that took rows may try to deliver them (its retries span a day) before they are owed again. */
export const DIGEST_TAKES_FOR_SECONDS = 25 * 3600;

/** The rows one digest carries, as its push renders them: how many of each kind, and the newest listed. */
export interface DigestContents {
  counts: Record<string, number>;
  /** Newest first, at most `listed` of the take. */
  newest: PushHoldRow[];
  total: number;
  /**
   * What it tells a run waits on (a question, a park: DIGEST_CLOSED_KIND), one per episode, newest first, at most
   * DIGEST_WAITING_READ: `episodeId` the episode's, whichever of its pushes (a rung, a snooze) was held.
   */
  waiting: Pick<PushHoldRow, 'runId' | 'episodeId' | 'kind'>[];
}

/** The waiting episodes of one digest whose state its send reads (still waiting, or gone on meanwhile). */
const DIGEST_WAITING_READ = 200;

/**
 * A view read a run's holds whole; it now reads each listed episode's. A digest's take read every hold of the
 * person kept (`person`, by when held); it now reads the person's owed ones (`person_owed`). Rows expired 30 days
 * after they were held, owed or not (`at_ttl`); now 30 days after they were settled.
 */
export const retiredPushHoldIndexes: RetiredIndex[] = [
  { collection: 'push_holds', name: 'run' },
  { collection: 'push_holds', name: 'person' },
  { collection: 'push_holds', name: 'at_ttl' },
  { collection: 'push_holds', name: 'person_sent' },
];

export const pushHoldIndexes: IndexSpec[] = [
  { collection: 'push_holds', key: { episodeId: 1 }, options: { name: 'episode' } },
  { collection: 'push_holds', key: { teamId: 1, userId: 1, owedAt: 1 }, options: { name: 'person_owed' } },
  { collection: 'push_holds', key: { digestId: 1 }, options: { name: 'digest' } },
  { collection: 'push_holds', key: { owedAt: 1 }, options: { name: 'owed' } },
  // Kept 30 days once settled, by the time that settled it: a row owed carries none (a server's TTL skips a
  // document without its field), so nothing owed is reaped however long the person was unreachable.
  {
    collection: 'push_holds',
    key: { digestSentAt: 1 },
    options: { name: 'sent_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
  {
    collection: 'push_holds',
    key: { digestGaveUpAt: 1 },
    options: { name: 'gave_up_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
  {
    collection: 'push_holds',
    key: { optedOutAt: 1 },
    options: { name: 'opted_out_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
];

export const holdId = (episodeId: string, userId: string): string => `${episodeId}|${userId}`;

export type PushHoldStore = ReturnType<typeof createPushHoldStore>;

const later = (at: Date, seconds: number): Date => new Date(at.getTime() + seconds * 1000);

/** Owed: no digest a device took went out with it, none gave up on it, and the person did not opt out of it. */
const OWED = {
  digestSentAt: { $exists: false },
  digestGaveUpAt: { $exists: false },
  optedOutAt: { $exists: false },
};
/**
 * Owed, as an index reads it: a row carries `owedAt` exactly while it is owed (set when held, unset when a digest
 * settles it), so the person's settled rows are never read. A range over every date, not `$exists`: the range is
 * what an index serves.
 */
const OWED_AT_SET = { owedAt: { $gte: new Date(0) } };

/** The person's owed rows held by now. */
const owedOf = (teamId: string, userId: string, now: Date) => ({
  teamId,
  userId,
  ...OWED_AT_SET,
  at: { $lte: now },
  ...OWED,
});

/** The person's owed rows held by now that no digest is carrying (none took them, or the one that did stopped). */
const takeable = (teamId: string, userId: string, now: Date) => ({
  ...owedOf(teamId, userId, now),
  $or: [{ digestId: { $exists: false } }, { takenUntil: { $lte: now } }],
});

export function createPushHoldStore(db: Db) {
  const holds = db.collection<PushHoldRow>('push_holds');
  return { ...createHolding(holds), ...createDigestTakes(holds), ...createHoldUpkeep(holds) };
}

/** The fan-out's side: who an episode held already, and the holds it writes. */
function createHolding(holds: Collection<PushHoldRow>) {
  return {
    /** The episode's recipients already held (by an earlier attempt): by `_id`. */
    async heldOf(episodeId: string, userIds: string[]): Promise<Map<string, PushHoldRow>> {
      if (!userIds.length) return new Map();
      const rows = await holds.find({ _id: { $in: userIds.map((u) => holdId(episodeId, u)) } }).toArray();
      return new Map(rows.map((row) => [row.userId, row]));
    },

    /** Records holds; a row already there (a retry) keeps what it said first. */
    async hold(rows: Omit<PushHoldRow, '_id'>[]): Promise<void> {
      if (!rows.length) return;
      await holds.bulkWrite(
        rows.map((row) => ({
          updateOne: {
            filter: { _id: holdId(row.episodeId, row.userId) },
            update: { $setOnInsert: { ...row, owedAt: later(row.releaseAt, HOLD_REOFFER_AFTER_SECONDS) } },
            upsert: true,
          },
        })),
        { ordered: false },
      );
    },
  };
}

/** A digest's side: what it takes, tells and settles. */
function createDigestTakes(holds: Collection<PushHoldRow>) {
  return {
    /**
     * The holds a digest that listed its episodes went out with (digests started before they took from here); a
     * row another digest went out with first keeps that one.
     */
    async markSent(ids: string[], digestId: string, at: Date): Promise<void> {
      if (!ids.length) return;
      await holds.updateMany(
        { _id: { $in: ids }, digestSentAt: { $exists: false } },
        { $set: { digestId, digestSentAt: at }, $unset: { owedAt: '', takenUntil: '' } },
      );
    },

    /**
     * The person's owed rows, for one digest: taken once, at its first send (a retry of the same digest sends
     * what it took), each row by one digest at a time; rows another digest took come back once it stopped trying.
     * It reads the person's owed rows only, never the settled ones kept for the views.
     */
    async take(teamId: string, userId: string, digestId: string, now: Date): Promise<void> {
      if (await holds.findOne({ digestId }, { projection: { _id: 1 } })) return;
      const takenUntil = later(now, DIGEST_TAKES_FOR_SECONDS);
      await holds.updateMany(takeable(teamId, userId, now), {
        $set: { digestId, takenUntil, owedAt: later(takenUntil, HOLD_REOFFER_AFTER_SECONDS) },
      });
    },

    /**
     * The digests that took some of the person's owed rows and stopped carrying them (their hold ran out: the chain
     * terminated, or lost with Temporal's database, after its take).
     */
    async stoppedDigestsOf(teamId: string, userId: string, now: Date): Promise<string[]> {
      const rows = await holds
        .find({ ...owedOf(teamId, userId, now), takenUntil: { $lte: now } }, { projection: { digestId: 1 } })
        .toArray();
      return [...new Set(rows.flatMap((row) => (row.digestId ? [row.digestId] : [])))];
    },

    /**
     * The person's owed rows no digest is carrying that they opted out of since they were held (kinds turned off;
     * `viaTeam`: they chose own runs only) are settled, never told: a digest takes the rest.
     */
    async settleOptedOut(
      teamId: string,
      userId: string,
      optedOut: { kinds: string[]; viaTeam: boolean },
      now: Date,
    ): Promise<void> {
      const which = [
        ...(optedOut.kinds.length ? [{ kind: { $in: optedOut.kinds } }] : []),
        ...(optedOut.viaTeam ? [{ viaTeam: true as const }] : []),
      ];
      if (!which.length) return;
      await holds.updateMany(
        { ...takeable(teamId, userId, now), $and: [{ $or: which }] },
        { $set: { optedOutAt: now }, $unset: { owedAt: '', takenUntil: '', digestId: '' } },
      );
    },

    /**
     * The person left the team: every row still owed them there, taken by a digest or not, is settled as opted out,
     * never told (a digest that took some finds nothing left to send). Answers how many.
     */
    async settleRemoved(teamId: string, userId: string, now: Date): Promise<number> {
      const settled = await holds.updateMany(
        { teamId, userId, ...OWED_AT_SET, ...OWED },
        { $set: { optedOutAt: now }, $unset: { owedAt: '', takenUntil: '', digestId: '' } },
      );
      return settled.modifiedCount;
    },

    /** What a digest took: counted by kind, the newest `listed` of them kept (digestContentsOf). */
    contentsOf: (digestId: string, listed: number): Promise<DigestContents> =>
      digestContentsOf(holds, digestId, listed),

    /** A device took the digest: its rows are no longer owed. The first time is kept (a resend's is later). */
    async markDigestSent(digestId: string, at: Date): Promise<void> {
      await holds.updateMany(
        { digestId, digestSentAt: { $exists: false } },
        { $set: { digestSentAt: at }, $unset: { owedAt: '', takenUntil: '' } },
      );
    },

    /** The digest found no device for a day: its rows say so, and are no longer owed. */
    async markDigestGaveUp(digestId: string, at: Date): Promise<number> {
      const result = await holds.updateMany(
        { digestId, ...OWED },
        { $set: { digestGaveUpAt: at }, $unset: { owedAt: '', takenUntil: '' } },
      );
      return result.modifiedCount;
    },
  };
}

/** The sweep's, the views' and the reaper's: owed rows offered again, an episode's or run's rows, expired ones. */
function createHoldUpkeep(holds: Collection<PushHoldRow>) {
  return {
    /**
     * Owed rows the sweep should look at now, the longest waiting first. A row opted out of is never one, even
     * with `owedAt` set again (by a start-up migration of a version before opting out).
     */
    async owedBefore(now: Date, limit: number): Promise<PushHoldRow[]> {
      return holds
        .find({ owedAt: { $lte: now }, optedOutAt: { $exists: false } })
        .sort({ owedAt: 1 })
        .limit(limit)
        .toArray();
    },

    /**
     * The person's owed rows are offered by the sweep's next pass, not at their old release: their prefs changed
     * and their digest could not be told (none was running, or Temporal was away).
     */
    async owedNow(teamId: string, userId: string, now: Date): Promise<void> {
      await holds.updateMany(
        { ...owedOf(teamId, userId, now), owedAt: { $gt: now } },
        { $set: { owedAt: now } },
      );
    },

    /** Offered to their digest again: the sweep looks at them next after `until`. */
    async deferOffer(ids: string[], until: Date): Promise<void> {
      if (!ids.length) return;
      await holds.updateMany({ _id: { $in: ids }, ...OWED }, { $set: { owedAt: until } });
    },

    /** A run's holds (the suites; the views read an episode's). */
    async listForRun(runId: string): Promise<PushHoldRow[]> {
      return holds.find({ runId }).toArray();
    },

    /** One episode's holds, one per person held: the first `limit` (a team's members may be many). */
    async listForEpisode(episodeId: string, limit: number): Promise<PushHoldRow[]> {
      return holds.find({ episodeId }).limit(limit).toArray();
    },

    /** TTL does this where the server has it; the sweep's reaper where it has not. Never an owed row. */
    async reapExpired(now: Date): Promise<number> {
      const before = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      const sent = await holds.deleteMany({ digestSentAt: { $lte: before } });
      const gaveUp = await holds.deleteMany({ digestGaveUpAt: { $lte: before } });
      const optedOut = await holds.deleteMany({ optedOutAt: { $lte: before } });
      return sent.deletedCount + gaveUp.deletedCount + optedOut.deletedCount;
    },
  };
}

/**
 * Holds written before `owedAt` existed and still owed are owed now: the take and the sweep find owed rows by it
 * (and the reaper keeps them). Idempotent; every start-up runs it.
 */
export async function migrateOwedHolds(db: Db, now: Date): Promise<number> {
  const result = await db
    .collection<PushHoldRow>('push_holds')
    .updateMany({ owedAt: { $exists: false }, ...OWED }, { $set: { owedAt: now } });
  return result.modifiedCount;
}

/**
 * What a digest took: counted by kind, the newest `listed` of them kept (read in one pass). A question pushed again
 * (its rungs, its snoozes) is one question: counted and listed once, by its newest push held.
 */
async function digestContentsOf(
  holds: Collection<PushHoldRow>,
  digestId: string,
  listed: number,
): Promise<DigestContents> {
  const contents: DigestContents = { counts: {}, newest: [], total: 0, waiting: [] };
  const waitingByEpisode = new Map<string, PushHoldRow>();
  for await (const row of holds.find({ digestId })) {
    contents.total++;
    if (DIGEST_CLOSED_KIND[row.kind]) {
      const episodeId = episodeOfDelivery(row.episodeId);
      const seen = waitingByEpisode.get(episodeId);
      if (!seen || seen.at < row.at) waitingByEpisode.set(episodeId, { ...row, episodeId });
      continue;
    }
    contents.counts[row.kind] = (contents.counts[row.kind] ?? 0) + 1;
    contents.newest.push(row);
    if (contents.newest.length > listed * 4) trimNewest(contents.newest, listed);
  }
  const waiting = [...waitingByEpisode.values()];
  for (const row of waiting) contents.counts[row.kind] = (contents.counts[row.kind] ?? 0) + 1;
  contents.newest.push(...waiting);
  trimNewest(contents.newest, listed);
  trimNewest(waiting, DIGEST_WAITING_READ);
  contents.waiting = waiting.map(({ runId, episodeId, kind }) => ({ runId, episodeId, kind }));
  return contents;
}

/** Keeps the `listed` newest rows, newest first. */
function trimNewest(rows: PushHoldRow[], listed: number): void {
  rows.sort((a, b) => b.at.getTime() - a.at.getTime());
  if (rows.length > listed) rows.length = listed;
}

/** A hold row as its digest lists it. */
export const digestEntryOf = (row: Omit<PushHoldRow, '_id'>): DigestEntry => ({
  episodeId: row.episodeId,
  runId: row.runId,
  kind: row.kind,
  title: row.title,
  at: row.at.toISOString(),
  releaseAt: row.releaseAt.toISOString(),
  reason: row.reason,
});
