// The operator family's pure parts: the alert the webhook receives, and how a failed run is classified.
import type { HealthAlert } from './health';
import type { Run } from './run';

export type OperatorAlertKind =
  'run_failed' | 'route_decision_error' | 'stall' | 'stall_recovered' | 'budget_warning' | 'budget_exceeded';

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
    detail: { code: classified.code, message: run.error?.message ?? null, ownerId: run.ownerId },
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
    detail: { decisionId: report.decisionId, code: report.error.code, message: report.error.message },
    at,
  };
}

export function healthAlert(alert: HealthAlert, runId: string, teamId: string, at: string): OperatorAlert {
  return { version: '1', ...alert, runId, teamId, at };
}
