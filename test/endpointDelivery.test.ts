// Team endpoints' delivery, on the real servers: several endpoints of one team, each subscribed to its own set of
// event types, runs that pause, cross their budget, stall and recover, finish, fail or are cancelled; each endpoint
// receives exactly the events it subscribed to from after its creation, each once, verified with the
// standardwebhooks library, with a sequence increasing per run; an endpoint's rateLimitPerSecond holds; another
// team hears nothing. Its size is a parameter: ENDPOINT_TEST_ENDPOINTS (default 4) endpoints and
// ENDPOINT_TEST_RUNS (default 6) runs; the size is 20 and 100.
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { createActivities } from '../activities';
import { createSweepActivities } from '../activities/sweep';
import { createRunsService } from '../runs/service';
import { endpointRateKey, endpointRateWindows } from '../activities/endpoint';
import { raiseTeamEvent } from '../client/teamEvents';
import { DEFAULT_EPISODE_OPTIONS, teamEventWorkflowId } from '../contract/workflows';
import {
  SUBSCRIBABLE_EVENT_TYPES,
  endpointDeliveryKey,
  interactionTeamEvent,
  type TeamEvent,
} from '../domain/teamEvents';
import type { Stores } from '../store';
import { createClaimStore } from '../store/claims';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { EndpointRuns, owedTo, typesOf, type RegisteredEndpoint } from './support/endpointRuns';
import { startFamilyStack, sweepActivitiesOf, type FamilyStack } from './support/familyStack';
import { saveHistory } from './support/harness';
import { waitUntil } from './support/waitUntil';

const ENDPOINTS = Number(process.env.ENDPOINT_TEST_ENDPOINTS ?? 4);
const RUNS = Number(process.env.ENDPOINT_TEST_RUNS ?? 6);
const RATE = 2;

describe('team endpoints: delivery', function () {
  this.timeout(300_000);
  let stack: FamilyStack;
  let stores: Stores;
  let client: Client;
  let runs: EndpointRuns;

  before(async () => {
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_RETRY_SECONDS: '1,1,1',
      STALL_AFTER_SECONDS: '3',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ stores, client } = stack);
    runs = new EndpointRuns({
      admin: adminOf(stack.anonymous, 'ada', 'acme'),
      alice: stack.anonymous.as('alice', 'acme'),
      stores,
      db: stack.mongo.db,
    });
  });
  after(async () => {
    await stack?.stop();
    await runs?.close();
  });

  it('each endpoint gets exactly the events it subscribed to from after its creation, once, in sequence per run', async () => {
    for (let i = 0; i < ENDPOINTS; i++) await runs.register(typesOf(i));
    const paced = await runs.register(
      ['run.finished', 'run.failed', 'run.cancelled', 'interaction.answered'],
      {
        rateLimitPerSecond: RATE,
      },
    );
    const other = await (async () => {
      const receiver = await CallbackReceiver.start();
      const res = await adminOf(stack.anonymous, 'eve', 'globex').post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: [...SUBSCRIBABLE_EVENT_TYPES],
      });
      assert.equal(res.status, 201, res.text);
      return receiver;
    })();

    const first = await runs.runLives(0, Math.ceil(RUNS / 2));
    // Created now: it hears only of what happens from here on.
    const late = await runs.register([...SUBSCRIBABLE_EVENT_TYPES]);
    const second = await runs.runLives(first.length, RUNS - first.length);
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
    const events = await runs.waitForEveryEvent(
      runIds,
      answered.map((a) => a.id),
    );
    runs.assertSequences(events, runIds);
    await runs.waitForOwed(events);
    // Nothing more comes: every event workflow of these runs closed.
    await EndpointRuns.waitForDeliveries(client, events);
    runs.assertEachOwedOnce(events);
    const owed = (endpoint: RegisteredEndpoint) => owedTo(endpoint, events);
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
      runs.endpoints.map(
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
  /** An interaction.answered event of a run of `teamId`, answered by `answeredBy` now. */
  const answeredEvent = (teamId: string, answeredBy: string): TeamEvent => {
    const answeredAt = new Date().toISOString();
    return interactionTeamEvent(
      'interaction.answered',
      { id: `run_${teamId}`, teamId, status: 'running', title: teamId },
      { id: `int_${teamId}` },
      { answeredBy, answeredAt },
      answeredAt,
    );
  };

  it("a batch of first attempts in which one endpoint's attempt fails answers the others' deliveries (none sent again)", async () => {
    const admin = adminOf(stack.anonymous, 'bea', 'batch');
    const fine = await CallbackReceiver.start();
    const failing = await CallbackReceiver.start();
    try {
      const register = async (url: string, extra: Record<string, unknown> = {}) => {
        const res = await admin.post('/api/v1/endpoints', {
          url,
          eventTypes: ['interaction.answered'],
          ...extra,
        });
        assert.equal(res.status, 201, res.text);
        return res.body.id as string;
      };
      const fineId = await register(fine.url);
      const failingId = await register(failing.url, { rateLimitPerSecond: 5 });
      // The failing endpoint's rate store does not answer (a store restarting): its attempt throws before sending.
      const rateLimits: Stores['rateLimits'] = {
        ...stores.rateLimits,
        hit: (key, ...rest) =>
          key.startsWith(endpointRateKey(failingId, ''))
            ? Promise.reject(new Error('the store is restarting'))
            : stores.rateLimits.hit(key, ...rest),
      };
      const activities = createActivities({
        config: stack.config,
        stores: { ...stores, rateLimits },
        client,
        log: () => undefined,
      });
      const event = answeredEvent('batch', 'bea');
      const recorded = await activities.recordTeamEvent(event);
      assert.deepEqual([...recorded.endpointIds].sort(), [fineId, failingId].sort());
      const place = { attempt: 1, waitIfRetried: 1, trigger: 'episode' as const };
      const results = await activities.sendEndpointEventToEach(
        event.id,
        recorded.endpointIds.map((endpointId) => ({ endpointId, place })),
      );
      const of = (id: string) => results[recorded.endpointIds.indexOf(id)];
      assert.equal(of(fineId).result, 'delivered');
      assert.equal(of(failingId).result, 'retry', 'the failed one goes again on its schedule');
      assert.match((of(failingId) as { detail: string }).detail, /the store is restarting/);
      assert.equal(fine.received.length, 1);
      assert.equal(failing.received.length, 0);
      // Its next attempt, alone, meets the store still restarting: a failed attempt on its schedule, as in the
      // batch (thrown, the workflow released the delivery, left to the sweep behind its siblings' schedules).
      const next = await activities.sendEndpointEvent(event.id, failingId, {
        attempt: 2,
        waitIfRetried: 1,
        trigger: 'episode',
      });
      assert.equal(next.result, 'retry');
      assert.match((next as { detail: string }).detail, /the store is restarting/);
      // Its schedule's last attempt throws as before: the delivery is released, for the sweep once the store is back.
      await assert.rejects(
        activities.sendEndpointEvent(event.id, failingId, { attempt: 3, trigger: 'episode' }),
        /the store is restarting/,
      );
      assert.equal(failing.received.length, 0);
    } finally {
      await fine.close();
      await failing.close();
    }
  });
  /**
   * A released delivery whose endpoint's secret was rotated and description edited (its types and state sent
   * unchanged) while its event's workflow was still on another endpoint's schedule: the sweep raises it again.
   * `legacy`: the endpoint's row is from before it kept when its subscription changed.
   */
  async function raisedAfterEdits(team: string, legacy: boolean): Promise<void> {
    const admin = adminOf(stack.anonymous, 'eda', team);
    const receiver = await CallbackReceiver.start();
    try {
      const created = await admin.post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: ['interaction.answered'],
      });
      assert.equal(created.status, 201, created.text);
      if (legacy)
        await stack.mongo.db
          .collection<{ _id: string }>('endpoints')
          .updateOne({ _id: created.body.id }, { $unset: { subscriptionChangedAt: '' } });
      const path = `/api/v1/endpoints/${created.body.id}`;
      const activities = createActivities({ config: stack.config, stores, client, log: () => undefined });
      const event = answeredEvent(team, 'eda');
      // Recorded by its raiser, its delivery released (its attempts failed on our side); while its workflow was
      // still on another endpoint's schedule, this one's secret was rotated and its description edited: neither
      // changes what it is owed.
      await activities.recordTeamEvent(event);
      assert.equal((await admin.post(`${path}/rotate-secret`, {})).status, 200);
      assert.equal((await admin.request('PATCH', path, { description: 'ours' })).status, 200);
      // As a form sends it: every field, the subscription as it was.
      const resent = { description: 'ours', eventTypes: ['interaction.answered'], disabled: false };
      assert.equal((await admin.request('PATCH', path, resent)).status, 200);
      await sweepActivitiesOf(stack).sweepOnce();
      const [delivered] = await receiver.waitFor(1);
      assert.equal(delivered.headers['webhook-id'], event.id);
      const result = await client.workflow.getHandle(teamEventWorkflowId(event.id)).result();
      assert.deepEqual(result.deliveries, { [created.body.id]: 'delivered' });
    } finally {
      await receiver.close();
    }
  }

  it('a released delivery is raised again by the sweep after its endpoint was edited (its secret, its description, its types and state sent unchanged)', () =>
    raisedAfterEdits('edited', false));

  it('so is one whose endpoint row is from before it kept when its subscription changed', () =>
    raisedAfterEdits('edited-legacy', true));

  it('an event raised again by the sweep reaches the endpoints owed it when it was recorded, not one subscribed to its type since', async () => {
    const admin = adminOf(stack.anonymous, 'sua', 'subscribed-since');
    const [owedReceiver, laterReceiver] = await Promise.all([
      CallbackReceiver.start(),
      CallbackReceiver.start(),
    ]);
    try {
      const owed = await admin.post('/api/v1/endpoints', {
        url: owedReceiver.url,
        eventTypes: ['interaction.answered'],
      });
      const later = await admin.post('/api/v1/endpoints', {
        url: laterReceiver.url,
        eventTypes: ['interaction.escalated'],
      });
      assert.equal(later.status, 201, later.text);
      const activities = createActivities({ config: stack.config, stores, client, log: () => undefined });
      const event = answeredEvent('subscribed-since', 'sua');
      // Recorded for the one subscribed then; its delivery released. The other takes the type on afterwards.
      assert.deepEqual((await activities.recordTeamEvent(event)).endpointIds, [owed.body.id]);
      const retyped = { eventTypes: ['interaction.escalated', 'interaction.answered'] };
      assert.equal((await admin.request('PATCH', `/api/v1/endpoints/${later.body.id}`, retyped)).status, 200);
      await sweepActivitiesOf(stack).sweepOnce();
      const result = await client.workflow.getHandle(teamEventWorkflowId(event.id)).result();
      assert.deepEqual(result.deliveries, { [owed.body.id]: 'delivered' });
      assert.equal(laterReceiver.received.length, 0, 'the endpoint subscribed since hears nothing of it');
    } finally {
      await Promise.all([owedReceiver.close(), laterReceiver.close()]);
    }
  });

  it("a pause under the standby veto whose outcome was never emitted is announced to the team's endpoints by the sweep", async () => {
    const admin = adminOf(stack.anonymous, 'vera', 'vetoed');
    const owner = stack.anonymous.as('val', 'vetoed');
    const receiver = await CallbackReceiver.start();
    try {
      const created = await admin.post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: ['run.input_requested'],
      });
      assert.equal(created.status, 201, created.text);
      const run = await owner.post('/api/v1/runs', { title: 'Watched, its emit lost' });
      const runId = run.body.id as string;
      assert.equal((await owner.put(`/api/v1/assistants/asst_1/watches/${runId}`)).status, 200);
      // The pause lands; its outcome's emit fails (Temporal away): no episode, no team event.
      const emitLost = createRunsService({
        ...stores,
        emitter: {
          emitRunOutcome: async () => {
            throw new Error('Temporal away');
          },
        },
      });
      const { interactionId } = await emitLost.pause({ userId: 'val', teamId: 'vetoed' }, runId, 'Ship it?');
      const pass = await sweepActivitiesOf(stack).sweepOnce();
      assert.ok((pass.teamEventsRaised ?? 0) >= 1, JSON.stringify(pass));
      const [delivered] = await receiver.waitFor(1);
      const body = JSON.parse(delivered.body) as { type: string; data: { interactionId: string } };
      assert.equal(body.type, 'run.input_requested');
      assert.equal(body.data.interactionId, interactionId);
      await waitUntil('its delivery settled', () =>
        stores.claims.wasDelivered(
          endpointDeliveryKey(delivered.headers['webhook-id'] as string, created.body.id),
        ),
      );
      await sweepActivitiesOf(stack).sweepOnce();
      assert.equal(receiver.received.length, 1, 'announced once');
    } finally {
      await receiver.close();
    }
  });

  it('an event recorded whose delivery was released (no claim, nothing sent) is raised again by the sweep, once', async () => {
    const admin = adminOf(stack.anonymous, 'rea', 'released');
    const receiver = await CallbackReceiver.start();
    try {
      const created = await admin.post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: ['interaction.answered'],
      });
      assert.equal(created.status, 201, created.text);
      const activities = createActivities({ config: stack.config, stores, client, log: () => undefined });
      const event = answeredEvent('released', 'rea');
      // Recorded by its raiser; its workflow then released the delivery (its attempts failed on our side).
      const recorded = await activities.recordTeamEvent(event);
      assert.deepEqual(recorded.endpointIds, [created.body.id]);
      const sweep = sweepActivitiesOf(stack);
      // (Other tests' events in this window may be raised too: counted, not asserted.)
      const pass = await sweep.sweepOnce();
      assert.ok((pass.teamEventsRaised ?? 0) >= 1, JSON.stringify(pass));
      const [delivered] = await receiver.waitFor(1);
      assert.equal(delivered.headers['webhook-id'], event.id);
      await waitUntil('its delivery settled', () =>
        stores.claims.wasDelivered(endpointDeliveryKey(event.id, created.body.id)),
      );
      const handle = client.workflow.getHandle(teamEventWorkflowId(event.id));
      const raised = (await handle.describe()).runId;
      await sweep.sweepOnce();
      assert.equal((await handle.describe()).runId, raised, 'a settled delivery is not raised again');
      assert.equal(receiver.received.length, 1);
    } finally {
      await receiver.close();
    }
  });

  describe('an event whose delivery was released after it left the window', () => {
    const hoursAgo = (hours: number) => new Date(Date.now() - hours * 3600_000);

    /**
     * An event of `team` recorded for its endpoint on `url`, its row made `recordedHoursAgo` old (past the
     * window), its delivery claimed and released at each of `releases` (a raise late in the window whose
     * schedule failed again): the event and its delivery's claim key.
     */
    async function releasedLate(team: string, url: string, recordedHoursAgo: number, releases: Date[]) {
      const created = await adminOf(stack.anonymous, 'lea', team).post('/api/v1/endpoints', {
        url,
        eventTypes: ['interaction.answered'],
      });
      assert.equal(created.status, 201, created.text);
      const activities = createActivities({ config: stack.config, stores, client, log: () => undefined });
      const event = answeredEvent(team, 'lea');
      assert.deepEqual((await activities.recordTeamEvent(event)).endpointIds, [created.body.id]);
      // As it was then: the endpoint there before the event, the event recorded as it happened.
      const before = hoursAgo(recordedHoursAgo + 1);
      await stack.mongo.db
        .collection<{ _id: string }>('endpoints')
        .updateOne(
          { _id: created.body.id },
          { $set: { createdAt: before, updatedAt: before, subscriptionChangedAt: before } },
        );
      await stack.mongo.db
        .collection<{ _id: string }>('team_events')
        .updateOne({ _id: event.id }, { $set: { recordedAt: hoursAgo(recordedHoursAgo) } });
      const key = endpointDeliveryKey(event.id, created.body.id as string);
      for (const at of releases) {
        const claims = createClaimStore(stack.mongo.db, {
          graceSeconds: stack.config.claimGraceSeconds,
          now: () => at,
        });
        assert.ok(await claims.tryMark(key, `raise@${at.getTime()}`));
        await claims.unmark(key, `raise@${at.getTime()}`);
      }
      return { event, key, endpointId: created.body.id as string };
    }

    it('is raised again: a release reaches the sweep for a window from its first release', async () => {
      const receiver = await CallbackReceiver.start();
      try {
        // Recorded three hours ago (the window is one), released a minute ago.
        const { event, endpointId } = await releasedLate('released-late', receiver.url, 3, [
          hoursAgo(1 / 60),
        ]);
        const pass = await sweepActivitiesOf(stack).sweepOnce();
        assert.ok((pass.teamEventsRaised ?? 0) >= 1, JSON.stringify(pass));
        const [delivered] = await receiver.waitFor(1);
        assert.equal(delivered.headers['webhook-id'], event.id);
        const result = await client.workflow.getHandle(teamEventWorkflowId(event.id)).result();
        assert.deepEqual(result.deliveries, { [endpointId]: 'delivered' });
      } finally {
        await receiver.close();
      }
    });

    it('released for an endpoint no longer owed it (disabled since), it is not raised pass after pass: given up at once', async () => {
      const receiver = await CallbackReceiver.start();
      try {
        // A recover's send that failed released it a minute ago; the endpoint was disabled since.
        const { event, key, endpointId } = await releasedLate('not-owed', receiver.url, 3, [
          hoursAgo(1 / 60),
        ]);
        const admin = adminOf(stack.anonymous, 'lea', 'not-owed');
        assert.equal(
          (await admin.request('PATCH', `/api/v1/endpoints/${endpointId}`, { disabled: true })).status,
          200,
        );
        const sweep = sweepActivitiesOf(stack);
        await sweep.sweepOnce();
        await sweep.sweepOnce();
        const handle = client.workflow.getHandle(teamEventWorkflowId(event.id));
        await assert.rejects(handle.describe(), /not found/i, 'never raised');
        assert.deepEqual(await stores.claims.describe(key), {
          state: 'delivered',
          result: 'gave_up: no longer owed to the endpoint (changed since)',
        });
      } finally {
        await receiver.close();
      }
    });

    it('past a window from its first release, once nothing released it for two hours, it is given up visibly', async () => {
      const receiver = await CallbackReceiver.start();
      try {
        // The window four hours: recorded six hours ago, first released four and a half, last two and a half.
        const { event, key } = await releasedLate('released-long', receiver.url, 6, [
          hoursAgo(4.5),
          hoursAgo(2.5),
        ]);
        const pass = await sweepActivitiesOf(stack, { lookbackSeconds: 4 * 3600 }).sweepOnce();
        assert.ok((pass.gaveUpReleased ?? 0) >= 1, JSON.stringify(pass));
        assert.deepEqual(await stores.claims.describe(key), {
          state: 'delivered',
          result: "gave_up: released past the sweep's reach",
        });
        assert.equal(receiver.received.length, 0);
        const handle = client.workflow.getHandle(teamEventWorkflowId(event.id));
        await assert.rejects(handle.describe(), /not found/i, 'never raised');
      } finally {
        await receiver.close();
      }
    });
  });
});

describe('team endpoints: a delivery waiting on its schedule', function () {
  this.timeout(120_000);
  let stack: FamilyStack;

  before(async () => {
    // An hour between a failed attempt and the next: the claim's five minutes of grace pass long before it.
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_RETRY_SECONDS: '3600',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
  });
  after(() => stack?.stop());

  const answered = (teamId: string): TeamEvent => {
    const at = new Date().toISOString();
    return interactionTeamEvent(
      'interaction.answered',
      { id: `run_${teamId}`, teamId, status: 'running', title: teamId },
      { id: `int_${teamId}` },
      { answeredBy: 'someone', answeredAt: at },
      at,
    );
  };

  it('an attempt after its endpoint dropped the event type sends nothing and ends the delivery', async () => {
    const receiver = await CallbackReceiver.start();
    try {
      const admin = adminOf(stack.anonymous, 'admin-drops', 'drops');
      const created = await admin.post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: ['interaction.answered', 'interaction.escalated'],
      });
      assert.equal(created.status, 201, created.text);
      const endpointId = created.body.id as string;
      const activities = createActivities({
        config: stack.config,
        stores: stack.stores,
        client: stack.client,
        log: () => undefined,
      });
      const event = answered('drops');
      assert.deepEqual((await activities.recordTeamEvent(event)).endpointIds, [endpointId]);
      // Between the event and its next attempt (hours later on the schedule), the endpoint stops subscribing to it.
      const changed = await admin.request('PATCH', `/api/v1/endpoints/${endpointId}`, {
        eventTypes: ['interaction.escalated'],
      });
      assert.equal(changed.status, 200, changed.text);
      const attempt = await activities.sendEndpointEvent(event.id, endpointId, {
        attempt: 2,
        trigger: 'episode',
      });
      assert.equal(attempt.result, 'stop', JSON.stringify(attempt));
      assert.equal(receiver.received.length, 0, 'nothing was sent');
    } finally {
      await receiver.close();
    }
  });

  it("holds its claim through the wait: the sweep's pass is not spent on it, and an event truly owed is raised", async () => {
    const down = await CallbackReceiver.start();
    const up = await CallbackReceiver.start();
    try {
      down.answerAlways({ status: 503 });
      const register = async (team: string, url: string) => {
        const res = await adminOf(stack.anonymous, `admin-${team}`, team).post('/api/v1/endpoints', {
          url,
          eventTypes: ['interaction.answered'],
        });
        assert.equal(res.status, 201, res.text);
        return res.body.id as string;
      };
      const downId = await register('waits', down.url);
      await register('owed', up.url);
      // The first event's attempt fails, and its workflow waits an hour for the next.
      const waiting = answered('waits');
      assert.ok(await raiseTeamEvent(stack.client, stack.config.temporalTaskQueue, waiting));
      await down.waitFor(1, 60_000);
      const handle = stack.client.workflow.getHandle(teamEventWorkflowId(waiting.id));
      await waitUntil('its workflow to wait for the next attempt', async () =>
        (await handle.fetchHistory()).events!.some((e) => e.timerStartedEventAttributes),
      );
      // The second was recorded and its delivery released (nothing sent, no claim): owed.
      const owed = answered('owed');
      const activities = createActivities({
        config: stack.config,
        stores: stack.stores,
        client: stack.client,
        log: () => undefined,
      });
      await activities.recordTeamEvent(owed);
      // Ten minutes on, a pass that raises one event: the waiting one's claim is past its grace, but its holder
      // waits on a timer, not dead.
      const later = new Date(Date.now() + 10 * 60_000);
      const sweep = createSweepActivities({
        ...stack.stores,
        claims: createClaimStore(stack.mongo.db, {
          graceSeconds: stack.config.claimGraceSeconds,
          now: () => later,
        }),
        client: stack.client,
        taskQueue: stack.config.temporalTaskQueue,
        episodeOptions: DEFAULT_EPISODE_OPTIONS,
        families: { ops: false },
        lookbackSeconds: 3600,
        pageSize: 100,
        teamEventsPerPass: 1,
        now: () => later,
      });
      const pass = await sweep.sweepOnce();
      assert.equal(pass.teamEventsRaised, 1, JSON.stringify(pass));
      await up.waitFor(1, 60_000);
      assert.equal(up.received[0].headers['webhook-id'], owed.id);
      assert.ok(!(await stack.stores.claims.wasDelivered(endpointDeliveryKey(waiting.id, downId))));
    } finally {
      await down.close();
      await up.close();
    }
  });
});
