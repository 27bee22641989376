// The operator family's I/O: classify a failed run from the store, POST an alert to the operator webhook,
// stamp the run's transition marker off a confirmed claim, and the run-health workflow's reads and writes.
import type { HealthState } from '../domain/health';
import { runFailedAlert, type OperatorAlert } from '../domain/ops';
import type { RunOutcome } from '../domain/outcome';
import type { RunStatus } from '../domain/runStatus';
import type { ClaimStore } from '../store/claims';
import type { RunHealthStore } from '../store/runHealth';
import type { RunStore } from '../store/runs';
import { claimKeys } from '../domain/outcome';
import { ApplicationFailure } from '@temporalio/activity';
import { ConfigError } from '../config';

export interface OpsDeps {
  runs: RunStore;
  claims: ClaimStore;
  runHealth: RunHealthStore;
  /** Undefined: the operator family is off. */
  webhookUrl?: string;
  timeoutMs: number;
  now: () => Date;
}

export function createOpsActivities(deps: OpsDeps) {
  return {
    /** classify, from the run as persisted now: undefined when the run owes the operator nothing. */
    async classifyFailedRun(outcome: RunOutcome): Promise<OperatorAlert | undefined> {
      if (!deps.webhookUrl || outcome.kind !== 'run_failed') return undefined;
      const run = await deps.runs.getById(outcome.runId);
      return run ? runFailedAlert(run, outcome.episodeId, outcome.occurredAt) : undefined;
    },

    /** One POST of the alert; a non-2xx answer or a network error throws, so Temporal retries with backoff. */
    async postOperatorAlert(alert: OperatorAlert): Promise<void> {
      if (!deps.webhookUrl)
        throw ApplicationFailure.nonRetryable('OPS_ALERT_WEBHOOK_URL is not set', 'OpsOff');
      const res = await fetch(deps.webhookUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'flow-notify-ops/1' },
        body: JSON.stringify(alert),
        redirect: 'error',
        signal: AbortSignal.timeout(deps.timeoutMs),
      });
      await res.body?.cancel();
      if (!res.ok) throw new Error(`operator webhook answered ${res.status}`);
    },

    /** The transition marker, certified off the settled claim (wasDelivered), never off a pending one. */
    async stampOpsMarker(alert: OperatorAlert): Promise<boolean> {
      if (!(await deps.claims.wasDelivered(claimKeys.ops(alert.episodeKey)))) return false;
      await deps.runs.stampOpsMarker(alert.runId, alert.episodeKey, deps.now());
      return true;
    },

    /** The run's persisted status: a stall about to fire is cancelled when the run is in fact waiting. */
    async persistedRunStatus(runId: string): Promise<RunStatus | undefined> {
      return (await deps.runs.getById(runId))?.status;
    },

    async saveHealth(state: HealthState): Promise<void> {
      await deps.runHealth.save(state, deps.now());
    },

    async reapHealth(runId: string): Promise<void> {
      await deps.runHealth.remove(runId);
    },
  };
}

/**
 * startOperatorAlerts' refusal: with the webhook set and no claim store wired, every replica and every sweep
 * would send each alert again, so start-up stops instead of half-working.
 */
export function assertOperatorAlertsWired(
  config: { opsAlertWebhookUrl?: string },
  claims: ClaimStore | undefined,
): void {
  if (config.opsAlertWebhookUrl !== undefined && claims === undefined) {
    throw new ConfigError(
      'OPS_ALERT_WEBHOOK_URL is set but no claim store is wired: every replica would re-send each alert',
    );
  }
}
