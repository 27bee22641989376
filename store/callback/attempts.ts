// callback_attempts: one row per HTTP attempt of a run's completion callback (the episode's own schedule and every
// redelivery), for GET /runs/:id/episodes, the studio and flow-notify explain. Kept 30 days: a TTL index where the
// server has one (MongoDB), the sweep's reaper where it has not (FerretDB v1: FerretDB/FerretDB#2415, TTL only
// came with v2).
//
// Rows are written once (only a give-up's mark is cleared, when a redelivery delivered) and their _id is
// `<episodeId>|<attempt>`: an attempt number is taken by inserting it
// (E11000 = taken, try the next), the one exclusivity FerretDB v1 has, so numbers stay unique and continue across
// re-runs of the episode and redeliveries without a counter or a read-modify-write.
import type { Collection, Db } from 'mongodb';
import {
  PACING_HOLDS,
  type CallbackTrigger,
  type DeliveryCategory,
  type PacingHold,
} from '../../domain/callback';
import { CLAIM_RETENTION_SECONDS } from '../../domain/outcome';
import { pageNewestFirst, type Page, type PageCursor } from '../paging';
import { isDuplicateKey, type IndexSpec, type RetiredIndex } from '../mongo';

export const CALLBACK_ATTEMPT_RETENTION_SECONDS = CLAIM_RETENTION_SECONDS;

export interface CallbackAttemptRow {
  _id: string; // episodeId|attempt
  episodeId: string;
  runId: string;
  /** The team endpoint it was sent to (endpoint_attempts only; rows written before it was recorded have none). */
  endpointId?: string;
  /** The run's team (rows written before it was recorded have none). */
  teamId?: string;
  /** 1-based, across every delivery of the episode (its schedule, re-runs, redeliveries). */
  attempt: number;
  /** When the request started. */
  at: Date;
  durationMs: number;
  /** delivered (2xx), retry (worth another try) or stop (a refusal, a 4xx): how this one attempt went. */
  result: 'delivered' | 'retry' | 'stop';
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  /**
   * Why there was no answer (failureCategory: timeout, network, refused: …), when there was none; breaker_open or
   * paced: the worker held the attempt back (nothing was sent, the receiver is not blamed).
   */
  error?: DeliveryCategory | PacingHold;
  /** The receiver's Retry-After, in seconds, when it sent one. */
  retryAfterSeconds?: number;
  /** The wait before the next attempt of the schedule; absent when none followed (delivered, stopped, last one). */
  nextWaitSeconds?: number;
  /** When that next attempt is due (the attempt's end plus the wait); absent where nextWaitSeconds is. */
  nextAttemptAt?: Date;
  /** episode (its own schedule) or redeliver (a manual redelivery, or a recover's: then recoverId says which). */
  trigger: CallbackTrigger;
  recoverId?: string;
  /**
   * The episode's own schedule gave up on this attempt (a refusal, or the last attempt it had); cleared once a
   * redelivery delivered it (what a recover looks for is what is still owed).
   */
  gaveUp?: true;
  /** The Temporal activity's attempt (more than 1: a worker was lost mid-attempt) and its workflow. */
  activityAttempt?: number;
  workflowId?: string;
  workflowRunId?: string;
  /** The activity that made it (rows written after the fact, or before it was recorded, have none). */
  activityId?: string;
}

/** An attempt log's indexes: the callbacks' (callback_attempts) and the team endpoints' (endpoint_attempts). */
export const attemptLogIndexes = (collection: string): IndexSpec[] => [
  // Newest first, by run (operator tools) or by episode (the episodes view, a redelivery's count).
  { collection, key: { runId: 1, at: -1, _id: -1 }, options: { name: 'run_recent' } },
  {
    collection,
    key: { episodeId: 1, at: -1, _id: -1 },
    options: { name: 'episode_recent' },
  },
  // A team's give-ups in a window, oldest first (a recover pages through them).
  {
    collection,
    key: { teamId: 1, gaveUp: 1, at: 1, _id: 1 },
    options: { name: 'team_gave_up' },
  },
  {
    collection,
    key: { at: 1 },
    options: { name: 'at_ttl', expireAfterSeconds: CALLBACK_ATTEMPT_RETENTION_SECONDS },
  },
];

export const callbackAttemptIndexes = attemptLogIndexes('callback_attempts');

/** The team endpoints' log: the callbacks' indexes and, newest first, one endpoint's attempts (the studio's log). */
export const endpointAttemptIndexes = (collection: string): IndexSpec[] => [
  ...attemptLogIndexes(collection),
  { collection, key: { endpointId: 1, at: -1, _id: -1 }, options: { name: 'endpoint_recent' } },
];

/** Replaced by run_recent (it could not serve the newest-first sort). */
export const retiredCallbackAttemptIndexes: RetiredIndex[] = [
  { collection: 'callback_attempts', name: 'run_at' },
];

/** How many numbers one record tries past its first guess before it gives up (a bound, never reached in use). */
const MAX_PROBES = 1000;

export type CallbackAttemptStore = ReturnType<typeof createCallbackAttemptStore>;

/** The attempt log in `collection`: a run's callbacks by default; a team endpoint's deliveries use the same rows. */
export function createCallbackAttemptStore(db: Db, collection = 'callback_attempts') {
  const rows = db.collection<CallbackAttemptRow>(collection);
  /** One episode's newest `limit` attempts, newest first. */
  const newestOf = (episodeId: string, limit: number): Promise<CallbackAttemptRow[]> =>
    rows.find({ episodeId }).sort({ at: -1, _id: -1 }).limit(limit).toArray();
  /**
   * Records an attempt under the first free number from `from` on (the caller's guess: its own count of
   * attempts), and answers the number it took. A guess taken already (a held attempt's rows, an execution
   * replayed by the sweep, a redelivery) goes on past the newest row, one indexed read, rather than one insert
   * per row before it. Past `deadline` (epoch ms) it stops probing. `written`, asked before each insert, answers
   * the number of the row when it is there already.
   */
  const record = async (
    row: Omit<CallbackAttemptRow, '_id' | 'attempt'>,
    from = 1,
    deadline = Infinity,
    written?: () => Promise<number | undefined>,
  ): Promise<number> => {
    let attempt = Math.max(1, from);
    for (let probe = 0; probe < MAX_PROBES; probe++) {
      if (Date.now() >= deadline) break;
      const there = await written?.();
      if (there !== undefined) return there;
      try {
        await rows.insertOne({ _id: `${row.episodeId}|${attempt}`, ...row, attempt });
        return attempt;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const [newest] = probe === 0 ? await newestOf(row.episodeId, 1) : [];
      attempt = Math.max(attempt + 1, (newest?.attempt ?? 0) + 1);
    }
    throw new Error(`callback attempts of ${row.episodeId}: no free number from ${from} in time`);
  };
  return {
    record: (row: Omit<CallbackAttemptRow, '_id' | 'attempt'>, from?: number, deadline?: number) =>
      record(row, from, deadline),

    /**
     * Records an attempt written after the fact (its own record lost it), unless it is there: a row of its episode
     * at the same time is it (the lost write, or an earlier try of this one, landed after all). Asked again before
     * each number it tries, so a write landing meanwhile is not recorded twice. Past `deadline` it stops probing.
     */
    recordOnce: (row: Omit<CallbackAttemptRow, '_id' | 'attempt'>, from: number, deadline = Infinity) =>
      record(row, from, deadline, async () => {
        const found = await rows.findOne(
          { episodeId: row.episodeId, at: row.at },
          { projection: { attempt: 1 } },
        );
        return found?.attempt;
      }),

    /**
     * The newest `limit` attempts of a run's episodes, oldest first (operator tools): past the cap, the latest
     * (what a launcher is asking about) are kept and the oldest left out.
     */
    async listForRun(runId: string, limit: number): Promise<CallbackAttemptRow[]> {
      const newest = await rows.find({ runId }).sort({ at: -1, _id: -1 }).limit(limit).toArray();
      return newest.reverse();
    },

    /** The newest `limit` attempts of one episode, oldest first (the episodes view). */
    async listForEpisode(episodeId: string, limit: number): Promise<CallbackAttemptRow[]> {
      return (await newestOf(episodeId, limit)).reverse();
    },

    /**
     * The sweep gave the episode's callback up past its reach (released, its schedule unfinished): its newest
     * attempt is marked given up, so a recover finds it as it finds a schedule's give-up. Answers that attempt
     * (undefined: it has none).
     */
    async markNewestGaveUp(episodeId: string): Promise<CallbackAttemptRow | undefined> {
      const [newest] = await newestOf(episodeId, 1);
      if (!newest) return undefined;
      await rows.updateOne({ _id: newest._id }, { $set: { gaveUp: true } });
      return newest;
    },

    /** The delivery an earlier try of one activity (`workflowRunId`, `activityId`) made of the episode, if any. */
    async deliveredBy(
      episodeId: string,
      workflowRunId: string,
      activityId: string,
    ): Promise<Pick<CallbackAttemptRow, 'status'> | undefined> {
      const filter = { episodeId, workflowRunId, activityId, result: 'delivered' as const };
      return (await rows.findOne(filter, { projection: { _id: 0, status: 1 } })) ?? undefined;
    },

    /**
     * The episode's callback was delivered after it gave up (a redelivery): its give-ups are no longer what a
     * recover looks for, so a recover's reads follow what is still owed, not every give-up kept.
     */
    async clearGaveUp(episodeId: string): Promise<void> {
      await rows.updateMany({ episodeId, gaveUp: true }, { $unset: { gaveUp: '' } });
    },

    /**
     * The attempts on which a team's callbacks gave up in [since, until), oldest first, `limit` of them after
     * `after` (the previous page's last row). The cursor's bound is `at >= after.at` (a range the index serves);
     * the rows at exactly that time up to its _id were on earlier pages and are skipped here.
     */
    async listGaveUp(
      teamId: string,
      since: Date,
      until: Date,
      limit: number,
      after?: { at: Date; id: string },
    ): Promise<{ rows: CallbackAttemptRow[]; next?: { at: Date; id: string } }> {
      const filter = { teamId, gaveUp: true as const, at: { $gte: after?.at ?? since, $lt: until } };
      const seen = (row: CallbackAttemptRow): boolean =>
        after !== undefined && row.at.getTime() === after.at.getTime() && row._id <= after.id;
      for (let read = limit + (after ? 2 : 1); ; read *= 2) {
        const found = await rows.find(filter, { sort: { at: 1, _id: 1 }, limit: read }).toArray();
        const fresh = found.filter((row) => !seen(row));
        if (fresh.length > limit || found.length < read) {
          const page = fresh.slice(0, limit);
          const last = page.at(-1);
          return {
            rows: page,
            ...(fresh.length > limit && last ? { next: { at: last.at, id: last._id } } : {}),
          };
        }
      }
    },

    ...endpointReads(rows),

    /**
     * How many attempts an episode has sent (the worker's holds sent nothing and are not counted): what a redelivery
     * request saw (a later one means another delivery went out meanwhile).
     */
    async countForEpisode(episodeId: string): Promise<number> {
      return rows.countDocuments({ episodeId, error: { $nin: [...PACING_HOLDS] } });
    },

    async reapExpired(now: Date): Promise<number> {
      const cutoff = new Date(now.getTime() - CALLBACK_ATTEMPT_RETENTION_SECONDS * 1000);
      return (await rows.deleteMany({ at: { $lt: cutoff } })).deletedCount;
    },
  };
}

/** A team endpoint's own reads of its log (endpoint_attempts): its page of attempts, its deliveries since a time. */
function endpointReads(rows: Collection<CallbackAttemptRow>) {
  return {
    /** One endpoint's attempts, newest first, a page at a time (endpoint_attempts). */
    async listForEndpoint(
      endpointId: string,
      limit: number,
      before?: PageCursor,
    ): Promise<Page<CallbackAttemptRow>> {
      return pageNewestFirst(rows, { endpointId }, 'at', limit, before);
    },

    /**
     * When one endpoint's delivered attempt ended at `since` or later, if one did (the newest started first): read
     * among the attempts started from `since` less `longestMs` (the longest an attempt takes) on.
     */
    async deliveredEndingSince(
      endpointId: string,
      since: Date,
      longestMs: number,
    ): Promise<Date | undefined> {
      const delivered = rows
        .find(
          { endpointId, at: { $gte: new Date(since.getTime() - longestMs) }, result: 'delivered' },
          { projection: { at: 1, durationMs: 1 } },
        )
        .sort({ at: -1, _id: -1 });
      for await (const row of delivered) {
        const ended = new Date(row.at.getTime() + row.durationMs);
        if (ended >= since) return ended;
      }
      return undefined;
    },
  };
}
