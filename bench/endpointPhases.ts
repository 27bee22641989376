// Where the time goes between a run's completion and the first attempts of its callback and of its team event's
// deliveries, read off the workflows' histories (the server's clock, the same machine as the bench's): the path an
// endpoint's event takes beside the callback's, one phase at a time.
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { searchAttributes } from '../contract/searchAttributes';
import { workflowTypes } from '../contract/workflows';
import { percentile } from './support';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
const T = temporal.api.enums.v1.EventType;

/** Each phase's samples, in ms, keyed by its name (in the order they happen). */
export type Phases = Map<string, number[]>;

const at = (e: HistoryEvent | undefined): number =>
  e?.eventTime ? Number(e.eventTime.seconds) * 1000 + Math.floor((e.eventTime.nanos ?? 0) / 1e6) : NaN;

/** Each scheduled activity of the given types with when it was scheduled and when its (first) attempt started. */
function activityStarts(events: HistoryEvent[], types: string[]): { scheduled: number; started: number }[] {
  const scheduled = new Map<string, number>();
  const out: { scheduled: number; started: number }[] = [];
  for (const e of events) {
    const attrs = e.activityTaskScheduledEventAttributes;
    if (attrs && types.includes(attrs.activityType?.name ?? '')) scheduled.set(String(e.eventId), at(e));
    const started = e.activityTaskStartedEventAttributes;
    const when = started && scheduled.get(String(started.scheduledEventId));
    if (when !== undefined && when !== null) out.push({ scheduled: when, started: at(e) });
  }
  return out;
}

async function historyOf(client: Client, workflowId: string): Promise<HistoryEvent[]> {
  return (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
}

async function workflowIdOf(client: Client, runId: string, type: string): Promise<string | undefined> {
  const query = `${searchAttributes.runId.name}='${runId}' AND WorkflowType='${type}'`;
  for await (const execution of client.workflow.list({ query })) return execution.workflowId;
  return undefined;
}

/** The phases of each run's path from its completion request (`completedAt`, the bench's clock). */
export async function endpointPhases(client: Client, completedAt: Map<string, number>): Promise<Phases> {
  const phases: Phases = new Map();
  const add = (name: string, ms: number) => {
    if (Number.isFinite(ms)) phases.set(name, [...(phases.get(name) ?? []), ms]);
  };
  for (const [runId, completed] of completedAt) {
    const episodeId = await workflowIdOf(client, runId, workflowTypes.episode);
    if (!episodeId) continue;
    const episode = await historyOf(client, episodeId);
    const episodeStarted = at(episode[0]);
    add('completion request → episode started', episodeStarted - completed);
    const [callback] = activityStarts(episode, ['sendCallback']);
    if (callback) {
      add('callback: episode started → attempt scheduled', callback.scheduled - episodeStarted);
      add('callback: attempt scheduled → started', callback.started - callback.scheduled);
    }
    const childInitiated = episode.find(
      (e) => e.eventType === T.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
    );
    const teamEventId = childInitiated?.startChildWorkflowExecutionInitiatedEventAttributes?.workflowId;
    const teamEventStarter = childInitiated ? at(childInitiated) : episodeStarted;
    add('endpoints: episode started → team event start asked', teamEventStarter - episodeStarted);
    const teamEvent = await historyOf(
      client,
      teamEventId ?? (await workflowIdOf(client, runId, workflowTypes.teamEvent)) ?? '',
    ).catch(() => []);
    if (!teamEvent.length) continue;
    const teamEventStarted = at(teamEvent[0]);
    add('endpoints: team event start asked → started', teamEventStarted - teamEventStarter);
    const task = (type: number) => at(teamEvent.find((e) => e.eventType === type));
    add(
      'endpoints: team event first workflow task scheduled → started',
      task(T.EVENT_TYPE_WORKFLOW_TASK_STARTED) - task(T.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
    );
    add(
      'endpoints: team event first workflow task started → completed',
      task(T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) - task(T.EVENT_TYPE_WORKFLOW_TASK_STARTED),
    );
    // One activity per endpoint, or (since the patch team-event-claims-and-first-attempts-together) one for all.
    const sends = activityStarts(teamEvent, ['sendEndpointEvent', 'sendEndpointEventToEach']);
    if (!sends.length) continue;
    add(
      'endpoints: team event started → attempts scheduled',
      Math.min(...sends.map((s) => s.scheduled)) - teamEventStarted,
    );
    for (const s of sends)
      add('endpoints: attempt scheduled → started (each activity)', s.started - s.scheduled);
  }
  return phases;
}

/** One line per phase: p50 / p99 / max in ms. */
export function phaseLines(phases: Phases): string[] {
  return [...phases].map(
    ([name, ms]) =>
      `    ${name}: p50 ${percentile(ms, 50)} / p99 ${percentile(ms, 99)} / max ${Math.max(...ms)} ms`,
  );
}
