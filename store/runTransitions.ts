// run_transitions: one row per status transition of a run, keyed <runId>#<revision>. Inserting the unique _id
// is the transition's win: FerretDB v1 evaluates an update's filter and its write apart, so two conditional
// status updates can both match; only one insert of a key can succeed. The row carries the whole transition
// (the run's new fields and its events), so a transition whose writer died half-way is finished by the next
// caller that meets it instead of leaving the run stuck on a revision no one can take.
import type { Db } from 'mongodb';
import type { Run } from '../domain/run';
import type { RunStatus } from '../domain/runStatus';
import { isDuplicateKey } from './mongo';

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
  at: Date;
}

export const transitionKey = (runId: string, revision: number): string => `${runId}#${revision}`;

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
  };
}
