// callback_recovers: one row per recover of a team's callbacks that gave up (POST /callbacks/recover), its progress
// written by the recover workflow as it goes, so GET /callbacks/recover/:id answers after Temporal's retention too.
// Kept 30 days: a TTL index where the server has one.
import type { Db } from 'mongodb';
import type { RecoverCounts } from '../../contract/workflows';
import { CLAIM_RETENTION_SECONDS } from '../../domain/outcome';
import type { IndexSpec } from '../mongo';

export interface CallbackRecoverRow extends Omit<RecoverCounts, 'waitingForBudgetUntil'> {
  _id: string;
  /** While the recover waits for the team's redelivery budget: when a slot frees; null or absent otherwise. */
  waitingForBudgetUntil?: Date | null;
  teamId: string;
  status: 'running' | 'completed';
  since: Date;
  until: Date;
  createdAt: Date;
  updatedAt: Date;
}

export const callbackRecoverIndexes: IndexSpec[] = [
  {
    collection: 'callback_recovers',
    key: { createdAt: 1 },
    options: { name: 'created_ttl', expireAfterSeconds: CLAIM_RETENTION_SECONDS },
  },
];

/** Which recover: its id, team and window. */
export interface RecoverRef {
  id: string;
  teamId: string;
  since: Date;
  until: Date;
}

const identity = (recover: RecoverRef, now: Date) => ({
  teamId: recover.teamId,
  since: recover.since,
  until: recover.until,
  createdAt: now,
});

export type CallbackRecoverStore = ReturnType<typeof createCallbackRecoverStore>;

export function createCallbackRecoverStore(db: Db) {
  const rows = db.collection<CallbackRecoverRow>('callback_recovers');
  return {
    /**
     * The recover's row as the API opens it, after its workflow started (a refused start writes nothing). The
     * workflow's first progress may have written it already: then this changes nothing.
     */
    async open(recover: RecoverRef, now: Date): Promise<void> {
      await rows.updateOne(
        { _id: recover.id },
        {
          $setOnInsert: {
            ...identity(recover, now),
            status: 'running',
            found: 0,
            skipped: 0,
            sent: 0,
            delivered: 0,
            failed: 0,
            held: 0,
            stoppedAtMax: false,
            updatedAt: now,
          },
        },
        { upsert: true },
      );
    },

    /** The workflow's running totals (set, not added: a retried write changes nothing). */
    async saveProgress(
      recover: RecoverRef,
      counts: RecoverCounts,
      completed: boolean,
      now: Date,
    ): Promise<void> {
      const { waitingForBudgetUntil, ...totals } = counts;
      const waiting = waitingForBudgetUntil && !completed ? new Date(waitingForBudgetUntil) : null;
      await rows.updateOne(
        { _id: recover.id },
        {
          $set: {
            ...totals,
            waitingForBudgetUntil: waiting,
            updatedAt: now,
            ...(completed ? { status: 'completed' as const } : {}),
          },
          $setOnInsert: { ...identity(recover, now), ...(completed ? {} : { status: 'running' as const }) },
        },
        { upsert: true },
      );
    },

    /** One recover of the caller's team; null when unknown there. */
    async getForTeam(teamId: string, id: string): Promise<CallbackRecoverRow | null> {
      return rows.findOne({ _id: id, teamId });
    },
  };
}
