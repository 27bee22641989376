// The operator family's pure parts: the alert the webhook receives, and how a failed run is classified.
import { HEALTH_ALERT_KINDS, type HealthAlert } from './health';
import type { RunOutcome } from './outcome';
import { ERROR_MESSAGE_LISTED_CHARS, type Run } from './run';
import { headUnits } from './text';

export const OPERATOR_ALERT_KINDS = [
  'run_failed',
  'route_decision_error',
  ...HEALTH_ALERT_KINDS,
  'callback_exhausted',
  'push_config_fault',
  'endpoint_disabled',
] as const;
export type OperatorAlertKind = (typeof OPERATOR_ALERT_KINDS)[number];

export type Severity = 'info' | 'warning' | 'error' | 'critical';

/** The contract's operator alert, POSTed to OPS_ALERT_WEBHOOK_URL. */
export interface OperatorAlert {
  version: '1';
  kind: OperatorAlertKind;
  severity: Severity;
  runId: string;
  teamId: string;
  /** What the alert is about; its claim key is ops|<episodeKey>, so it is sent once. */
  episodeKey: string;
  summary: string;
  detail: Record<string, unknown>;
  /** When the condition was seen (not when this attempt was sent): stable across retries. */
  at: string;
}

/**
 * An error's message as an alert carries it: its head, as a listing of runs shows it (the whole one is the run's).
 * The alert is every retry's input in its workflow's history, a day of retries long.
 */
function alertMessage(message: string): { message: string; messageTruncated?: true } {
  const { head, cut } = headUnits(message, ERROR_MESSAGE_LISTED_CHARS);
  return cut ? { message: head, messageTruncated: true } : { message };
}

/** Error codes that point at the platform rather than the run's own work. */
const CRITICAL_CODES = new Set(['internal', 'database', 'db', 'router', 'queue', 'infrastructure']);

/**
 * classify: a code and a severity for a failed run, from the run as persisted. Its default arm: a run that is
 * not failed any more (it resumed or finished between the publish and the load) owes the operator nothing.
 */
export function classify(run: Run): { code: string; severity: Severity } | undefined {
  if (run.status !== 'failed') return undefined;
  const code = run.error?.code?.trim() || 'unknown';
  return { code, severity: CRITICAL_CODES.has(code.toLowerCase()) ? 'critical' : 'error' };
}

export function runFailedAlert(run: Run, episodeId: string, at: string): OperatorAlert | undefined {
  const classified = classify(run);
  if (!classified) return undefined;
  return {
    version: '1',
    kind: 'run_failed',
    severity: classified.severity,
    runId: run._id,
    teamId: run.teamId,
    episodeKey: episodeId,
    summary: `Run ${run._id} (${run.title}) failed: ${classified.code}`,
    detail: {
      code: classified.code,
      ...(run.error?.message !== undefined ? alertMessage(run.error.message) : { message: null }),
      ownerId: run.ownerId,
    },
    at,
  };
}

export interface RouteDecisionError {
  runId: string;
  teamId: string;
  decisionId: string;
  error: { code: string; message: string };
}

/** Each router decision is its own episode: however often it is reported, it alerts once. */
export function routeDecisionAlert(report: RouteDecisionError, at: string): OperatorAlert {
  return {
    version: '1',
    kind: 'route_decision_error',
    severity: 'error',
    runId: report.runId,
    teamId: report.teamId,
    episodeKey: `route:${report.runId}:${report.decisionId}`,
    summary: `Router decision ${report.decisionId} of run ${report.runId} failed: ${report.error.code}`,
    detail: { decisionId: report.decisionId, code: report.error.code, ...alertMessage(report.error.message) },
    at,
  };
}

export function healthAlert(alert: HealthAlert, runId: string, teamId: string, at: string): OperatorAlert {
  return { version: '1', ...alert, runId, teamId, at };
}

/**
 * A run's completion callback gave up (its schedule ran out, or the receiver or the outbound guard refused it):
 * the launcher's receiver lost it unless someone redelivers it. One per episode.
 */
export function callbackExhaustedAlert(
  outcome: Pick<RunOutcome, 'runId' | 'teamId' | 'episodeId'>,
  attempts: number,
  lastError: string,
  at: string,
): OperatorAlert {
  const { runId, teamId, episodeId } = outcome;
  return {
    version: '1',
    kind: 'callback_exhausted',
    severity: 'warning',
    runId,
    teamId,
    episodeKey: `callback:${episodeId}`,
    summary: `The completion callback of run ${runId} gave up after ${attempts} attempt${attempts === 1 ? '' : 's'}: ${lastError}`,
    detail: {
      episodeId,
      attempts,
      lastError,
      redeliver: `/api/v1/runs/${runId}/episodes/${episodeId}/callback/redeliver`,
    },
    at,
  };
}

export interface PushConfigFault {
  /** The push service's origin (scheme, host, port of the endpoint). */
  origin: string;
  /** 401 or 403. */
  status: number;
  /** The evidence: distinct subscriptions of distinct users it refused, accepting nothing, within the window. */
  subscriptions: number;
  users: number;
  windowSeconds: number;
  /** The episode that met it first: the alert is filed under its run. */
  runId: string;
  teamId: string;
  episodeId: string;
}

/**
 * A push service refuses our VAPID identity as a whole (401/403 to several subscriptions of several users, and
 * nothing accepted): nothing reaches its subscribers until an operator fixes the keys or subject. One device made
 * under another key is that device's problem (pruned), never this. Keyed by origin and UTC hour, so it alerts at
 * most once an hour per push service.
 */
export function pushConfigFaultAlert(fault: PushConfigFault, at: Date): OperatorAlert {
  const hour = at.toISOString().slice(0, 13);
  const minutes = Math.round(fault.windowSeconds / 60);
  return {
    version: '1',
    kind: 'push_config_fault',
    severity: 'critical',
    runId: fault.runId,
    teamId: fault.teamId,
    episodeKey: `push-config:${fault.origin}:${hour}`,
    summary:
      `Push service ${fault.origin} refuses our VAPID identity as a whole: it answered ${fault.status} to ` +
      `${fault.subscriptions} subscriptions of ${fault.users} users within ${minutes} min and accepted none. ` +
      'Check VAPID_PUBLIC_KEY, VAPID_PRIVATE_KEY and VAPID_SUBJECT (after a deliberate key change, devices must ' +
      'subscribe again)',
    detail: {
      origin: fault.origin,
      status: fault.status,
      subscriptions: fault.subscriptions,
      users: fault.users,
      windowSeconds: fault.windowSeconds,
      hour,
      episodeId: fault.episodeId,
    },
    at: at.toISOString(),
  };
}

/**
 * A team endpoint failed for ENDPOINT_DISABLE_AFTER_SECONDS without one success and was disabled: the team's
 * system hears nothing more until an admin enables it again (and recovers what it missed). One per disabling.
 */
export function endpointDisabledAlert(
  endpoint: { id: string; teamId: string; url: string; failingSince: Date; disabledAt: Date },
  runId: string,
  lastError: string,
): OperatorAlert {
  const { id, teamId, failingSince, disabledAt } = endpoint;
  return {
    version: '1',
    kind: 'endpoint_disabled',
    severity: 'warning',
    runId,
    teamId,
    episodeKey: `endpoint:${id}:disabled:${disabledAt.getTime()}`,
    summary: `Team ${teamId}'s endpoint ${id} failed since ${failingSince.toISOString()} without a success and was disabled`,
    detail: {
      endpointId: id,
      origin: new URL(endpoint.url).origin,
      failingSince: failingSince.toISOString(),
      lastError,
      enable: `/api/v1/endpoints/${id}`,
      recover: `/api/v1/endpoints/${id}/recover`,
    },
    at: disabledAt.toISOString(),
  };
}

/** An operator alert's first wait after a failed attempt; each wait doubles, up to opsAlertMaxWaitMs. */
export const OPS_ALERT_FIRST_WAIT_MS = 2000;

/** The wait after `wait`: doubled, up to the longest. */
export const nextOpsAlertWait = (wait: number, maxWaitMs: number): number => Math.min(wait * 2, maxWaitMs);

/** An alert's longest wait: a third of the claim's grace (it renews its claim between attempts), 1 s to 10 min. */
export const opsAlertMaxWaitMs = (claimGraceSeconds: number): number =>
  Math.max(1000, Math.min(600_000, Math.floor((claimGraceSeconds * 1000) / 3)));

/**
 * The attempts an alert makes before it gives up, as its workflow schedules them. Each is about a dozen history
 * events in one execution, which Temporal ends at 51,200: OPS_ALERT_MAX_TRIES keeps well inside that.
 */
export function opsAlertTries(retryHours: number, claimGraceSeconds: number): number {
  const retryForMs = retryHours * 3600_000;
  const maxWaitMs = opsAlertMaxWaitMs(claimGraceSeconds);
  let tries = 1;
  let waited = 0;
  let wait = OPS_ALERT_FIRST_WAIT_MS;
  // The doubling waits, then the rest of the window at the longest one.
  for (; wait < maxWaitMs && waited + wait <= retryForMs; wait = nextOpsAlertWait(wait, maxWaitMs)) {
    waited += wait;
    tries++;
  }
  return tries + Math.max(0, Math.floor((retryForMs - waited) / maxWaitMs));
}

export const OPS_ALERT_MAX_TRIES = 3000;
