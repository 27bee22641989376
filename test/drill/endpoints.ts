// The drill's team endpoints: a few of the first team's, each subscribed to its own event types, on loopback
// receivers the faults hit too (one answers a few 5xx, one is down from 40 % to 85 % of the drive, longer than its
// schedule), and one registered mid-drive. After the settle each is recovered from its creation (what its schedule
// gave up on is sent again), then counted: each got exactly the events it subscribed to from after its creation, once (a repeat only at a
// worker kill), every one verified with standardwebhooks, with a sequence increasing per run.
import { Webhook } from 'standardwebhooks';
import { SUBSCRIBABLE_EVENT_TYPES, type TeamEventBody } from '../../domain/teamEvents';
import { adminOf } from '../support/admin';
import { CallbackReceiver } from '../support/callbackReceiver';
import type { ApiClient } from '../support/harness';
import { escalates, RUNG_SECONDS } from './questions';
import type { Drill, FaultWindow } from './scenario';

export interface DrillEndpoint {
  name: string;
  id: string;
  secret: string;
  types: string[];
  receiver: CallbackReceiver;
  createdAt: Date;
  recovered?: { found: number; delivered: number; failed: number };
}

/** The endpoints registered before the drive: name, types. The late one is registered at half the drive. */
const ENDPOINT_PLANS: [string, string[]][] = [
  ['everything', [...SUBSCRIBABLE_EVENT_TYPES]],
  ['questions', ['run.input_requested', 'interaction.answered', 'interaction.escalated']],
  ['ends', ['run.finished', 'run.failed', 'run.cancelled', 'run.parked']],
];

const endpointAdmin = (drill: Drill): ApiClient =>
  adminOf(drill.anonymous, `${drill.teams[0].id}-admin`, drill.teams[0].id);

async function registerEndpoint(drill: Drill, name: string, types: string[]): Promise<DrillEndpoint> {
  const receiver = await CallbackReceiver.start();
  drill.cleanup.push(() => receiver.close());
  for (let attempt = 1; ; attempt++) {
    const res = await endpointAdmin(drill).post('/api/v1/endpoints', {
      url: receiver.url,
      eventTypes: types,
    });
    if (res.status === 201) {
      const endpoint: DrillEndpoint = {
        name,
        id: res.body.id as string,
        secret: res.body.secret as string,
        types,
        receiver,
        createdAt: new Date(res.body.createdAt as string),
      };
      drill.endpoints.push(endpoint);
      return endpoint;
    }
    // A server restarting answers 5xx; a retry after a 201 lost on the way would register a second endpoint.
    if (res.status < 500 || attempt >= 60) throw new Error(`endpoint ${name}: ${res.status} ${res.text}`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

export async function registerEndpoints(drill: Drill): Promise<void> {
  drill.endpoints = [];
  for (const [name, types] of ENDPOINT_PLANS) await registerEndpoint(drill, name, types);
}

const byName = (drill: Drill, name: string) => drill.endpoints.find((e) => e.name === name)!;

/** The endpoint faults, each at its point of the drive (test/drill/scenario.ts faultServers). */
export function endpointFaults(drill: Drill): [number, () => unknown][] {
  const late: [number, () => unknown] = [
    0.5,
    () => registerEndpoint(drill, 'late', [...SUBSCRIBABLE_EVENT_TYPES]),
  ];
  if (!drill.faults.receiverFailures) return [late];
  return [
    [0.2, () => byName(drill, 'ends').receiver.answer({ status: 500 }, { status: 503 }, { status: 502 })],
    [0.4, () => byName(drill, 'questions').receiver.answerAlways({ status: 503 })],
    late,
    [0.85, () => byName(drill, 'questions').receiver.answerAlways({ status: 204 })],
  ];
}

/** Each endpoint recovered from its creation, one at a time (one recover per endpoint runs at once). */
export async function recoverEndpoints(drill: Drill): Promise<void> {
  const admin = endpointAdmin(drill);
  for (const endpoint of drill.endpoints) {
    const res = await admin.post(`/api/v1/endpoints/${endpoint.id}/recover`, {
      since: endpoint.createdAt.toISOString(),
    });
    if (res.status !== 202) {
      drill.log(`drill: recover of endpoint ${endpoint.name}: ${res.status} ${res.text}`);
      continue;
    }
    endpoint.recovered = await drill.client.workflow.getHandle(res.body.id as string).result();
  }
}

export interface EndpointCounts {
  endpoints: number;
  /** Team events recorded for the team's runs, and those the plan says should be there and are not. */
  events: number;
  eventsMissing: string[];
  /** (event, endpoint) pairs owed: subscribed, and from after the endpoint's creation. */
  owed: number;
  delivered: number;
  /** POSTs the receivers answered 2xx, and those they refused (the faults'). */
  accepted: number;
  refused: number;
  /** Sent again by the recovers. */
  recovered: number;
  repeated: number;
  /** Repeats whose first copy fell outside every kill window. */
  repeatedOutsideKills: string[];
  lost: string[];
  unexpected: string[];
  badSignatures: number;
  /** Events whose sequence differs from the recorded one, or runs whose sequence does not follow their course. */
  sequenceFaults: string[];
}

type EventRow = { _id: string; type: string; runId: string; sequence: number; occurredAt: string | Date };

/** The types each run of the first team should have raised, from the plan and what the questions did. */
function expectedTypes(drill: Drill, runId: string): string[] {
  const episodes = drill.episodes.filter((e) => e.run.id === runId);
  const end = { complete: 'run.finished', fail: 'run.failed', cancel: 'run.cancelled' };
  return episodes.flatMap((e) =>
    e.kind === 'end'
      ? [end[e.run.end]]
      : e.kind === 'park'
        ? ['run.parked']
        : [
            'run.input_requested',
            'interaction.answered',
            // The rungs that fall before the answer.
            ...(escalates(e.run) ? RUNG_SECONDS.slice(0, -1).map(() => 'interaction.escalated') : []),
          ],
  );
}

export async function countEndpoints(drill: Drill): Promise<void> {
  const team = drill.teams[0];
  const runIds = drill.runs.filter((r) => r.team === team && r.id).map((r) => r.id!);
  const rows = (await drill.observer.use((d) =>
    d
      .collection('team_events')
      .find({ runId: { $in: runIds } })
      .toArray(),
  )) as unknown as EventRow[];
  const counts: EndpointCounts = {
    endpoints: drill.endpoints.length,
    events: rows.length,
    eventsMissing: [],
    owed: 0,
    delivered: 0,
    accepted: 0,
    refused: 0,
    recovered: 0,
    repeated: 0,
    repeatedOutsideKills: [],
    lost: [],
    unexpected: [],
    badSignatures: 0,
    sequenceFaults: [],
  };
  const sequenceOf = new Map(rows.map((r) => [r._id, r.sequence]));
  for (const runId of runIds) {
    const ofRun = rows.filter((r) => r.runId === runId);
    const missing = [...countBy(expectedTypes(drill, runId))].filter(
      ([type, n]) => ofRun.filter((r) => r.type === type).length < n,
    );
    if (missing.length) counts.eventsMissing.push(`${runId}: ${missing.map(([t]) => t).join(', ')}`);
    if (new Set(ofRun.map((r) => r.sequence)).size !== ofRun.length)
      counts.sequenceFaults.push(`${runId}: a sequence repeated`);
    const endAt = Math.max(
      ...ofRun
        .filter((r) => ['run.finished', 'run.failed', 'run.cancelled'].includes(r.type))
        .map((r) => r.sequence),
    );
    if (ofRun.some((r) => ['run.input_requested', 'run.parked'].includes(r.type) && r.sequence > endAt))
      counts.sequenceFaults.push(`${runId}: a pause after its end`);
  }
  const inKill = (at: number) =>
    drill.windows.some((w: FaultWindow) => w.kind === 'kill' && at >= w.from && at <= w.to);
  for (const endpoint of drill.endpoints) {
    counts.recovered += endpoint.recovered?.delivered ?? 0;
    const owed = new Set(
      rows
        .filter((r) => endpoint.types.includes(r.type) && new Date(r.occurredAt) >= endpoint.createdAt)
        .map((r) => r._id),
    );
    counts.owed += owed.size;
    const firstAt = new Map<string, number>();
    for (const call of endpoint.receiver.received) {
      if (call.status >= 300) {
        counts.refused++;
        continue;
      }
      counts.accepted++;
      let event: TeamEventBody;
      // Verified as the receiver would have when it got it (the library checks the timestamp against its clock).
      const realNow = Date.now;
      Date.now = () => call.at.getTime();
      try {
        event = new Webhook(endpoint.secret).verify(
          call.body,
          call.headers as Record<string, string>,
        ) as TeamEventBody;
      } catch {
        counts.badSignatures++;
        continue;
      } finally {
        Date.now = realNow;
      }
      if (event.sequence !== sequenceOf.get(event.id))
        counts.sequenceFaults.push(`${endpoint.name} got ${event.id} as ${event.sequence}`);
      if (!owed.has(event.id)) {
        counts.unexpected.push(`${endpoint.name}: ${event.id}`);
        continue;
      }
      const first = firstAt.get(event.id);
      if (first === undefined) {
        firstAt.set(event.id, call.at.getTime());
        continue;
      }
      counts.repeated++;
      if (!inKill(first)) counts.repeatedOutsideKills.push(`${endpoint.name}: ${event.id}`);
    }
    counts.delivered += firstAt.size;
    for (const id of owed) if (!firstAt.has(id)) counts.lost.push(`${endpoint.name}: ${id}`);
  }
  drill.endpointCounts = counts;
}

const countBy = (items: string[]) => {
  const counts = new Map<string, number>();
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1);
  return counts;
};

export function endpointViolations(c: EndpointCounts): string[] {
  const v: string[] = [];
  if (c.eventsMissing.length) v.push(`team events never recorded: ${c.eventsMissing.join('; ')}`);
  if (c.lost.length) v.push(`${c.lost.length} endpoint deliveries lost: ${c.lost.join(', ')}`);
  if (c.unexpected.length) v.push(`endpoints got events not owed them: ${c.unexpected.join(', ')}`);
  if (c.repeatedOutsideKills.length)
    v.push(`endpoint deliveries repeated outside kill windows: ${c.repeatedOutsideKills.join(', ')}`);
  if (c.badSignatures) v.push(`${c.badSignatures} endpoint deliveries failed verification`);
  if (c.sequenceFaults.length) v.push(`endpoint sequences: ${c.sequenceFaults.join('; ')}`);
  return v;
}

export const formatEndpoints = (c: EndpointCounts): string =>
  `  endpoints: ${c.endpoints}, ${c.events} events; owed ${c.owed}, delivered ${c.delivered} (POSTs accepted ` +
  `${c.accepted}, refused ${c.refused}, recovered ${c.recovered}), repeated ${c.repeated}, lost ${c.lost.length}, ` +
  `unexpected ${c.unexpected.length}, bad signatures ${c.badSignatures}, sequence faults ${c.sequenceFaults.length}`;
