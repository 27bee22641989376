// What a workflow execution costs in Temporal Cloud actions, counted from its history's events after Temporal
// Cloud's list (its Actions page). Activity heartbeats are actions too, but no history shows them.
import { temporal } from '@temporalio/proto';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const EventType = temporal.api.enums.v1.EventType;

/** Actions by kind, and their total. */
export type ActionCounts = { total: number } & Record<string, number>;

/** The search attribute Core upserts with each new patch marker; Temporal Cloud bills no action for it. */
const PATCH_VERSIONS = 'TemporalChangeVersion';

const KINDS: Partial<Record<number, string>> = {
  [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED]: 'started',
  [EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]: 'signals',
  [EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]: 'activities',
  [EventType.EVENT_TYPE_TIMER_STARTED]: 'timers',
  [EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]: 'children',
  [EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED]: 'signalsSent',
  [EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]: 'searchAttributes',
};

/**
 * Counts as it is shown a history's events, in order: a workflow started, a signal, an activity scheduled, a timer
 * started, a child workflow or an external signal initiated, a search-attribute upsert (not Core's
 * TemporalChangeVersion upsert beside a patch marker: exempt), and the local activities of one workflow task as
 * one. Patch markers are not actions.
 */
export function actionCounter(): { see(event: HistoryEvent): void; counts: ActionCounts } {
  const counts: ActionCounts = { total: 0 };
  const add = (kind: string): void => {
    counts[kind] = (counts[kind] ?? 0) + 1;
    counts.total++;
  };
  let localActivityTask = false;
  return {
    counts,
    see(event) {
      const type = event.eventType ?? 0;
      if (type === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) localActivityTask = false;
      const kind = KINDS[type];
      if (kind && !onlyPatchVersions(event)) add(kind);
      const localActivity =
        type === EventType.EVENT_TYPE_MARKER_RECORDED &&
        event.markerRecordedEventAttributes?.markerName === 'core_local_activity';
      if (localActivity && !localActivityTask) {
        localActivityTask = true;
        add('localActivityTasks');
      }
    },
  };
}

/** The actions a whole history holds (events of one or more executions, each in order). */
export function temporalActions(events: HistoryEvent[]): ActionCounts {
  const counter = actionCounter();
  for (const event of events) counter.see(event);
  return counter.counts;
}

function onlyPatchVersions(event: HistoryEvent): boolean {
  const fields = event.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
  const names = Object.keys(fields ?? {});
  return names.length > 0 && names.every((name) => name === PATCH_VERSIONS);
}
