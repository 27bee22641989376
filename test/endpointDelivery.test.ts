// Team endpoints' delivery, on the real servers: several endpoints of one team, each subscribed to its own set of
// event types, runs that pause, cross their budget, stall and recover, finish, fail or are cancelled; each endpoint
// receives exactly the events it subscribed to from after its creation, each once, verified with the
// standardwebhooks library, with a sequence increasing per run; an endpoint's rateLimitPerSecond holds; another
// team hears nothing. Its size is a parameter: ENDPOINT_TEST_ENDPOINTS (default 4) endpoints and
// ENDPOINT_TEST_RUNS (default 6) runs; the size is 20 and 100.
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import { endpointRateKey, endpointRateWindows } from '../activities/endpoint';
import { raiseTeamEvent } from '../client/teamEvents';
import { teamEventWorkflowId } from '../contract/workflows';
import {
  SUBSCRIBABLE_EVENT_TYPES,
  interactionTeamEvent,
  type TeamEvent,
  type TeamEventBody,
} from '../domain/teamEvents';
import type { Stores } from '../store';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { saveHistory, type ApiClient } from './support/harness';
import { waitUntil } from './support/waitUntil';

const ENDPOINTS = Number(process.env.ENDPOINT_TEST_ENDPOINTS ?? 4);
const RUNS = Number(process.env.ENDPOINT_TEST_RUNS ?? 6);
const RATE = 2;

interface Registered {
  id: string;
  secret: string;
  types: string[];
  receiver: CallbackReceiver;
  createdAt: Date;
}

/** Endpoint i's types: every type whose index has bit (i mod 3) set, the first one everything. */
const typesOf = (i: number): string[] =>
  i === 0 ? [...SUBSCRIBABLE_EVENT_TYPES] : SUBSCRIBABLE_EVENT_TYPES.filter((_, t) => (t + i) % 3 !== 0);

describe('team endpoints: delivery', function () {
  this.timeout(300_000);
  let stack: FamilyStack;
  let stores: Stores;
  let client: Client;
  let admin: ApiClient;
  let alice: ApiClient;
  const endpoints: Registered[] = [];

  before(async () => {
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_RETRY_SECONDS: '1,1,1',
      STALL_AFTER_SECONDS: '3',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ stores, client } = stack);
    admin = adminOf(stack.anonymous, 'ada', 'acme');
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    for (const { receiver } of endpoints) await receiver.close();
  });

  async function register(types: string[], extra: Record<string, unknown> = {}): Promise<Registered> {
    const receiver = await CallbackReceiver.start();
    const res = await admin.post('/api/v1/endpoints', { url: receiver.url, eventTypes: types, ...extra });
    assert.equal(res.status, 201, res.text);
    const registered = {
      id: res.body.id,
      secret: res.body.secret,
      types,
      receiver,
      createdAt: new Date(res.body.createdAt),
    };
    endpoints.push(registered);
    return registered;
  }

  /** What an endpoint received, each verified with its secret. */
  const verified = (endpoint: Registered): TeamEventBody[] =>
    endpoint.receiver.received.map(
      (call) =>
        new Webhook(endpoint.secret).verify(
          call.body,
          call.headers as Record<string, string>,
        ) as TeamEventBody,
    );

  /** One run's life: index i decides its path (pause and answer, budget crossings, a stall, its end). */
  async function runLife(i: number): Promise<string> {
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
      );
      await post('/events', { type: 'node_started', node: 'write' });
      await waitUntil(
        'a recovery',
        async () => (await stores.teamEvents.get(`ev:health:${id}:stall_recovered:1`)) !== undefined,
      );
    }
    const end = i % 4;
    if (end === 1) await post('/fail', { error: { code: 'oom', message: 'out of memory' } });
    else if (end === 2) await post('/cancel');
    else await post('/complete', { finalAnswer: `answer ${i}` });
    return id;
  }

  it('each endpoint gets exactly the events it subscribed to from after its creation, once, in sequence per run', async () => {
    for (let i = 0; i < ENDPOINTS; i++) await register(typesOf(i));
    const paced = await register(['run.finished', 'run.failed', 'run.cancelled', 'interaction.answered'], {
      rateLimitPerSecond: RATE,
    });
    const other = await (async () => {
      const receiver = await CallbackReceiver.start();
      const res = await adminOf(stack.anonymous, 'eve', 'globex').post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: [...SUBSCRIBABLE_EVENT_TYPES],
      });
      assert.equal(res.status, 201, res.text);
      return receiver;
    })();

    const first = await Promise.all(Array.from({ length: Math.ceil(RUNS / 2) }, (_, i) => runLife(i)));
    await waitUntil('the first runs ended', async () =>
      (await Promise.all(first.map((id) => stores.teamEvents.get(`ev:${id}:end`)))).every(Boolean),
    );
    // Created now: it hears only of what happens from here on.
    const late = await register([...SUBSCRIBABLE_EVENT_TYPES]);
    const second = await Promise.all(
      Array.from({ length: RUNS - first.length }, (_, i) => runLife(first.length + i)),
    );
    const runIds = [...first, ...second];
    // The entry point the interaction family raises its events through: a burst of answers at once, which the
    // paced endpoint takes at its rate.
    const run = (await stores.runs.getById(runIds[0]))!;
    const answeredAt = new Date().toISOString();
    // The paced endpoint's rate spent elsewhere (every worker counts in the one store) while the burst starts, until
    // an attempt is held: on a busy machine the burst's own starts may spread too thin to reach the rate.
    const [window] = endpointRateWindows(RATE);
    const spendRate = async (): Promise<void> => {
      const key = endpointRateKey(paced.id, window.suffix);
      while ((await stores.rateLimits.hit(key, window.rule, new Date())).admitted) continue;
    };
    const pacedHolds = () =>
      stack.mongo.db.collection('endpoint_attempts').countDocuments({ teamId: 'acme', error: 'paced' });
    await spendRate();
    const answered = Array.from({ length: 6 * RATE }, (_, k) =>
      interactionTeamEvent(
        'interaction.answered',
        { id: run._id, teamId: run.teamId, status: run.status, title: run.title },
        { id: `int_${k}` },
        { answeredBy: 'alice', answeredAt },
        answeredAt,
      ),
    );
    const raised = await Promise.all(
      answered.map((event) => raiseTeamEvent(client, stack.config.temporalTaskQueue, event)),
    );
    assert.deepEqual(
      raised,
      answered.map(() => true),
    );
    await waitUntil('an attempt at the paced endpoint held by its rate', async () => {
      await spendRate();
      return (await pacedHolds()) > 0;
    });

    // What the system recorded, checked against what the runs did: every end, pause and budget crossing is there.
    const recorded = async () =>
      (
        await Promise.all(
          runIds.map((id) => stack.mongo.db.collection('team_events').find({ runId: id }).toArray()),
        )
      )
        .flat()
        .map((row) => ({
          id: String(row._id),
          type: String(row.type),
          runId: String(row.runId),
          sequence: Number(row.sequence),
          occurredAt: new Date(String(row.occurredAt)),
        }));
    // What each run raised: its end, a pause and its answer for even ones, budget crossings for every third, a stall
    // for run 1. Answers (raised once the close went out) and health alerts reach the store on their own paths,
    // possibly after the run's end: wait for all of them.
    const expectedTypes = (i: number): string[] => [
      ['run.finished', 'run.failed', 'run.cancelled', 'run.finished'][i % 4],
      ...(i % 2 === 0 ? ['run.input_requested', 'interaction.answered'] : []),
      ...(i % 3 === 0 ? ['run.budget_warning', 'run.budget_exceeded'] : []),
      ...(i === 1 ? ['run.stalled', 'run.recovered'] : []),
    ];
    await waitUntil('every event of every run and the answered burst recorded', async () => {
      const rows = await recorded();
      return (
        runIds.every((id, i) =>
          expectedTypes(i).every((type) => rows.some((r) => r.runId === id && r.type === type)),
        ) && answered.every((a) => rows.some((r) => r.id === a.id))
      );
    });
    const events = await recorded();
    for (const [i, id] of runIds.entries()) {
      const end = expectedTypes(i)[0];
      // Increasing per run in the order things happened, whichever was recorded first: a pause before the end it
      // led to, a budget warning before the crossing (raised together, in that order).
      const ofRun = events.filter((e) => e.runId === id);
      assert.equal(new Set(ofRun.map((e) => e.sequence)).size, ofRun.length, `run ${i}: a sequence repeated`);
      const sequenceOf = (type: string) => ofRun.find((e) => e.type === type)?.sequence ?? 0;
      assert.ok(sequenceOf(end) > sequenceOf('run.input_requested'), `run ${i}: the end after the pause`);
      assert.ok(sequenceOf('run.budget_exceeded') >= sequenceOf('run.budget_warning'), `run ${i}: budgets`);
    }

    const owed = (endpoint: Registered) =>
      events
        .filter((e) => endpoint.types.includes(e.type) && e.occurredAt >= endpoint.createdAt)
        .map((e) => e.id)
        .sort();
    for (const endpoint of endpoints) {
      const expected = owed(endpoint);
      await waitUntil(
        `endpoint ${endpoint.id}: ${expected.length} events`,
        () => endpoint.receiver.received.length >= expected.length,
        { timeoutMs: 120_000, seen: () => `${endpoint.receiver.received.length}` },
      );
    }
    // Nothing more comes: every event workflow of these runs closed.
    for (const e of events) await client.workflow.getHandle(`team-event|${e.id}`).result();
    for (const endpoint of endpoints) {
      const got = verified(endpoint);
      const ids = got.map((e) => e.id).sort();
      assert.deepEqual(ids, owed(endpoint), `endpoint ${endpoint.id} (${endpoint.types.join(', ')})`);
      for (const event of got) {
        assert.equal(event.teamId, 'acme');
        assert.equal(event.sequence, events.find((e) => e.id === event.id)!.sequence);
        assert.ok(endpoint.types.includes(event.type));
      }
      const headerIds = endpoint.receiver.received.map((call) => call.headers['webhook-id']);
      assert.deepEqual(
        headerIds,
        got.map((e) => e.id),
        'webhook-id is the event id',
      );
    }
    assert.ok(
      owed(late).length > 0 && owed(late).length < events.length,
      'the late endpoint missed the early runs',
    );
    assert.equal(other.received.length, 0, 'another team hears nothing');
    await other.close();

    // The paced endpoint: over any 60 s (here, the whole test) no more than its rate (held at least once, above).
    const arrivals = paced.receiver.received.map((call) => call.at.getTime());
    const spanSeconds = (arrivals.at(-1)! - arrivals[0]) / 1000;
    assert.ok(
      arrivals.length - 3 * RATE <= RATE * spanSeconds,
      `${arrivals.length} events in ${spanSeconds} s`,
    );
    for (const [k, at] of arrivals.entries()) {
      const within60 = arrivals.filter((t) => t >= at && t < at + 60_000).length;
      assert.ok(within60 <= 60 * RATE, `from arrival ${k}: ${within60} in 60 s`);
    }

    // RECORD_TEAM_EVENT_HISTORY=1 records the new path's fixtures (docs/versioning.md): an episode and a run's
    // health that raised team events, and a team event's deliveries.
    if (process.env.RECORD_TEAM_EVENT_HISTORY === '1') {
      saveHistory(
        stack.config,
        `${runIds[0]}:end`,
        path.resolve(__dirname, 'fixtures/episode-history-team-event.json'),
      );
      saveHistory(
        stack.config,
        `team-event|ev:${runIds[0]}:end`,
        path.resolve(__dirname, 'fixtures/team-event-history-first-attempts-together.json'),
      );
      saveHistory(
        stack.config,
        `health:${runIds[1]}`,
        path.resolve(__dirname, 'fixtures/run-health-history-team-events.json'),
      );
    }
  });

  it('an event raised again once delivered is claimed elsewhere for every endpoint, and nobody hears it twice', async () => {
    const row = await stack.mongo.db
      .collection('team_events')
      .findOne({ teamId: 'acme', type: 'run.finished' });
    assert.ok(row, 'a run.finished recorded by the test above');
    const eventId = String(row._id);
    const first = client.workflow.getHandle(teamEventWorkflowId(eventId));
    const delivered = Object.entries((await first.result()).deliveries);
    assert.ok(delivered.length > 0 && delivered.every(([, result]) => result === 'delivered'));
    const heard = () =>
      endpoints.map(
        ({ receiver }) => receiver.received.filter((c) => c.headers['webhook-id'] === eventId).length,
      );
    const heardBefore = heard();
    const event: TeamEvent = {
      id: eventId,
      type: row.type,
      teamId: row.teamId,
      runId: row.runId,
      run: row.run,
      data: row.data,
      occurredAt: row.occurredAt,
      ...(row.order !== undefined ? { order: row.order } : {}),
    };
    assert.equal(await raiseTeamEvent(client, stack.config.temporalTaskQueue, event), true);
    const again = await client.workflow.getHandle(teamEventWorkflowId(eventId)).result();
    assert.deepEqual(
      Object.entries(again.deliveries),
      delivered.map(([id]) => [id, 'claimed_elsewhere']),
    );
    assert.deepEqual(heard(), heardBefore);
  });
});
