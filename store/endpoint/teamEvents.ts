// team_events: every team event as first recorded, with its sequence (increasing per run in the order things
// happened, so a receiver can order events or drop stale ones: firstSequence). It is taken without a counter or a
// compare-and-swap: a unique index on (runId, sequence) makes an insert of a taken number fail (E11000), and the
// next number is tried; the event's id is the _id, so recording it again answers the row as first recorded (its
// sequence never changes).
import type { Db } from 'mongodb';
import {
  firstSequence,
  SEQUENCES_PER_MS,
  type SubscribableEventType,
  type TeamEvent,
  type TeamEventRun,
} from '../../domain/teamEvents';
import { CLAIM_RETENTION_SECONDS } from '../../domain/outcome';
import { isDuplicateKey, type IndexSpec } from '../mongo';
import { inPages } from '../paging';

export interface TeamEventRow extends Omit<TeamEvent, 'id' | 'run'> {
  _id: string;
  run: TeamEventRun;
  sequence: number;
  recordedAt: Date;
}

/** The event a row records, as its raiser raised it (with the run as recorded). */
export function teamEventOf(row: TeamEventRow): TeamEvent {
  const { _id, sequence: _sequence, recordedAt: _recordedAt, ...event } = row;
  return { id: _id, ...event };
}

/** What tells events apart (whose, which, when), without their bodies. */
export type TeamEventHeader = Pick<TeamEventRow, '_id' | 'teamId' | 'type' | 'occurredAt' | 'recordedAt'>;
const HEADER = { _id: 1, teamId: 1, type: 1, occurredAt: 1, recordedAt: 1 } as const;

export const teamEventIndexes: IndexSpec[] = [
  {
    collection: 'team_events',
    key: { runId: 1, sequence: -1 },
    options: { name: 'run_sequence', unique: true },
  },
  // A team's events in a window, oldest first (an endpoint's recover).
  {
    collection: 'team_events',
    key: { teamId: 1, recordedAt: 1, _id: 1 },
    options: { name: 'team_recorded' },
  },
  // Kept as long as claims: an event's deliveries read it for about a day and a half at most.
  {
    collection: 'team_events',
    key: { recordedAt: 1 },
    options: { name: 'recorded_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
];

/** Numbers one record tries past its first: events of one run at one instant (a bound never reached). */
const MAX_PROBES = SEQUENCES_PER_MS;

export type TeamEventStore = ReturnType<typeof createTeamEventStore>;

export function createTeamEventStore(db: Db) {
  const rows = db.collection<TeamEventRow>('team_events');

  return {
    /** The event as first recorded, recording it now (with the run's next sequence) if it never was. */
    async record(event: TeamEvent & { run: TeamEventRun }, now: Date): Promise<TeamEventRow> {
      const { id, ...rest } = event;
      const known = await rows.findOne({ _id: id });
      if (known) return known;
      const from = firstSequence(event);
      for (let sequence = from; sequence < from + MAX_PROBES; sequence++) {
        const row: TeamEventRow = { _id: id, ...rest, sequence, recordedAt: now };
        try {
          await rows.insertOne(row);
          return row;
        } catch (err) {
          if (!isDuplicateKey(err)) throw err;
          // The id taken (another recorder of this event won) or the number (another event of the run).
          const raced = await rows.findOne({ _id: id });
          if (raced) return raced;
        }
      }
      throw new Error(`team event ${id}: no free sequence from ${from}`);
    },

    async get(id: string): Promise<TeamEventRow | undefined> {
      return (await rows.findOne({ _id: id })) ?? undefined;
    },

    /** Several by id in one read, whole (the few the sweep found owed). */
    async getMany(ids: string[]): Promise<TeamEventRow[]> {
      if (!ids.length) return [];
      return rows.find({ _id: { $in: ids } }).toArray();
    },

    /** Several by id in one read, without their bodies (the sweep's notes of releases, to tell which are owed). */
    async headersOf(ids: string[]): Promise<TeamEventHeader[]> {
      if (!ids.length) return [];
      return rows.find<TeamEventHeader>({ _id: { $in: ids } }, { projection: HEADER }).toArray();
    },

    /**
     * A team's events of these types recorded in [since, until), oldest first, in pages of `pageSize` (an
     * endpoint's recover): one cursor, a batch per page, so a caller that found enough leaves the rest unread;
     * what tells them apart, never their bodies (a finished run's answer is up to 1 MB). Given `after` (the last
     * row a caller read), from the row after it.
     */
    listForTeam(
      teamId: string,
      types: SubscribableEventType[],
      since: Date,
      until: Date,
      pageSize: number,
      after?: { recordedAt: Date; id: string },
    ): AsyncGenerator<TeamEventHeader[]> {
      const cursor = rows
        .find<TeamEventHeader>(
          { teamId, recordedAt: { $gte: after?.recordedAt ?? since, $lt: until }, type: { $in: types } },
          { projection: HEADER, batchSize: pageSize },
        )
        .sort({ recordedAt: 1, _id: 1 });
      const pages = inPages<TeamEventHeader>(cursor, pageSize);
      if (!after) return pages;
      // The range starts at `after`'s time (what the index serves): its ties up to it were read before.
      const read = (row: TeamEventHeader) =>
        row.recordedAt.getTime() === after.recordedAt.getTime() && row._id <= after.id;
      return (async function* () {
        for await (const page of pages) {
          const fresh = page.filter((row) => !read(row));
          if (fresh.length) yield fresh;
        }
      })();
    },

    /**
     * Events recorded since `since`, in pages of `pageSize` (the sweep's window): one cursor, a batch per page,
     * without their bodies.
     */
    recordedSince(since: Date, pageSize: number): AsyncGenerator<TeamEventHeader[]> {
      const cursor = rows.find<TeamEventHeader>(
        { recordedAt: { $gte: since } },
        { batchSize: pageSize + 1, projection: HEADER },
      );
      return inPages(cursor, pageSize);
    },

    /** The sweep's reaper where the server has no TTL index (FerretDB v1). */
    async reapExpired(now: Date): Promise<number> {
      const cutoff = new Date(now.getTime() - CLAIM_RETENTION_SECONDS * 1000);
      return (await rows.deleteMany({ recordedAt: { $lt: cutoff } })).deletedCount;
    },
  };
}
