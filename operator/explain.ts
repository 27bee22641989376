// flow-notify explain: "what did we tell whom about run X", gathered for an operator from the claims, the push
// deliveries, the callback attempt log and the Temporal histories of every workflow the run touched. Reads only; everything is bounded
// (episodes, workflows, history events, rows) and a listing cut short says so.
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { claimKeys } from '../domain/outcome';
import type { OperatorAlert } from '../domain/ops';
import type { CallbackAttemptStore } from '../store/callbackAttempts';
import type { ClaimReader, ClaimRow } from '../store/claims';
import type { EpisodeStore } from '../store/episodes';
import type { PushDeliveryStore } from '../store/pushDeliveries';
import type { PushSubscriptionStore } from '../store/pushSubscriptions';
import type { RunStore } from '../store/runs';
import { healthWorkflowId, workflowTypes } from '../workflows/ids';

const EventType = temporal.api.enums.v1.EventType;

export const EXPLAIN_LIMITS = {
  episodes: 50,
  workflows: 100,
  /** Per workflow execution: an episode has a few dozen events; a long-lived health workflow continues-as-new. */
  historyEvents: 5_000,
  deliveriesPerEpisode: 500,
  /** Per run: the schedule's attempts of every episode plus its (rate-limited) redeliveries. */
  callbackAttempts: 1000,
  alertClaims: 200,
};

/** Histories read at once: a run with many workflows must not open a hundred streams on the frontend. */
const HISTORY_READS_IN_FLIGHT = 8;

async function mapLimited<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const lane = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane));
  return results;
}

/** Run ids are generated (`run_<hex>`); anything else is refused before it reaches a visibility query. */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

export interface ExplainDeps {
  runs: Pick<RunStore, 'getById'>;
  episodes: Pick<EpisodeStore, 'listForRunAnyTeam'>;
  claims: ClaimReader;
  pushDeliveries: Pick<PushDeliveryStore, 'listForEpisode'>;
  callbackAttempts: Pick<CallbackAttemptStore, 'listForRun'>;
  pushSubscriptions: Pick<PushSubscriptionStore, 'endpointsByIds'>;
  client: Client;
  namespace: string;
  /** Base of the Temporal UI, e.g. http://localhost:8233. */
  temporalUiUrl: string;
  limits?: Partial<typeof EXPLAIN_LIMITS>;
}

export interface ClaimView {
  key: string;
  state: 'absent' | 'pending' | 'delivered';
  /** How it ended, once delivered (delivered, not_addressable, gave_up: …). */
  result?: string;
  /** Claimed at while pending, settled at once delivered. */
  at?: string;
  holder?: string;
}

export interface PushDeliveryView {
  userId: string;
  subscriptionId: string;
  /** The push service's origin; null when the subscription was pruned since. */
  pushService: string | null;
  at: string;
}

/** One row of the callback attempt log (callback_attempts): what the receiver saw, attempt by attempt. */
export interface CallbackAttemptView {
  /** 1-based, across every delivery of the episode (its schedule, re-runs, redeliveries). */
  attempt: number;
  /** When the request left. */
  at: string;
  /** delivered, retry or stop. */
  result: string;
  status?: number;
  /** Why it did not deliver: http <status>, or the error category (timeout, network error, refused: …). */
  detail?: string;
  retryAfterSeconds?: number;
  durationMs: number;
  /** The wait before the next attempt of the schedule, when one followed. */
  nextWaitSeconds?: number;
  /** episode (its own schedule) or redeliver. */
  trigger: string;
  /** Temporal's attempts of this one activity (more than 1: a worker was lost mid-attempt). */
  activityAttempts: number;
  workflowId: string;
  workflowRunId: string;
}

export interface EpisodeView {
  episodeId: string;
  kind?: string;
  recordedAt?: string;
  families: Record<keyof typeof claimKeys, ClaimView>;
  /** Each family's branch result, from the newest closed execution of the episode workflow. */
  branches?: Record<string, string>;
  pushDeliveries: PushDeliveryView[];
  pushDeliveriesTruncated: boolean;
  callbackAttempts: CallbackAttemptView[];
}

export interface AlertSendView {
  at: string;
  /** sent, already_sent, or failed (the webhook refused past the retries). */
  result: string;
  failure?: string;
  activityAttempts: number;
  workflowId: string;
  workflowRunId: string;
}

export interface OperatorAlertView {
  episodeKey: string;
  kind?: string;
  severity?: string;
  summary?: string;
  claim: ClaimView;
  sends: AlertSendView[];
}

export interface ActivityView {
  type: string;
  activityId: string;
  scheduledAt: string;
  closedAt?: string;
  /** completed, failed, timed_out, canceled, or open. */
  outcome: string;
  attempts: number;
  /** The last failure: of the final attempt when it failed, else of the attempt before a success. */
  failure?: string;
}

export interface WorkflowView {
  workflowId: string;
  runId: string;
  type: string;
  status: string;
  startTime: string;
  closeTime?: string;
  uiUrl: string;
  historyEvents: number;
  historyTruncated: boolean;
  activities: ActivityView[];
  /** Activities run inside workflow tasks (claims, store writes): counted, not listed. */
  localActivities: number;
  workflowTaskFailures: string[];
  failure?: string;
}

export interface RunExplanation {
  version: 1;
  runId: string;
  run: {
    teamId: string;
    ownerId: string;
    title: string;
    status: string;
    createdAt: string;
    endedAt?: string;
    /** The callback receiver's origin only: a path or query may carry a token. */
    callbackOrigin?: string;
  } | null;
  episodes: EpisodeView[];
  operatorAlerts: OperatorAlertView[];
  workflows: WorkflowView[];
  /** callbackAttempts: the run has more than the limit; the newest are shown. */
  truncated: { episodes: boolean; workflows: boolean; callbackAttempts: boolean };
  temporalUiUrl: string;
}

const iso = (d: Date | undefined): string | undefined => d?.toISOString();

function eventTime(ts: temporal.api.history.v1.IHistoryEvent['eventTime']): Date {
  if (!ts) return new Date(0);
  return new Date(Number(ts.seconds ?? 0) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6));
}

function decode(payloads: temporal.api.common.v1.IPayloads | null | undefined): unknown[] {
  return (payloads?.payloads ?? []).map((p) => {
    try {
      return defaultPayloadConverter.fromPayload(
        p as Parameters<typeof defaultPayloadConverter.fromPayload>[0],
      );
    } catch {
      return undefined; // an encoding this tool does not know: shown as absent
    }
  });
}

function claimView(key: string, row: ClaimRow | undefined): ClaimView {
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

interface ActivityRecord {
  view: ActivityView;
  input: unknown[];
  result: unknown;
}

interface History {
  events: number;
  truncated: boolean;
  activities: ActivityRecord[];
  localActivities: number;
  workflowTaskFailures: string[];
  result?: unknown;
  failure?: string;
}

/** Reads one execution's history, page by page, up to the event limit, and folds it into its activities. */
async function readHistory(
  deps: ExplainDeps,
  execution: { workflowId: string; runId: string },
  maxEvents: number,
): Promise<History> {
  const out: History = {
    events: 0,
    truncated: false,
    activities: [],
    localActivities: 0,
    workflowTaskFailures: [],
  };
  const bySchedule = new Map<string, ActivityRecord>();
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await deps.client.workflowService.getWorkflowExecutionHistory({
      namespace: deps.namespace,
      execution,
      maximumPageSize: Math.min(1000, maxEvents),
      nextPageToken,
    });
    for (const event of page.history?.events ?? []) {
      if (out.events >= maxEvents) {
        out.truncated = true;
        break;
      }
      out.events++;
      const at = eventTime(event.eventTime).toISOString();
      switch (event.eventType) {
        case EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: {
          const a = event.activityTaskScheduledEventAttributes!;
          const record: ActivityRecord = {
            view: {
              type: a.activityType?.name ?? '?',
              activityId: a.activityId ?? '',
              scheduledAt: at,
              outcome: 'open',
              attempts: 0,
            },
            input: decode(a.input),
            result: undefined,
          };
          bySchedule.set(String(event.eventId), record);
          out.activities.push(record);
          break;
        }
        case EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED: {
          const a = event.activityTaskStartedEventAttributes!;
          const record = bySchedule.get(String(a.scheduledEventId));
          if (record) {
            // Only the last attempt is written to the history; it carries the failure of the one before.
            record.view.attempts = a.attempt ?? 1;
            if (a.lastFailure?.message) record.view.failure = a.lastFailure.message;
          }
          break;
        }
        case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
          const a = event.activityTaskCompletedEventAttributes!;
          const record = bySchedule.get(String(a.scheduledEventId));
          if (record) {
            record.view.outcome = 'completed';
            record.view.closedAt = at;
            record.result = decode(a.result)[0];
          }
          break;
        }
        case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
        case EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
        case EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: {
          const a =
            event.activityTaskFailedEventAttributes ??
            event.activityTaskTimedOutEventAttributes ??
            event.activityTaskCanceledEventAttributes!;
          const record = bySchedule.get(String(a.scheduledEventId));
          if (record) {
            record.view.outcome =
              event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED
                ? 'failed'
                : event.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT
                  ? 'timed_out'
                  : 'canceled';
            record.view.closedAt = at;
            const failure = 'failure' in a ? a.failure : undefined;
            if (failure?.message) record.view.failure = failure.message;
          }
          break;
        }
        case EventType.EVENT_TYPE_MARKER_RECORDED:
          if (event.markerRecordedEventAttributes?.markerName === 'core_local_activity')
            out.localActivities++;
          break;
        case EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED: {
          const a = event.workflowTaskFailedEventAttributes!;
          out.workflowTaskFailures.push(`${at} ${a.failure?.message ?? `cause ${a.cause}`}`);
          break;
        }
        case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
          out.result = decode(event.workflowExecutionCompletedEventAttributes?.result)[0];
          break;
        case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
          out.failure = event.workflowExecutionFailedEventAttributes?.failure?.message ?? 'failed';
          break;
        case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
          out.failure = 'timed out';
          break;
        case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED:
          out.failure = `terminated: ${event.workflowExecutionTerminatedEventAttributes?.reason ?? ''}`;
          break;
      }
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken && !out.truncated);
  return out;
}

/** Every workflow of the run: its episodes and alert dispatches (FlowRunId), its health, its router alerts. */
function visibilityQuery(runId: string): string {
  return (
    `FlowRunId = '${runId}' OR WorkflowId = '${healthWorkflowId(runId)}'` +
    ` OR WorkflowId STARTS_WITH 'ops|route:${runId}:'`
  );
}

export function temporalUiLink(base: string, namespace: string, workflowId: string, runId: string): string {
  return `${base}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/${encodeURIComponent(runId)}/history`;
}

/** undefined: the run is unknown to the store and to Temporal. */
export async function explainRun(deps: ExplainDeps, runId: string): Promise<RunExplanation | undefined> {
  if (!RUN_ID_PATTERN.test(runId)) throw new Error(`not a run id: "${runId.slice(0, 140)}"`);
  const limits = { ...EXPLAIN_LIMITS, ...deps.limits };

  const [run, episodeRows, listed] = await Promise.all([
    deps.runs.getById(runId),
    deps.episodes.listForRunAnyTeam(runId, limits.episodes + 1),
    (async () => {
      const found: WorkflowExecutionInfo[] = [];
      // The iterator pages through the listing; stop one past the limit to know it was cut short.
      for await (const info of deps.client.workflow.list({
        query: visibilityQuery(runId),
        pageSize: Math.min(100, limits.workflows + 1),
      })) {
        found.push(info);
        if (found.length > limits.workflows) break;
      }
      return found;
    })(),
  ]);
  if (!run && !episodeRows.length && !listed.length) return undefined;

  const workflowsTruncated = listed.length > limits.workflows;
  const infos = listed
    .slice(0, limits.workflows)
    .sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  const histories = await mapLimited(infos, HISTORY_READS_IN_FLIGHT, (info) =>
    readHistory(deps, { workflowId: info.workflowId, runId: info.runId }, limits.historyEvents),
  );

  // Episodes: the recorded ones, then any episode workflow whose record is missing (its write failed).
  const episodeIds: string[] = episodeRows.slice(0, limits.episodes).map((row) => row._id);
  const rowById = new Map(episodeRows.map((row) => [row._id, row]));
  for (const info of infos) {
    if (info.type === workflowTypes.episode && !episodeIds.includes(info.workflowId)) {
      episodeIds.push(info.workflowId);
    }
  }
  const episodesTruncated = episodeRows.length > limits.episodes || episodeIds.length > limits.episodes;
  episodeIds.splice(limits.episodes);

  const familyKeys = episodeIds.flatMap((id) => Object.values(claimKeys).map((key) => key(id)));
  const [familyClaims, healthAlertClaims, routeAlertClaims, callbackAlertClaims, attemptRowsRead] =
    await Promise.all([
      deps.claims.byKeys(familyKeys),
      deps.claims.byPrefix(claimKeys.ops(`health:${runId}:`), limits.alertClaims),
      deps.claims.byPrefix(claimKeys.ops(`route:${runId}:`), limits.alertClaims),
      deps.claims.byPrefix(claimKeys.ops(`callback:${runId}:`), limits.alertClaims),
      deps.callbackAttempts.listForRun(runId, limits.callbackAttempts + 1),
    ]);
  // One past the limit says the oldest were cut (the store keeps the newest).
  const attemptsTruncated = attemptRowsRead.length > limits.callbackAttempts;
  const attemptRows = attemptsTruncated ? attemptRowsRead.slice(1) : attemptRowsRead;
  const claimByKey = new Map(
    [...familyClaims, ...healthAlertClaims, ...routeAlertClaims, ...callbackAlertClaims].map((r) => [
      r._id,
      r,
    ]),
  );

  const episodes: EpisodeView[] = [];
  for (const episodeId of episodeIds) {
    const row = rowById.get(episodeId);
    const rows = await deps.pushDeliveries.listForEpisode(episodeId, limits.deliveriesPerEpisode + 1);
    const endpoints = await deps.pushSubscriptions.endpointsByIds([
      ...new Set(rows.map((r) => r.subscriptionId)),
    ]);
    const runsOfEpisode = infos
      .map((info, i) => ({ info, history: histories[i] }))
      .filter(({ info }) => info.type === workflowTypes.episode && info.workflowId === episodeId);
    const callbackAttempts: CallbackAttemptView[] = attemptRows
      .filter((a) => a.episodeId === episodeId)
      .map((a) => {
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
          trigger: a.trigger,
          activityAttempts: a.activityAttempt ?? 1,
          workflowId: a.workflowId ?? '',
          workflowRunId: a.workflowRunId ?? '',
        };
      });
    const closed = runsOfEpisode.filter(({ history }) => history.result !== undefined).at(-1);
    episodes.push({
      episodeId,
      ...(row ? { kind: row.kind, recordedAt: row.recordedAt.toISOString() } : {}),
      families: {
        push: claimView(claimKeys.push(episodeId), claimByKey.get(claimKeys.push(episodeId))),
        callback: claimView(claimKeys.callback(episodeId), claimByKey.get(claimKeys.callback(episodeId))),
        ops: claimView(claimKeys.ops(episodeId), claimByKey.get(claimKeys.ops(episodeId))),
      },
      ...(closed ? { branches: branchesOf(closed.history.result) } : {}),
      pushDeliveries: rows.slice(0, limits.deliveriesPerEpisode).map((r) => {
        const endpoint = endpoints.get(r.subscriptionId);
        return {
          userId: r.userId,
          subscriptionId: r.subscriptionId,
          pushService: endpoint ? originOf(endpoint) : null,
          at: r.at.toISOString(),
        };
      }),
      pushDeliveriesTruncated: rows.length > limits.deliveriesPerEpisode,
      callbackAttempts,
    });
  }

  const operatorAlerts = gatherAlerts(
    episodeIds,
    [...healthAlertClaims, ...routeAlertClaims, ...callbackAlertClaims],
    claimByKey,
    infos,
    histories,
  );

  // Alerts found only through their sends (a push_config_fault, keyed by push service and hour, not by run):
  // their claims are read by key.
  const unread = operatorAlerts.filter((a) => !claimByKey.has(a.claim.key)).map((a) => a.claim.key);
  for (const row of await deps.claims.byKeys(unread)) {
    const alert = operatorAlerts.find((a) => a.claim.key === row._id);
    if (alert) alert.claim = claimView(row._id, row);
  }

  const workflows: WorkflowView[] = infos.map((info, i) => {
    const h = histories[i];
    return {
      workflowId: info.workflowId,
      runId: info.runId,
      type: info.type,
      status: info.status.name,
      startTime: info.startTime.toISOString(),
      ...(info.closeTime ? { closeTime: iso(info.closeTime) } : {}),
      uiUrl: temporalUiLink(deps.temporalUiUrl, deps.namespace, info.workflowId, info.runId),
      historyEvents: h.events,
      historyTruncated: h.truncated,
      activities: h.activities.map((a) => a.view),
      localActivities: h.localActivities,
      workflowTaskFailures: h.workflowTaskFailures,
      ...(h.failure ? { failure: h.failure } : {}),
    };
  });

  return {
    version: 1,
    runId,
    run: run
      ? {
          teamId: run.teamId,
          ownerId: run.ownerId,
          title: run.title,
          status: run.status,
          createdAt: run.createdAt.toISOString(),
          ...(run.endedAt ? { endedAt: new Date(run.endedAt).toISOString() } : {}),
          ...(run.callback ? { callbackOrigin: originOf(run.callback.url) ?? '?' } : {}),
        }
      : null,
    episodes,
    operatorAlerts,
    workflows,
    truncated: {
      episodes: episodesTruncated,
      workflows: workflowsTruncated,
      callbackAttempts: attemptsTruncated,
    },
    temporalUiUrl: deps.temporalUiUrl,
  };
}

function branchesOf(result: unknown): Record<string, string> | undefined {
  if (!result || typeof result !== 'object') return undefined;
  const r = result as Record<string, unknown>;
  return Object.fromEntries(
    ['push', 'callback', 'ops'].filter((k) => typeof r[k] === 'string').map((k) => [k, r[k] as string]),
  );
}

/** Operator alerts: every ops| claim of the run, joined with the postOperatorAlert sends in the histories. */
function gatherAlerts(
  episodeIds: string[],
  prefixed: ClaimRow[],
  claimByKey: Map<string, ClaimRow>,
  infos: WorkflowExecutionInfo[],
  histories: History[],
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
  infos.forEach((info, i) => {
    for (const activity of histories[i].activities) {
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
  });
  return [...alerts.values()];
}
