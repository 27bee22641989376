// What a workflow costs on Temporal Cloud: counted from its history's events (bench:answer, bench:events), and the
// activity heartbeats no history shows, from the Temporal server's own `action` metric.
import { temporal } from '@temporalio/proto';

/** The search attribute Core upserts with each new patch marker; Temporal Cloud bills no action for it. */
const PATCH_VERSIONS = 'TemporalChangeVersion';

/**
 * The Temporal Cloud actions a history holds, after Temporal Cloud's list: a workflow started, a signal, an
 * activity scheduled, a timer started, a child workflow or an external signal initiated, a search-attribute
 * upsert (not Core's TemporalChangeVersion upsert beside a patch marker: exempt), and the local activities of one
 * workflow task as one. Patch markers are not actions. Activity heartbeats that reach the server are, but no
 * history shows them: an activity's first heartbeat goes at once (a push fan-out beats as it starts), later ones
 * at most every 80 % of its heartbeat timeout.
 */
export function temporalActions(events: temporal.api.history.v1.IHistoryEvent[]): Record<string, number> {
  const T = temporal.api.enums.v1.EventType;
  const kinds: Partial<Record<number, string>> = {
    [T.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED]: 'started',
    [T.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED]: 'signals',
    [T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED]: 'activities',
    [T.EVENT_TYPE_TIMER_STARTED]: 'timers',
    [T.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED]: 'children',
    [T.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED]: 'signalsSent',
    [T.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES]: 'searchAttributes',
  };
  const counts: Record<string, number> = { total: 0 };
  const add = (kind: string) => {
    counts[kind] = (counts[kind] ?? 0) + 1;
    counts.total++;
  };
  let localActivityTask = false;
  for (const e of events) {
    const type = e.eventType ?? 0;
    if (type === T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) localActivityTask = false;
    const kind = kinds[type];
    if (kind && !onlyPatchVersions(e)) add(kind);
    const localActivity =
      type === T.EVENT_TYPE_MARKER_RECORDED &&
      e.markerRecordedEventAttributes?.markerName === 'core_local_activity';
    if (localActivity && !localActivityTask) {
      localActivityTask = true;
      add('localActivityTasks');
    }
  }
  return counts;
}

function onlyPatchVersions(e: temporal.api.history.v1.IHistoryEvent): boolean {
  const fields = e.upsertWorkflowSearchAttributesEventAttributes?.searchAttributes?.indexedFields;
  const names = Object.keys(fields ?? {});
  return names.length > 0 && names.every((name) => name === PATCH_VERSIONS);
}

/**
 * The activity heartbeats a Temporal server has recorded so far in `namespace`, from the `action` counter its
 * metrics endpoint (`temporal server start-dev --metrics-port`) exports. The server publishes its counters about
 * once a second, so this reads until two reads 1.5 s apart agree (at most ten times). Read before and after a
 * workflow's life, the difference is what its activities sent, when nothing else heartbeats meanwhile.
 */
export async function heartbeatsRecorded(metricsUrl: string, namespace = 'default'): Promise<number> {
  let last = await heartbeatCounter(metricsUrl, namespace);
  for (let read = 1; read < 10; read++) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const now = await heartbeatCounter(metricsUrl, namespace);
    if (now === last) return now;
    last = now;
  }
  throw new Error(`${metricsUrl}: the heartbeat count kept moving (${last})`);
}

async function heartbeatCounter(metricsUrl: string, namespace: string): Promise<number> {
  const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${metricsUrl}: ${res.status}`);
  let count = 0;
  for (const line of (await res.text()).split('\n')) {
    if (!line.startsWith('action{') || !line.includes(`namespace="${namespace}"`)) continue;
    if (line.includes('action_type="grpc_RecordActivityTaskHeartbeat"'))
      count += Number(line.split(' ').pop());
  }
  return count;
}
