// What the team endpoint suites share (the delivery suite and its faults twin): endpoints of one team, each with its
// own event types and receiver; runs that pause, cross their budget, stall and recover, and end; what the system
// recorded of them; and the check that each endpoint got exactly what it is owed, verified with standardwebhooks.
import assert from 'node:assert/strict';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Db } from 'mongodb';
import { Webhook } from 'standardwebhooks';
import { SUBSCRIBABLE_EVENT_TYPES, type TeamEventBody } from '../../domain/teamEvents';
import type { Stores } from '../../store';
import { CallbackReceiver, type ReceivedCallback } from './callbackReceiver';
import type { ApiClient } from './harness';
import { waitUntil } from './waitUntil';

export interface RegisteredEndpoint {
  id: string;
  secret: string;
  types: string[];
  receiver: CallbackReceiver;
  createdAt: Date;
}

/** A team event as the store recorded it. */
export interface RecordedEvent {
  id: string;
  type: string;
  runId: string;
  sequence: number;
  occurredAt: Date;
}

/** One copy an endpoint took (answered 2xx), verified with its secret. */
export interface TakenCopy {
  call: ReceivedCallback;
  event: TeamEventBody;
}

/** Why a second copy of an event is allowed (undefined: it is not); `copies` are in arrival order. */
export type RepeatRule = (copies: TakenCopy[], endpoint: RegisteredEndpoint) => string | undefined;

/** Endpoint i's types: every type whose index has bit (i mod 3) set, the first one everything. */
export const typesOf = (i: number): string[] =>
  i === 0 ? [...SUBSCRIBABLE_EVENT_TYPES] : SUBSCRIBABLE_EVENT_TYPES.filter((_, t) => (t + i) % 3 !== 0);

/**
 * What run i raises (runLife): its end first, a pause and its answer for even ones, budget crossings for every
 * third, a stall and its recovery for run 1.
 */
export const expectedTypes = (i: number): string[] => [
  ['run.finished', 'run.failed', 'run.cancelled', 'run.finished'][i % 4],
  ...(i % 2 === 0 ? ['run.input_requested', 'interaction.answered'] : []),
  ...(i % 3 === 0 ? ['run.budget_warning', 'run.budget_exceeded'] : []),
  ...(i === 1 ? ['run.stalled', 'run.recovered'] : []),
];

/** The copies an endpoint took (answered 2xx: a refused attempt is not a delivery), verified with its secret. */
export const takenCopies = (endpoint: RegisteredEndpoint): TakenCopy[] =>
  endpoint.receiver.received
    .filter((call) => call.status < 300)
    .map((call) => ({
      call,
      event: new Webhook(endpoint.secret).verify(
        call.body,
        call.headers as Record<string, string>,
      ) as TeamEventBody,
    }));

/** The events an endpoint is owed: of its types, from after its creation. */
export const owedTo = (endpoint: RegisteredEndpoint, events: RecordedEvent[]): string[] =>
  events
    .filter((e) => endpoint.types.includes(e.type) && e.occurredAt >= endpoint.createdAt)
    .map((e) => e.id)
    .sort();

export interface EndpointRunsDeps {
  /** A team admin of acme (manages endpoints). */
  admin: ApiClient;
  /** A member of acme (runs). */
  alice: ApiClient;
  stores: Stores;
  db: Db;
}

export class EndpointRuns {
  readonly endpoints: RegisteredEndpoint[] = [];

  constructor(private readonly deps: EndpointRunsDeps) {}

  async register(types: string[], extra: Record<string, unknown> = {}): Promise<RegisteredEndpoint> {
    const receiver = await CallbackReceiver.start();
    const res = await this.deps.admin.post('/api/v1/endpoints', {
      url: receiver.url,
      eventTypes: types,
      ...extra,
    });
    assert.equal(res.status, 201, res.text);
    const registered = {
      id: res.body.id,
      secret: res.body.secret,
      types,
      receiver,
      createdAt: new Date(res.body.createdAt),
    };
    this.endpoints.push(registered);
    return registered;
  }

  /** Closes every endpoint's receiver (and fails on a body that did not match its published schema). */
  async close(): Promise<void> {
    for (const { receiver } of this.endpoints) await receiver.close();
  }

  /** One run's life: index i decides its path (expectedTypes says what it raises). */
  async runLife(i: number): Promise<string> {
    const { alice, stores } = this.deps;
    const created = await alice.post('/api/v1/runs', { title: `run ${i}`, budget: { limit: 10 } });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    const post = async (path: string, body: unknown = {}) => {
      const res = await alice.post(`/api/v1/runs/${id}${path}`, body);
      assert.ok(res.status < 300, `${path}: ${res.status} ${res.text}`);
      return res;
    };
    await post('/events', { type: 'node_started', node: 'plan' });
    if (i % 2 === 0) {
      const paused = await post('/pause', { prompt: 'Ship it?' });
      await post(`/interactions/${paused.body.interactionId}/answer`, { answer: 'yes' });
    }
    if (i % 3 === 0) {
      await post('/events', { type: 'usage', spent: 9 });
      await post('/events', { type: 'usage', spent: 12 });
    }
    if (i === 1) {
      // Silent until it stalls, then progress again: run.stalled, then run.recovered.
      await waitUntil(
        'a stall',
        async () => (await stores.teamEvents.get(`ev:health:${id}:stall:1`)) !== undefined,
        { timeoutMs: 60_000 },
      );
      await post('/events', { type: 'node_started', node: 'write' });
      await waitUntil(
        'a recovery',
        async () => (await stores.teamEvents.get(`ev:health:${id}:stall_recovered:1`)) !== undefined,
        { timeoutMs: 60_000 },
      );
    }
    const end = i % 4;
    if (end === 1) await post('/fail', { error: { code: 'oom', message: 'out of memory' } });
    else if (end === 2) await post('/cancel');
    else await post('/complete', { finalAnswer: `answer ${i}` });
    return id;
  }

  /** Runs `from` to `from + count - 1`, side by side; resolves once each has recorded its end. */
  async runLives(from: number, count: number): Promise<string[]> {
    const ids = await Promise.all(Array.from({ length: count }, (_, k) => this.runLife(from + k)));
    await waitUntil(
      `runs ${from}..${from + count - 1} ended`,
      async () =>
        (await Promise.all(ids.map((id) => this.deps.stores.teamEvents.get(`ev:${id}:end`)))).every(Boolean),
      { timeoutMs: 60_000 },
    );
    return ids;
  }

  /** What the system recorded of these runs. */
  async recorded(runIds: string[]): Promise<RecordedEvent[]> {
    const rows = await Promise.all(
      runIds.map((id) => this.deps.db.collection('team_events').find({ runId: id }).toArray()),
    );
    return rows.flat().map((row) => ({
      id: String(row._id),
      type: String(row.type),
      runId: String(row.runId),
      sequence: Number(row.sequence),
      occurredAt: new Date(String(row.occurredAt)),
    }));
  }

  /**
   * Waits until every event the runs raised (runIds[i] is run i) and every id of `alsoIds` is recorded: answers and
   * health alerts reach the store on their own paths, possibly after the run's end. Answers what was recorded.
   */
  async waitForEveryEvent(runIds: string[], alsoIds: string[] = []): Promise<RecordedEvent[]> {
    let rows: RecordedEvent[] = [];
    await waitUntil(
      'every event of every run recorded',
      async () => {
        rows = await this.recorded(runIds);
        return (
          runIds.every((id, i) =>
            expectedTypes(i).every((type) => rows.some((r) => r.runId === id && r.type === type)),
          ) && alsoIds.every((id) => rows.some((r) => r.id === id))
        );
      },
      { timeoutMs: 60_000, seen: () => `${rows.length} events` },
    );
    return rows;
  }

  /**
   * Sequences increase per run in the order things happened, whichever was recorded first: a pause before the end
   * it led to, a budget warning before the crossing (raised together, in that order).
   */
  assertSequences(events: RecordedEvent[], runIds: string[]): void {
    for (const [i, id] of runIds.entries()) {
      const end = expectedTypes(i)[0];
      const ofRun = events.filter((e) => e.runId === id);
      assert.equal(new Set(ofRun.map((e) => e.sequence)).size, ofRun.length, `run ${i}: a sequence repeated`);
      const sequenceOf = (type: string) => ofRun.find((e) => e.type === type)?.sequence ?? 0;
      assert.ok(sequenceOf(end) > sequenceOf('run.input_requested'), `run ${i}: the end after the pause`);
      assert.ok(sequenceOf('run.budget_exceeded') >= sequenceOf('run.budget_warning'), `run ${i}: budgets`);
    }
  }

  /** Waits until each endpoint took as many copies as it is owed events. */
  async waitForOwed(events: RecordedEvent[], timeoutMs = 120_000): Promise<void> {
    for (const endpoint of this.endpoints) {
      const expected = owedTo(endpoint, events).length;
      const taken = () => endpoint.receiver.received.filter((call) => call.status < 300).length;
      await waitUntil(`endpoint ${endpoint.id}: ${expected} events`, () => taken() >= expected, {
        timeoutMs,
        seen: taken,
      });
    }
  }

  /** Waits until every event's delivery workflow closed: nothing more comes on its own. */
  static async waitForDeliveries(
    client: Client,
    events: RecordedEvent[],
    timeoutMs = 120_000,
  ): Promise<void> {
    let open: string[] = [];
    await waitUntil(
      'every delivery workflow closed',
      async () => {
        const states = await Promise.all(
          events.map(async (e) => {
            // Recorded by its raiser just before it starts the workflow: one not found yet is not closed.
            const status = await client.workflow
              .getHandle(`team-event|${e.id}`)
              .describe()
              .then((described) => described.status.name)
              .catch((err: unknown) => {
                if (err instanceof WorkflowNotFoundError) return 'NOT_STARTED';
                throw err;
              });
            return status === 'RUNNING' || status === 'NOT_STARTED' ? `${e.id} ${status}` : undefined;
          }),
        );
        open = states.filter((id) => id !== undefined);
        return open.length === 0;
      },
      { timeoutMs, intervalMs: 250, seen: () => open },
    );
  }

  /**
   * Each endpoint took exactly the events it is owed, each verified, of its team and types, with its recorded
   * sequence and the event id as webhook-id; a second copy of one only where `repeatAllowed` explains it (and the
   * same body). Answers the repeats allowed, one line each.
   */
  assertEachOwedOnce(events: RecordedEvent[], repeatAllowed: RepeatRule = () => undefined): string[] {
    const repeats: string[] = [];
    for (const endpoint of this.endpoints) {
      const about = `endpoint ${endpoint.id} (${endpoint.types.join(', ')})`;
      const copiesOf = new Map<string, TakenCopy[]>();
      for (const copy of takenCopies(endpoint)) {
        const { event, call } = copy;
        assert.equal(event.teamId, 'acme');
        assert.equal(
          event.sequence,
          events.find((e) => e.id === event.id)?.sequence,
          `${about}: ${event.id}`,
        );
        assert.ok(endpoint.types.includes(event.type), `${about}: ${event.type}`);
        assert.equal(call.headers['webhook-id'], event.id, 'webhook-id is the event id');
        copiesOf.set(event.id, [...(copiesOf.get(event.id) ?? []), copy]);
      }
      assert.deepEqual([...copiesOf.keys()].sort(), owedTo(endpoint, events), about);
      for (const [id, copies] of copiesOf) {
        if (copies.length === 1) continue;
        const why = repeatAllowed(copies, endpoint);
        assert.ok(
          why,
          `${about}: ${id} taken ${copies.length} times, at ${copies.map((c) => c.call.at.toISOString())}`,
        );
        for (const copy of copies)
          assert.equal(copy.call.body, copies[0].call.body, `${about}: ${id} changed`);
        repeats.push(`${endpoint.id} ${id}: ${why}`);
      }
    }
    return repeats;
  }
}
