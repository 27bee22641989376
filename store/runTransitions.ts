// run_transitions: one row per status transition of a run, keyed <runId>#<revision>. Inserting the unique _id
// is the transition's win (only one insert of a key can succeed, on any MongoDB-wire server, upstream FerretDB v1
// included, whose conditional updates are not atomic). The row carries the whole transition
// (the run's new fields and its events), so a transition whose writer died half-way is finished by the next
// caller that meets it instead of leaving the run stuck on a revision no one can take. Only the run's current
// revision and the one before are ever read, so older rows are removed as the run moves on (two per run, and one
// left open by a writer that died after its status write until the sweep finishes it); a complete's answer stays
// out of the row (the winner stages it on the run until the status write, see Run.pendingAnswers).
import type { Db } from 'mongodb';
import type { Run } from '../domain/run';
import type { RunStatus } from '../domain/runStatus';
import { isDuplicateKey, type IndexSpec } from './mongo';

export interface RunTransition {
  _id: string;
  runId: string;
  teamId: string;
  /** The revision the transition was decided on; the run moves to revision + 1. */
  revision: number;
  op: string;
  status: RunStatus;
  set: Partial<Run>;
  unset: (keyof Run)[];
  events: { type: string; data?: Record<string, unknown> }[];
  /**
   * Set when the transition carries a final answer: the key of Run.pendingAnswers holding it until the status
   * write. The answer belongs in `set.finalAnswer` and in the data of the transition's events.
   */
  answer?: string;
  at: Date;
  /** Won, its status write and events not known done: the sweep finishes one left open past a live writer's time. */
  open?: true;
}

export const transitionKey = (runId: string, revision: number): string => `${runId}#${revision}`;

export const runTransitionIndexes: IndexSpec[] = [
  // listOpenBefore: the sweep's look for revisions won whose writer never finished them.
  { collection: 'run_transitions', key: { open: 1, at: 1 }, options: { name: 'open_at' } },
];

export type RunTransitionStore = ReturnType<typeof createRunTransitionStore>;

export function createRunTransitionStore(db: Db) {
  const rows = db.collection<RunTransition>('run_transitions');
  return {
    /** True: this transition won its revision. False: another one already holds it. */
    async claim(transition: RunTransition): Promise<boolean> {
      try {
        await rows.insertOne(transition);
        return true;
      } catch (err) {
        if (isDuplicateKey(err)) return false;
        throw err;
      }
    },

    async get(runId: string, revision: number): Promise<RunTransition | null> {
      return rows.findOne({ _id: transitionKey(runId, revision) });
    },

    /** Transitions still open that were decided before `before` (their run and revision), oldest first, at most `limit`. */
    async listOpenBefore(before: Date, limit: number): Promise<Pick<RunTransition, 'runId' | 'revision'>[]> {
      return rows
        .find({ open: true, at: { $lte: before } }, { projection: { _id: 0, runId: 1, revision: 1 } })
        .sort({ at: 1 })
        .limit(limit)
        .toArray();
    },

    /**
     * The revision's status write, events and health signal are done: its row is no longer open, and the row two
     * revisions back goes (only a revision's row and the one before it are ever read again) unless it is still
     * open: its writer died before its events, which the sweep writes from it (finishStuck). One round trip.
     */
    async settle(runId: string, revision: number): Promise<void> {
      const twoBack = { _id: transitionKey(runId, revision - 2), open: { $exists: false } };
      await rows.bulkWrite(
        [
          {
            updateOne: { filter: { _id: transitionKey(runId, revision) }, update: { $unset: { open: '' } } },
          },
          ...(revision >= 2 ? [{ deleteOne: { filter: twoBack } }] : []),
        ],
        { ordered: false },
      );
    },

    /**
     * Removes one revision's row, by its key; with `answer`, only the row of the transition that carried it (a
     * given-up complete's: the revision another caller took meanwhile keeps its own row).
     */
    async forget(runId: string, revision: number, answer?: string): Promise<void> {
      if (revision < 0) return;
      await rows.deleteOne({
        _id: transitionKey(runId, revision),
        ...(answer !== undefined ? { answer } : {}),
      });
    },
  };
}
