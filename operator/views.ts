// explain's assembly, the pure part: store rows and decoded histories turned into the views of the explanation.
// Nothing here reads; operator/explain.ts reads and calls these.
import type { WorkflowExecutionInfo } from '@temporalio/client';
import { claimKeys } from '../domain/outcome';
import type { OperatorAlert } from '../domain/ops';
import type { Run } from '../domain/run';
import type { CallbackAttemptRow } from '../store/callback/attempts';
import type { ClaimRow } from '../store/claims';
import type { PushDelivery } from '../store/push/deliveries';
import type { PushHoldRow } from '../store/push/holds';
import type { PushReceiptRow } from '../store/push/receipts';
import type { Interaction } from '../store/interactions';
import type {
  CallbackAttemptView,
  ClaimView,
  DeviceReceiptView,
  OperatorAlertView,
  PushDeliveryView,
  PushHeldView,
  RunExplanation,
  WorkflowView,
} from './explanation';
import type { History } from './history';

/** One workflow execution of the run with its decoded history. */
export interface Execution {
  info: WorkflowExecutionInfo;
  history: History;
}

export function claimView(key: string, row: ClaimRow | undefined): ClaimView {
  if (!row) return { key, state: 'absent' };
  return {
    key,
    state: row.delivered ? 'delivered' : 'pending',
    ...(row.delivered ? { result: row.result ?? 'delivered' } : {}),
    at: row.sent_at.toISOString(),
    holder: row.holder,
  };
}

function originOf(url: string): string | null {
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

export function runView(run: Run | null | undefined): RunExplanation['run'] {
  if (!run) return null;
  return {
    teamId: run.teamId,
    ownerId: run.ownerId,
    title: run.title,
    status: run.status,
    createdAt: run.createdAt.toISOString(),
    ...(run.endedAt ? { endedAt: new Date(run.endedAt).toISOString() } : {}),
    ...(run.callback ? { callbackOrigin: originOf(run.callback.url) ?? '?' } : {}),
  };
}

export function pushDeliveryView(
  row: PushDelivery,
  endpoint: string | undefined,
  receipts: DeviceReceiptView,
): PushDeliveryView {
  return {
    userId: row.userId,
    subscriptionId: row.subscriptionId,
    pushService: endpoint ? originOf(endpoint) : null,
    at: row.at.toISOString(),
    ...receipts,
  };
}

/** Who answered a run's interactions and when, by interaction id. */
export type Answers = Map<string, { userId: string; at: Date }>;

export function answersOf(interactions: Interaction[]): Answers {
  return new Map(
    interactions.flatMap((i) =>
      i.status === 'answered' && i.answeredBy && i.answeredAt
        ? [[i._id, { userId: i.answeredBy, at: i.answeredAt }] as const]
        : [],
    ),
  );
}

/** The receipt rows of one (episode, device): a retried fan-out may have minted more than one. */
export const receiptKey = (episodeId: string, subscriptionId: string): string =>
  `${episodeId}|${subscriptionId}`;

export function receiptsByDevice(rows: PushReceiptRow[]): Map<string, PushReceiptRow[]> {
  const byDevice = new Map<string, PushReceiptRow[]>();
  for (const row of rows) {
    const key = receiptKey(row.episodeId, row.subscriptionId);
    byDevice.set(key, [...(byDevice.get(key) ?? []), row]);
  }
  return byDevice;
}

/** One device's receipts merged (the earliest time of each event), and its person's answer to the episode's question. */
export function deviceReceiptView(
  rows: PushReceiptRow[] | undefined,
  answer: { userId: string; at: Date } | undefined,
  userId: string,
): DeviceReceiptView {
  const earliest = (pick: (row: PushReceiptRow) => Date | undefined): Date | undefined =>
    (rows ?? [])
      .map(pick)
      .filter((at): at is Date => at !== undefined)
      .sort((a, b) => a.getTime() - b.getTime())[0];
  const shownAt = earliest((r) => r.shownAt);
  const clickedAt = earliest((r) => r.clickedAt);
  const acted = (rows ?? [])
    .filter((r) => r.actedAt)
    .sort((a, b) => a.actedAt!.getTime() - b.actedAt!.getTime())[0];
  const reported = shownAt ?? clickedAt ?? acted;
  return {
    receipt: reported ? 'reported' : 'none',
    ...(shownAt ? { shownAt: shownAt.toISOString() } : {}),
    ...(clickedAt ? { clickedAt: clickedAt.toISOString() } : {}),
    ...(acted ? { action: acted.action, actedAt: acted.actedAt!.toISOString() } : {}),
    ...(answer?.userId === userId ? { answeredAt: answer.at.toISOString() } : {}),
  };
}

export function pushHeldView(row: PushHoldRow): PushHeldView {
  return {
    userId: row.userId,
    reason: row.reason,
    heldAt: row.at.toISOString(),
    releaseAt: row.releaseAt.toISOString(),
    ...(row.digestId ? { digestId: row.digestId } : {}),
    ...(row.digestSentAt ? { digestSentAt: row.digestSentAt.toISOString() } : {}),
    ...(row.digestGaveUpAt ? { digestGaveUpAt: row.digestGaveUpAt.toISOString() } : {}),
    ...(row.optedOutAt ? { optedOutAt: row.optedOutAt.toISOString() } : {}),
  };
}

export function callbackAttemptView(a: CallbackAttemptRow): CallbackAttemptView {
  const detail = a.result === 'delivered' ? undefined : a.status ? `http ${a.status}` : a.error;
  return {
    attempt: a.attempt,
    at: a.at.toISOString(),
    result: a.result,
    ...(a.status !== undefined ? { status: a.status } : {}),
    ...(detail !== undefined ? { detail } : {}),
    ...(a.retryAfterSeconds !== undefined ? { retryAfterSeconds: a.retryAfterSeconds } : {}),
    durationMs: a.durationMs,
    ...(a.nextWaitSeconds !== undefined ? { nextWaitSeconds: a.nextWaitSeconds } : {}),
    ...(a.nextAttemptAt !== undefined ? { nextAttemptAt: a.nextAttemptAt.toISOString() } : {}),
    trigger: a.trigger,
    activityAttempts: a.activityAttempt ?? 1,
    workflowId: a.workflowId ?? '',
    workflowRunId: a.workflowRunId ?? '',
  };
}

/** Each family's branch result, from an episode workflow's result. */
export function branchesOf(result: unknown): Record<string, string> | undefined {
  if (!result || typeof result !== 'object') return undefined;
  const r = result as Record<string, unknown>;
  return Object.fromEntries(
    ['push', 'callback', 'ops'].filter((k) => typeof r[k] === 'string').map((k) => [k, r[k] as string]),
  );
}

export function temporalUiLink(base: string, namespace: string, workflowId: string, runId: string): string {
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/${encodeURIComponent(runId)}/history`;
}

export function workflowView(
  { info, history: h }: Execution,
  ui: { temporalUiUrl: string; namespace: string },
): WorkflowView {
  return {
    workflowId: info.workflowId,
    runId: info.runId,
    type: info.type,
    status: info.status.name,
    startTime: info.startTime.toISOString(),
    ...(info.closeTime ? { closeTime: info.closeTime.toISOString() } : {}),
    uiUrl: temporalUiLink(ui.temporalUiUrl, ui.namespace, info.workflowId, info.runId),
    historyEvents: h.events,
    historyTruncated: h.truncated,
    activities: h.activities.map((a) => a.view),
    localActivities: h.localActivities,
    temporalActions: h.actions,
    workflowTaskFailures: h.workflowTaskFailures,
    ...(h.failure ? { failure: h.failure } : {}),
  };
}

/** Operator alerts: every ops| claim of the run, joined with the postOperatorAlert sends in the histories. */
export function gatherAlerts(
  episodeIds: string[],
  prefixed: ClaimRow[],
  claimByKey: Map<string, ClaimRow>,
  executions: Execution[],
): OperatorAlertView[] {
  const alerts = new Map<string, OperatorAlertView>();
  const ensure = (episodeKey: string): OperatorAlertView => {
    let alert = alerts.get(episodeKey);
    if (!alert) {
      const key = claimKeys.ops(episodeKey);
      alert = { episodeKey, claim: claimView(key, claimByKey.get(key)), sends: [] };
      alerts.set(episodeKey, alert);
    }
    return alert;
  };
  for (const id of episodeIds) if (claimByKey.has(claimKeys.ops(id))) ensure(id);
  for (const row of prefixed) ensure(row._id.slice(claimKeys.ops('').length));
  for (const { info, history } of executions) {
    for (const activity of history.activities) {
      if (activity.view.type !== 'postOperatorAlert' || activity.view.outcome === 'open') continue;
      const sent = activity.input[0] as OperatorAlert | undefined;
      if (!sent?.episodeKey) continue;
      const alert = ensure(sent.episodeKey);
      alert.kind ??= sent.kind;
      alert.severity ??= sent.severity;
      alert.summary ??= sent.summary;
      alert.sends.push({
        at: activity.view.closedAt ?? activity.view.scheduledAt,
        result: activity.view.outcome === 'completed' ? String(activity.result) : 'failed',
        ...(activity.view.outcome !== 'completed' && activity.view.failure
          ? { failure: activity.view.failure }
          : {}),
        activityAttempts: activity.view.attempts,
        workflowId: info.workflowId,
        workflowRunId: info.runId,
      });
    }
  }
  return [...alerts.values()];
}
