// events: the run's event stream (pause, failure and progress events), appended in order.
import { randomUUID } from 'node:crypto';
import type { Db } from 'mongodb';
import { NOT_PROGRESS } from '../domain/health';
import { isDuplicateKey, type IndexSpec } from './mongo';

export interface RunEvent {
  _id: string;
  runId: string;
  teamId: string;
  type: string;
  data: Record<string, unknown>;
  at: Date;
}

export const eventIndexes: IndexSpec[] = [
  { collection: 'events', key: { runId: 1, at: 1 }, options: { name: 'run_timeline' } },
];

export type EventStore = ReturnType<typeof createEventStore>;

export function createEventStore(db: Db) {
  const events = db.collection<RunEvent>('events');
  return {
    /**
     * Appends in the given order; each event gets a strictly increasing time and its own id, or the id the caller
     * derived from what it records (a transition's revision), in which case a repeat writes nothing twice.
     */
    async append(
      run: { _id: string; teamId: string },
      items: { id?: string; type: string; data?: Record<string, unknown> }[],
      now: Date,
    ): Promise<RunEvent[]> {
      const docs = items.map((item, i) => ({
        _id: item.id ?? `evt_${randomUUID().replace(/-/g, '')}`,
        runId: run._id,
        teamId: run.teamId,
        type: item.type,
        data: item.data ?? {},
        at: new Date(now.getTime() + i),
      }));
      if (!docs.length) return docs;
      try {
        await events.insertMany(docs, { ordered: false });
      } catch (err) {
        // Only a repeat of derived ids is tolerated: those events are already there.
        const writeErrors = (err as { writeErrors?: unknown[] }).writeErrors;
        const repeats =
          items.every((item) => item.id !== undefined) &&
          (isDuplicateKey(err) ||
            (Array.isArray(writeErrors) &&
              writeErrors.every((e) => (e as { code?: number }).code === 11000)));
        if (!repeats) throw err;
      }
      return docs;
    },

    /**
     * The run's newest spend report (a usage event's cumulative `spent`) and when it was written; one indexed read
     * of the run's events, newest first, up to that report.
     */
    async latestSpend(runId: string): Promise<{ spent: number; writtenAt: Date } | undefined> {
      const [usage] = await events
        .find({ runId, type: 'usage' }, { projection: { data: 1, at: 1 } })
        .sort({ at: -1 })
        .limit(1)
        .toArray();
      const spent = usage?.data.spent;
      return typeof spent === 'number' ? { spent, writtenAt: usage.at } : undefined;
    },

    /**
     * When the run's first and newest events that are progress (run health's sense of it) written after `since`
     * were written; undefined when none was. Two indexed reads of one row each.
     */
    async progressSince(runId: string, since: Date): Promise<{ first: Date; newest: Date } | undefined> {
      const progress = { runId, type: { $nin: [...NOT_PROGRESS] }, at: { $gt: since } };
      const firstOf = async (order: 1 | -1) =>
        (
          await events
            .find(progress, { projection: { at: 1 } })
            .sort({ at: order })
            .limit(1)
            .toArray()
        )[0]?.at;
      const first = await firstOf(1);
      return first && { first, newest: (await firstOf(-1)) ?? first };
    },

    /**
     * Appends one event under an id the caller derives from what it records (e.g. the answer that resumed a
     * run), so an operation retried after a failure further on does not write it twice. False: already there.
     */
    async appendOnce(
      run: { _id: string; teamId: string },
      item: { id: string; type: string; data?: Record<string, unknown> },
      now: Date,
    ): Promise<boolean> {
      try {
        await events.insertOne({
          _id: item.id,
          runId: run._id,
          teamId: run.teamId,
          type: item.type,
          data: item.data ?? {},
          at: now,
        });
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    /** One event by its id (a transition's derived id), or null. */
    async get(runId: string, eventId: string): Promise<RunEvent | null> {
      return events.findOne({ _id: eventId, runId });
    },

    /** Takes back an event a request appended and then refused (its run had ended meanwhile). */
    async remove(runId: string, eventId: string): Promise<void> {
      await events.deleteOne({ _id: eventId, runId });
    },

    async listForRun(runId: string): Promise<RunEvent[]> {
      return events.find({ runId }).sort({ at: 1 }).toArray();
    },
  };
}
