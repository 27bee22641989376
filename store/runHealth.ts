// run_health: the persisted twin of each run's health workflow, so the API can show it without asking Temporal.
import type { Db } from 'mongodb';
import type { HealthState } from '../domain/health';
import type { IndexSpec } from './mongo';

export interface RunHealthRow extends Omit<HealthState, 'lastLivenessAt' | 'terminalAt'> {
  _id: string; // run id
  lastLivenessAt: Date;
  terminalAt?: Date;
  updatedAt: Date;
}

export const runHealthIndexes: IndexSpec[] = [
  { collection: 'run_health', key: { teamId: 1, phase: 1 }, options: { name: 'team_phase' } },
];

export type RunHealthStore = ReturnType<typeof createRunHealthStore>;

export function createRunHealthStore(db: Db) {
  const health = db.collection<RunHealthRow>('run_health');
  return {
    async save(state: HealthState, now: Date): Promise<void> {
      const { terminalAt, lastLivenessAt, ...rest } = state;
      await health.replaceOne(
        { _id: state.runId },
        {
          ...rest,
          lastLivenessAt: new Date(lastLivenessAt),
          ...(terminalAt !== undefined ? { terminalAt: new Date(terminalAt) } : {}),
          updatedAt: now,
        },
        { upsert: true },
      );
    },

    async getForTeam(teamId: string, runId: string): Promise<RunHealthRow | null> {
      return health.findOne({ _id: runId, teamId });
    },

    /** The state as saved (what a health execution started afresh goes on from), or undefined. */
    async getState(runId: string): Promise<HealthState | undefined> {
      const row = await health.findOne({ _id: runId });
      if (!row) return undefined;
      const { _id, updatedAt: _updatedAt, lastLivenessAt, terminalAt, ...rest } = row;
      return {
        ...rest,
        lastLivenessAt: lastLivenessAt.getTime(),
        ...(terminalAt ? { terminalAt: terminalAt.getTime() } : {}),
      };
    },

    /** Terminal state is reaped once its grace has passed. */
    async remove(runId: string): Promise<void> {
      await health.deleteOne({ _id: runId });
    },
  };
}
