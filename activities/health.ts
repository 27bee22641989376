// The run-health workflow's I/O: its settings, the run's persisted status and its own saved state.
import type { HealthSettings, RecordedProgress, RecordedSpend } from '../contract/activities';
import type { HealthState } from '../domain/health';
import type { RunStatus } from '../domain/runStatus';
import type { EventStore } from '../store/events';
import type { RunHealthStore } from '../store/runHealth';
import type { RunStore } from '../store/runs';

export interface HealthDeps {
  runs: RunStore;
  runHealth: RunHealthStore;
  /** The runs' events: the spend a run reported, read at its end. */
  events: Pick<EventStore, 'latestSpend' | 'progressSince'>;
  /** STALL_AFTER_SECONDS and HEALTH_REAP_SECONDS: run health's settings are the worker's own. */
  stallAfterSeconds: number;
  healthReapSeconds: number;
  /** Whether the operator family is on (health alerts go through it). */
  opsAlerts: boolean;
  /** The API processes' batch window (healthBatchMs): a stall due waits it for progress they still hold. */
  batchGraceMs?: number;
  now: () => Date;
}

export function createHealthActivities(deps: HealthDeps) {
  return {
    /**
     * Run health's settings: the worker's config and the run as persisted (its budget), never what the first
     * process to signal the run happened to know; `withSaved`, also the state its last execution saved.
     */
    async healthSettings(runId: string, withSaved = false): Promise<HealthSettings> {
      const [run, saved] = await Promise.all([
        deps.runs.getById(runId),
        withSaved ? deps.runHealth.getState(runId) : undefined,
      ]);
      return {
        ...(saved ? { saved } : {}),
        options: {
          stallAfterSeconds: deps.stallAfterSeconds,
          reapAfterSeconds: deps.healthReapSeconds,
          opsAlerts: deps.opsAlerts,
          ...(deps.batchGraceMs ? { batchGraceMs: deps.batchGraceMs } : {}),
        },
        ...(run?.budget ? { budgetLimit: run.budget.limit } : {}),
      };
    },

    /** The run's persisted status: a stall about to fire is cancelled when the run is in fact waiting. */
    async persistedRunStatus(runId: string): Promise<RunStatus | undefined> {
      return (await deps.runs.getById(runId))?.status;
    },

    async runEndedAt(runId: string): Promise<number | undefined> {
      return (await deps.runs.getById(runId))?.endedAt?.getTime();
    },

    async recordedSpend(runId: string): Promise<RecordedSpend | undefined> {
      const latest = await deps.events.latestSpend(runId);
      return latest && { spent: latest.spent, writtenAt: latest.writtenAt.getTime() };
    },

    async recordedProgressSince(runId: string, since: number): Promise<RecordedProgress | undefined> {
      const progress = await deps.events.progressSince(runId, new Date(since));
      return progress && { first: progress.first.getTime(), newest: progress.newest.getTime() };
    },

    async saveHealth(state: HealthState): Promise<void> {
      await deps.runHealth.save(state, deps.now());
    },

    async reapHealth(runId: string): Promise<void> {
      await deps.runHealth.remove(runId);
    },
  };
}
