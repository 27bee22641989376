// Reads one workflow execution's Temporal history, page by page and bounded, and decodes it into what explain
// shows: each activity with its attempts and last failure, local activities counted, workflow task failures, and
// how the execution ended.
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { actionCounter, type ActionCounts } from './actions';
import type { ActivityView } from './explanation';

const EventType = temporal.api.enums.v1.EventType;
type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

export interface ActivityRecord {
  view: ActivityView;
  /** The decoded arguments it was scheduled with. */
  input: unknown[];
  result: unknown;
}

export interface History {
  events: number;
  truncated: boolean;
  activities: ActivityRecord[];
  localActivities: number;
  /** The Temporal Cloud actions of the events read (heartbeats are not in a history). */
  actions: ActionCounts;
  workflowTaskFailures: string[];
  result?: unknown;
  failure?: string;
}

/** Where histories are read: the client's workflow service, in this namespace. */
export interface HistorySource {
  client: Client;
  namespace: string;
}

function eventTime(ts: HistoryEvent['eventTime']): Date {
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

/** A history being folded: the activities met so far, by the id of their scheduled event. */
interface Fold {
  history: History;
  bySchedule: Map<string, ActivityRecord>;
}

/** Reads one execution's history, page by page, up to the event limit, and folds it into its activities. */
export async function readHistory(
  source: HistorySource,
  execution: { workflowId: string; runId: string },
  maxEvents: number,
): Promise<History> {
  const actions = actionCounter();
  const fold: Fold = {
    history: {
      events: 0,
      truncated: false,
      activities: [],
      localActivities: 0,
      actions: actions.counts,
      workflowTaskFailures: [],
    },
    bySchedule: new Map(),
  };
  const out = fold.history;
  let nextPageToken: Uint8Array | undefined;
  do {
    const page = await source.client.workflowService.getWorkflowExecutionHistory({
      namespace: source.namespace,
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
      actions.see(event);
      const at = eventTime(event.eventTime).toISOString();
      if (!foldActivityEvent(fold, event, at)) foldWorkflowEvent(out, event, at);
    }
    nextPageToken = page.nextPageToken?.length ? page.nextPageToken : undefined;
  } while (nextPageToken && !out.truncated);
  return out;
}

/** false: not an activity task event. */
function foldActivityEvent(fold: Fold, event: HistoryEvent, at: string): boolean {
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
      fold.bySchedule.set(String(event.eventId), record);
      fold.history.activities.push(record);
      return true;
    }
    case EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED: {
      const a = event.activityTaskStartedEventAttributes!;
      const record = fold.bySchedule.get(String(a.scheduledEventId));
      if (record) {
        // Only the last attempt is written to the history; it carries the failure of the one before.
        record.view.attempts = a.attempt ?? 1;
        if (a.lastFailure?.message) record.view.failure = a.lastFailure.message;
      }
      return true;
    }
    case EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: {
      const a = event.activityTaskCompletedEventAttributes!;
      const record = fold.bySchedule.get(String(a.scheduledEventId));
      if (record) {
        record.view.outcome = 'completed';
        record.view.closedAt = at;
        record.result = decode(a.result)[0];
      }
      return true;
    }
    case EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT:
    case EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED:
      foldActivityUnsuccessful(fold, event, at);
      return true;
    default:
      return false;
  }
}

function foldActivityUnsuccessful(fold: Fold, event: HistoryEvent, at: string): void {
  const a =
    event.activityTaskFailedEventAttributes ??
    event.activityTaskTimedOutEventAttributes ??
    event.activityTaskCanceledEventAttributes!;
  const record = fold.bySchedule.get(String(a.scheduledEventId));
  if (!record) return;
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

/** Local activities, workflow task failures and how the execution ended. */
function foldWorkflowEvent(out: History, event: HistoryEvent, at: string): void {
  switch (event.eventType) {
    case EventType.EVENT_TYPE_MARKER_RECORDED:
      if (event.markerRecordedEventAttributes?.markerName === 'core_local_activity') out.localActivities++;
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
