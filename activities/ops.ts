// The operator family's I/O: classify a failed run from the store, POST an alert to the operator webhook and
// stamp the run's transition marker off a confirmed claim.
import type { AlertClaim, AlertRetrySettings, AlertSend } from '../contract/activities';
import { callbackExhaustedAlert, opsAlertMaxWaitMs, runFailedAlert, type OperatorAlert } from '../domain/ops';
import type { RunOutcome } from '../domain/outcome';
import type { ClaimStore } from '../store/claims';
import type { RunStore } from '../store/runs';
import type { Metrics } from '../platform/metrics';
import { claimKeys } from '../domain/outcome';
import { ApplicationFailure } from '@temporalio/activity';
import { fitsStartToClose } from './activityContext';

export interface OpsDeps {
  runs: RunStore;
  claims: ClaimStore;
  /** Undefined: the operator family is off. */
  webhookUrl?: string;
  timeoutMs: number;
  /** OPS_ALERT_RETRY_HOURS. */
  retryHours: number;
  /** CLAIM_GRACE_SECONDS: a retrying alert renews its claim well inside it. */
  claimGraceSeconds: number;
  now: () => Date;
  /** Counts each POST by alert kind and how it went; absent: nothing is recorded. */
  metrics?: Pick<Metrics, 'operatorAlert'>;
  log?: (line: string) => void;
}

/** The Idempotency-Key header: the alert's episode key, stable across attempts, replicas and sweeps. */
export const alertIdempotencyKey = (alert: OperatorAlert): string => claimKeys.ops(alert.episodeKey);

/**
 * How long a send that went through is retried into the store (Mongo restarting). The attempt must fit the
 * dispatcher's 30 s start-to-close: claim check (≤ 5 s server selection) + webhook (10 s) + this + a last try
 * started just before it (≤ 5 s) = 28 s.
 */
const SETTLE_WITHIN_MS = 8_000;

/** Room beyond the webhook's timeout and the settle: the last try of the settle, and the report. */
const AFTER_REQUEST_MS = 5_000;

export function createOpsActivities(deps: OpsDeps) {
  /**
   * Records a send that went through. Mongo may be restarting: try for a while before giving up, because an
   * activity that fails here is retried and sends the alert again (the Idempotency-Key is then all that is left).
   */
  async function settleAfterSend(claim: AlertClaim): Promise<void> {
    const deadline = Date.now() + SETTLE_WITHIN_MS;
    for (;;) {
      try {
        // False: our claim went stale and another holder took it over; it sends under its own claim.
        await deps.claims.markDelivered(claim.key, claim.holder);
        return;
      } catch (err) {
        if (Date.now() >= deadline) throw err;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
  }

  /** One POST; a retry after a send that went through answers already_sent (see postOperatorAlert). */
  async function postOnce(alert: OperatorAlert, claim?: AlertClaim): Promise<AlertSend> {
    const startedAt = Date.now();
    if (!deps.webhookUrl) throw ApplicationFailure.nonRetryable('OPS_ALERT_WEBHOOK_URL is not set', 'OpsOff');
    if (claim && (await deps.claims.wasDelivered(claim.key))) return 'already_sent';
    // The claim's answer came too late for the request and its settle: Temporal's next attempt may have sent it.
    if (!fitsStartToClose(startedAt, deps.timeoutMs + SETTLE_WITHIN_MS + AFTER_REQUEST_MS)) {
      const detail =
        'not sent: too little of its attempt left for the request (the store was slow before it)';
      deps.log?.(`operator alert ${alert.episodeKey}: ${detail}`);
      throw new Error(detail);
    }
    const res = await fetch(deps.webhookUrl, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'flow-notify-ops/1',
        'idempotency-key': alertIdempotencyKey(alert),
      },
      body: JSON.stringify(alert),
      redirect: 'error',
      signal: AbortSignal.timeout(deps.timeoutMs),
    });
    await res.body?.cancel();
    if (!res.ok) throw new Error(`operator webhook answered ${res.status}`);
    if (claim) await settleAfterSend(claim);
    return 'sent';
  }

  return {
    async opsAlertSettings(): Promise<AlertRetrySettings> {
      return {
        retryForMs: Math.round(deps.retryHours * 3600_000),
        maxWaitMs: opsAlertMaxWaitMs(deps.claimGraceSeconds),
      };
    },

    /** classify, from the run as persisted now: undefined when the run owes the operator nothing. */
    async classifyFailedRun(outcome: RunOutcome): Promise<OperatorAlert | undefined> {
      if (!deps.webhookUrl || outcome.kind !== 'run_failed') return undefined;
      const run = await deps.runs.getById(outcome.runId);
      return run ? runFailedAlert(run, outcome.episodeId, outcome.occurredAt) : undefined;
    },

    /** The alert for a callback that gave up; undefined when the operator family is off. */
    async callbackExhaustedAlert(
      outcome: RunOutcome,
      attempts: number,
      lastError: string,
    ): Promise<OperatorAlert | undefined> {
      if (!deps.webhookUrl) return undefined;
      return callbackExhaustedAlert(outcome, attempts, lastError, deps.now().toISOString());
    },

    /**
     * One POST of the alert; a non-2xx answer or a network error throws, so Temporal retries with backoff.
     *
     * With the dispatcher's claim, the send is settled in the store right after the 2xx, inside this activity,
     * and a retry checks it first: a worker that dies between the receiver's 2xx and the activity's completion
     * must not make the retry send the alert again. The sliver left (a death between the 2xx and that write) is
     * covered by the Idempotency-Key header, the same on every attempt, so a receiver can dedupe it.
     */
    async postOperatorAlert(alert: OperatorAlert, claim?: AlertClaim): Promise<AlertSend> {
      try {
        const sent = await postOnce(alert, claim);
        deps.metrics?.operatorAlert(alert.kind, sent);
        return sent;
      } catch (err) {
        deps.metrics?.operatorAlert(alert.kind, 'failed');
        throw err;
      }
    },

    /**
     * The transition marker, certified off the settled claim (wasDelivered), never off a pending one. Only for
     * alerts about their run: a push_config_fault is about a push service origin and only filed under whichever
     * run met it first, whose marker it must not touch.
     */
    async stampOpsMarker(alert: OperatorAlert): Promise<boolean> {
      if (alert.kind === 'push_config_fault') return false;
      if (!(await deps.claims.wasDelivered(claimKeys.ops(alert.episodeKey)))) return false;
      await deps.runs.stampOpsMarker(alert.runId, alert.episodeKey, deps.now());
      return true;
    },
  };
}
