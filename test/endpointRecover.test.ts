// An endpoint's recover on the real servers sends only what the endpoint did not get. The attempt log is written
// best effort (a store restarting as the receiver answers loses the row), so a delivery is known by its settled
// claim as well: one delivered whose row was lost is not sent again.
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import { MongoClient } from 'mongodb';
import { createActivities } from '../activities';
import { missedEvents } from '../activities/endpoint';
import {
  CALLBACK_ATTEMPT_MARGIN_SECONDS,
  endpointRecoverWorkflowId,
  workflowTypes,
  type EndpointRecoverInput,
} from '../contract/workflows';
import { endpointDeliveryKey, interactionTeamEvent, type TeamEvent } from '../domain/teamEvents';
import { createStores } from '../store';
import type { ClaimRow } from '../store/claims';
import type { TeamEventRow } from '../store/endpoint/teamEvents';
import { adminOf } from './support/admin';
import type { CallbackAttempt } from '../contract/activities';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, sweepActivitiesOf, type FamilyStack } from './support/familyStack';
import { recordFixture } from './support/harness';
import { waitUntil } from './support/waitUntil';

describe('team endpoints: a recover', function () {
  this.timeout(120_000);
  let stack: FamilyStack;
  let receiver: CallbackReceiver;
  /** Claims whose next settle by the worker fails, as it does while the store is away (once each). */
  const failingSettles = new Set<string>();
  /** Claims whose next settle by the worker never answers, as a store that stalls (once each). */
  const stallingSettles = new Set<string>();
  /** Deliveries whose attempt rows the worker's log loses, as a store that is away (every write of theirs). */
  const lostAttemptRows = new Set<string>();

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack(
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1,1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      {
        workerStores: (stores) => ({
          ...stores,
          claims: {
            ...stores.claims,
            markDelivered: async (key, ...rest) => {
              if (failingSettles.delete(key)) throw new Error('the store is away');
              if (stallingSettles.delete(key)) return new Promise<boolean>(() => undefined);
              return stores.claims.markDelivered(key, ...rest);
            },
            resettle: async (key, ...rest) => {
              if (stallingSettles.delete(key)) return new Promise<boolean>(() => undefined);
              return stores.claims.resettle(key, ...rest);
            },
          },
          endpointAttempts: {
            ...stores.endpointAttempts,
            record: async (row, ...rest) => {
              if (lostAttemptRows.has(row.episodeId)) throw new Error('the store is away');
              return stores.endpointAttempts.record(row, ...rest);
            },
            recordOnce: async (row, ...rest) => {
              if (lostAttemptRows.has(row.episodeId)) throw new Error('the store is away');
              return stores.endpointAttempts.recordOnce(row, ...rest);
            },
          },
        }),
      },
    );
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  const admin = () => adminOf(stack.anonymous, 'ada', 'acme');

  /** An endpoint of `team` (its admin `user`) on `url`, subscribed to interaction.answered: its id. */
  async function answersEndpoint(user: string, team: string, url: string): Promise<string> {
    const created = await adminOf(stack.anonymous, user, team).post('/api/v1/endpoints', {
      url,
      eventTypes: ['interaction.answered'],
    });
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  }

  /** Records an answer of `team`'s run as its raiser would, its delivery never run (released, or never started). */
  async function recordedAnswer(team: string, by: string, suffix: string, at: string) {
    const event = interactionTeamEvent(
      'interaction.answered',
      { id: `run_${team}`, teamId: team, status: 'running', title: team },
      { id: `int_${team}${suffix}` },
      { answeredBy: by, answeredAt: at },
      at,
    );
    const activities = createActivities({
      config: stack.config,
      stores: stack.stores,
      client: stack.client,
      log: () => undefined,
    });
    await activities.recordTeamEvent(event);
    return event;
  }

  /** The stores on a client of their own that reports every command it sends (to count or weigh them). */
  async function withMonitoredStores(
    use: (stores: ReturnType<typeof createStores>, monitored: MongoClient) => Promise<void>,
  ): Promise<void> {
    const monitored = new MongoClient(stack.config.mongoUrl, { monitorCommands: true });
    await monitored.connect();
    try {
      await use(
        createStores(monitored.db(stack.config.mongoDb), {
          claimGraceSeconds: stack.config.claimGraceSeconds,
        }),
        monitored,
      );
    } finally {
      await monitored.close();
    }
  }

  /** An endpoint of acme on the receiver, subscribed to one event type: its id. */
  async function createEndpoint(eventType: string): Promise<string> {
    const created = await admin().post('/api/v1/endpoints', { url: receiver.url, eventTypes: [eventType] });
    assert.equal(created.status, 201, created.text);
    return created.body.id as string;
  }

  it('does not send again an event delivered whose attempt row was lost', async () => {
    const since = new Date();
    const endpointId = await createEndpoint('run.finished');
    const alice = stack.anonymous.as('alice', 'acme');
    const run = await alice.post('/api/v1/runs', { title: 'delivered, row lost' });
    assert.equal(run.status, 201, run.text);
    assert.equal(
      (await alice.post(`/api/v1/runs/${run.body.id}/complete`, { finalAnswer: 'ok' })).status,
      200,
    );
    const eventId = `ev:${run.body.id}:end`;
    await waitUntil('delivered', () => receiver.received.length > 0);
    const delivery = await stack.client.workflow.getHandle(`team-event|${eventId}`).result();
    assert.equal(delivery.deliveries[endpointId], 'delivered');
    assert.equal(receiver.received.length, 1);

    const lost = await stack.mongo.db
      .collection('endpoint_attempts')
      .deleteMany({ episodeId: endpointDeliveryKey(eventId, endpointId) });
    assert.equal(lost.deletedCount, 1);
    const recover = await admin().post(`/api/v1/endpoints/${endpointId}/recover`, {
      since: since.toISOString(),
    });
    assert.equal(recover.status, 202, recover.text);
    const result = await stack.client.workflow.getHandle(recover.body.id).result();
    assert.deepEqual(result, { found: 0, delivered: 0, failed: 0 });
    assert.equal(receiver.received.length, 1, 'sent once');
  });

  it('leaves an event whose delivery is still on its schedule to it: nothing sent twice', async () => {
    const since = new Date();
    const waiting = await CallbackReceiver.start();
    try {
      // The receiver asks for an hour: the event's schedule waits it out, its claim in hand.
      waiting.answerAlways({ status: 503, headers: { 'Retry-After': '3600' } });
      const created = await adminOf(stack.anonymous, 'wes', 'waits').post('/api/v1/endpoints', {
        url: waiting.url,
        eventTypes: ['run.finished'],
      });
      assert.equal(created.status, 201, created.text);
      const endpointId = created.body.id as string;
      const owner = stack.anonymous.as('wes', 'waits');
      const run = await owner.post('/api/v1/runs', { title: 'still retrying' });
      assert.equal(run.status, 201, run.text);
      assert.equal(
        (await owner.post(`/api/v1/runs/${run.body.id}/complete`, { finalAnswer: 'ok' })).status,
        200,
      );
      const eventId = `ev:${run.body.id}:end`;
      const key = endpointDeliveryKey(eventId, endpointId);
      await waitUntil('the first attempt failed and logged its next', async () => {
        const [last] = await stack.stores.endpointAttempts.listForEpisode(key, 1);
        return last?.nextAttemptAt !== undefined;
      });
      const recover = await adminOf(stack.anonymous, 'wes', 'waits').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const result = await stack.client.workflow.getHandle(recover.body.id).result();
      assert.deepEqual(result, { found: 0, delivered: 0, failed: 0 });
      assert.equal(waiting.received.length, 1, "the schedule's attempt only");
      await stack.client.workflow.getHandle(`team-event|${eventId}`).terminate('the test is done');
    } finally {
      await waiting.close();
    }
  });

  it("sends an event whose delivery's claim was left pending by a holder long gone (its release lost): a dead claim is not one in hand", async () => {
    const since = new Date();
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('dee', 'dead-claim', once.url);
      const event = await recordedAnswer('dead-claim', 'dee', '', new Date().toISOString());
      // Its delivery threw past its retries with the store away, and the release failed too: the claim stays
      // pending, past the grace by an hour. The sweep does not raise it once the endpoint was disabled and
      // enabled since, nor once the event is past its window: the recover is what is left.
      const key = endpointDeliveryKey(event.id, endpointId);
      await stack.mongo.db.collection<ClaimRow>('sent_notifications').insertOne({
        _id: key,
        holder: `team-event|${event.id}/gone`,
        delivered: false,
        sent_at: new Date(Date.now() - stack.config.claimGraceSeconds * 1000 - 3600_000),
      });
      const recover = await adminOf(stack.anonymous, 'dee', 'dead-claim').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const result = await stack.client.workflow.getHandle(recover.body.id).result();
      assert.deepEqual(result, { found: 1, delivered: 1, failed: 0 });
      assert.equal(once.received.length, 1, 'delivered once');
      assert.deepEqual(await stack.stores.claims.describe(key), { state: 'delivered', result: 'delivered' });
    } finally {
      await once.close();
    }
  });

  it("a recover's sends have the receiver's timeout (CALLBACK_TIMEOUT_SECONDS) and a margin, as the event's own schedule has", async () => {
    const since = new Date();
    const timed = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('tim', 'timed-recover', timed.url);
      await recordedAnswer('timed-recover', 'tim', '', new Date().toISOString());
      const recover = await adminOf(stack.anonymous, 'tim', 'timed-recover').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const handle = stack.client.workflow.getHandle(recover.body.id);
      assert.deepEqual(await handle.result(), { found: 1, delivered: 1, failed: 0 });
      const sends = ((await handle.fetchHistory()).events ?? [])
        .map((e) => e.activityTaskScheduledEventAttributes)
        .filter((a) => a?.activityType?.name === 'sendEndpointEvent');
      assert.deepEqual(
        sends.map((a) => Number(a!.startToCloseTimeout?.seconds)),
        [stack.config.callbackTimeoutSeconds + CALLBACK_ATTEMPT_MARGIN_SECONDS],
      );
    } finally {
      await timed.close();
    }
  });

  it('an event a recover delivered is settled: the sweep does not raise it again, nor does a replay send it', async () => {
    const since = new Date();
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('rex', 'recovered', once.url);
      // Recorded, its delivery released (no claim, nothing sent): the admin recovers it before the sweep passes.
      const event = await recordedAnswer('recovered', 'rex', '', new Date().toISOString());
      const recover = await adminOf(stack.anonymous, 'rex', 'recovered').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const result = await stack.client.workflow.getHandle(recover.body.id).result();
      assert.deepEqual(result, { found: 1, delivered: 1, failed: 0 });
      const key = endpointDeliveryKey(event.id, endpointId);
      assert.deepEqual(await stack.stores.claims.describe(key), { state: 'delivered', result: 'delivered' });
      const pass = await sweepActivitiesOf(stack, { lookbackSeconds: 3600 }).sweepOnce();
      assert.equal(pass.teamEventsRaised ?? 0, 0, JSON.stringify(pass));
      assert.equal(once.received.length, 1, 'delivered once');
    } finally {
      await once.close();
    }
  });

  it('an event a recover delivered whose settle failed (the store away) is settled all the same: the sweep never sends it again', async () => {
    const since = new Date();
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('sal', 'settles', once.url);
      const event = await recordedAnswer('settles', 'sal', '', new Date().toISOString());
      const key = endpointDeliveryKey(event.id, endpointId);
      failingSettles.add(key);
      const recover = await adminOf(stack.anonymous, 'sal', 'settles').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const handle = stack.client.workflow.getHandle(recover.body.id);
      const result = await handle.result();
      recordFixture(stack.config, handle.workflowId, 'endpoint-recover-history-settled-after-send.json');
      assert.deepEqual(result, { found: 1, delivered: 1, failed: 0 });
      assert.equal(failingSettles.has(key), false, "the send's own settle failed");
      assert.equal(once.received.length, 1);
      // Long after, a claim left pending has gone stale, and the sweep would raise the event to send it again.
      await stack.mongo.db
        .collection<{ _id: string }>('sent_notifications')
        .updateOne({ _id: key }, { $set: { sent_at: new Date(Date.now() - 3600_000) } });
      const pass = await sweepActivitiesOf(stack, { lookbackSeconds: 3600 }).sweepOnce();
      assert.equal(pass.teamEventsRaised ?? 0, 0, JSON.stringify(pass));
      assert.deepEqual(await stack.stores.claims.describe(key), { state: 'delivered', result: 'delivered' });
    } finally {
      await once.close();
    }
  });

  it('an event a recover delivered whose settle stalled is not sent again by its retry', async () => {
    const since = new Date();
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('sol', 'stalls', once.url);
      const event = await recordedAnswer('stalls', 'sol', '', new Date().toISOString());
      const key = endpointDeliveryKey(event.id, endpointId);
      stallingSettles.add(key);
      const recover = await adminOf(stack.anonymous, 'sol', 'stalls').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const result = await stack.client.workflow.getHandle(recover.body.id).result();
      assert.deepEqual(result, { found: 1, delivered: 1, failed: 0 });
      assert.equal(stallingSettles.has(key), false, "the send's own settle stalled");
      assert.equal(once.received.length, 1, 'sent once');
      assert.deepEqual(await stack.stores.claims.describe(key), { state: 'delivered', result: 'delivered' });
    } finally {
      await once.close();
    }
  });

  it('an event whose delivery gave up, delivered by a recover whose resettle stalled, is not sent again by its retry', async () => {
    const since = new Date();
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('gus', 'gave-up', once.url);
      const event = await recordedAnswer('gave-up', 'gus', '', new Date().toISOString());
      const key = endpointDeliveryKey(event.id, endpointId);
      // Its schedule gave up (the receiver was down), its attempt rows lost: the recover owes it.
      assert.ok(await stack.stores.claims.tryMark(key, 'schedule'));
      assert.ok(await stack.stores.claims.markDelivered(key, 'schedule', 'gave_up: http 503'));
      stallingSettles.add(key);
      const recover = await adminOf(stack.anonymous, 'gus', 'gave-up').post(
        `/api/v1/endpoints/${endpointId}/recover`,
        { since: since.toISOString() },
      );
      assert.equal(recover.status, 202, recover.text);
      const result = await stack.client.workflow.getHandle(recover.body.id).result();
      assert.deepEqual(result, { found: 1, delivered: 1, failed: 0 });
      assert.equal(stallingSettles.has(key), false, 'its resettle stalled');
      assert.equal(once.received.length, 1, 'sent once');
    } finally {
      await once.close();
    }
  });

  it('an event whose delivery gave up, delivered by a recover that lost its resettle and its attempt row, is settled by it and not sent again', async () => {
    const since = new Date();
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('gil', 'gave-up-lost', once.url);
      const event = await recordedAnswer('gave-up-lost', 'gil', '', new Date().toISOString());
      const key = endpointDeliveryKey(event.id, endpointId);
      assert.ok(await stack.stores.claims.tryMark(key, 'schedule'));
      assert.ok(await stack.stores.claims.markDelivered(key, 'schedule', 'gave_up: http 503'));
      // The store stalls as the receiver answers: neither the resettle nor the attempt's row is written.
      stallingSettles.add(key);
      lostAttemptRows.add(key);
      const recover = () =>
        adminOf(stack.anonymous, 'gil', 'gave-up-lost').post(`/api/v1/endpoints/${endpointId}/recover`, {
          since: since.toISOString(),
        });
      const first = await recover();
      assert.equal(first.status, 202, first.text);
      const firstResult = await stack.client.workflow.getHandle(first.body.id).result();
      recordFixture(stack.config, first.body.id, 'endpoint-recover-history-resettled-after-send.json');
      assert.deepEqual(firstResult, {
        found: 1,
        delivered: 1,
        failed: 0,
      });
      assert.equal(stallingSettles.has(key), false, 'its resettle stalled');
      assert.deepEqual(await stack.stores.claims.describe(key), { state: 'delivered', result: 'delivered' });
      // A later recover over the same time finds it delivered: the receiver has it once.
      const second = await recover();
      assert.equal(second.status, 202, second.text);
      await stack.client.workflow.getHandle(second.body.id).result();
      assert.equal(once.received.length, 1, 'sent once');
    } finally {
      lostAttemptRows.clear();
      await once.close();
    }
  });

  it("a recover's send retried after it sent and settled (its worker lost before the answer) answers delivered, not failed", async () => {
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('ret', 'retried', once.url);
      const fresh = await recordedAnswer('retried', 'ret', '_fresh', new Date().toISOString());
      // The other's schedule gave up (the receiver was down): the recover sends it and brings its claim up to date.
      const gaveUp = await recordedAnswer('retried', 'ret', '_gave_up', new Date().toISOString());
      const gaveUpKey = endpointDeliveryKey(gaveUp.id, endpointId);
      assert.ok(await stack.stores.claims.tryMark(gaveUpKey, 'schedule'));
      assert.ok(await stack.stores.claims.markDelivered(gaveUpKey, 'schedule', 'gave_up: http 503'));
      const activities = createActivities({
        config: stack.config,
        stores: stack.stores,
        client: stack.client,
        log: () => undefined,
      });
      const place = { attempt: 1, trigger: 'redeliver' as const, recoverId: 'endpoint-recover-retried' };
      for (const event of [fresh, gaveUp]) {
        const send = (attempt: number): Promise<CallbackAttempt> =>
          new MockActivityEnvironment({ attempt, startToCloseTimeoutMs: 60_000 }).run(() =>
            activities.sendEndpointEvent(event.id, endpointId, place),
          );
        // The first attempt's answer never reached Temporal; its retry runs the same send again.
        const first = await send(1);
        assert.equal(first.result, 'delivered', JSON.stringify(first));
        const retried = await send(2);
        assert.equal(retried.result, 'delivered', JSON.stringify(retried));
      }
      assert.equal(once.received.length, 2, 'each sent once');
    } finally {
      await once.close();
    }
  });

  it('an attempt Temporal runs again after it delivered (its worker lost before the answer) answers delivered, sending nothing', async () => {
    const once = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('ret', 'rerun', once.url);
      const event = await recordedAnswer('rerun', 'ret', '_rerun', new Date().toISOString());
      const activities = createActivities({
        config: stack.config,
        stores: stack.stores,
        client: stack.client,
        log: () => undefined,
      });
      const send = (attempt: number): Promise<CallbackAttempt> =>
        new MockActivityEnvironment({
          attempt,
          activityId: '4',
          workflowExecution: { workflowId: `team-event|${event.id}`, runId: `rerun-${event.id}` },
          startToCloseTimeoutMs: 60_000,
        }).run(() => activities.sendEndpointEvent(event.id, endpointId, { attempt: 1, trigger: 'episode' }));
      assert.equal((await send(1)).result, 'delivered');
      // The receiver restarts: a second POST would be answered 503, and that answer would replace the delivery.
      once.answerAlways({ status: 503 });
      assert.equal((await send(2)).result, 'delivered');
      assert.equal(once.received.length, 1, 'sent once');
    } finally {
      await once.close();
    }
  });

  it('a recover longer than one execution continues as new: every missed event sent once, the counts carried', async () => {
    const since = new Date();
    const chainReceiver = await CallbackReceiver.start();
    try {
      const endpointId = await answersEndpoint('ora', 'chained', chainReceiver.url);
      // Five events recorded for it whose workflows never ran: all missed.
      const events: TeamEvent[] = [];
      for (let i = 0; i < 5; i++)
        events.push(await recordedAnswer('chained', 'ora', `_${i}`, new Date(Date.now() + i).toISOString()));
      const input: EndpointRecoverInput = {
        teamId: 'chained',
        endpointId,
        since: since.toISOString(),
        until: new Date(Date.now() + 60_000).toISOString(),
        maxSends: 100,
        sendsPerExecution: 2,
      };
      const handle = await stack.client.workflow.start(workflowTypes.endpointRecover, {
        workflowId: endpointRecoverWorkflowId(endpointId),
        taskQueue: stack.config.temporalTaskQueue,
        args: [input],
      });
      const result = await handle.result();
      recordFixture(
        stack.config,
        handle.workflowId,
        'endpoint-recover-continued-history.json',
        handle.firstExecutionRunId,
      );
      assert.deepEqual(result, { found: 5, delivered: 5, failed: 0 });
      assert.deepEqual(
        chainReceiver.received.map((r) => r.headers['webhook-id']).sort(),
        events.map((e) => e.id).sort(),
        'each once',
      );
      const { events: lastRun } = await handle.fetchHistory();
      assert.equal(
        lastRun![0].workflowExecutionStartedEventAttributes?.continuedExecutionRunId ? 'continued' : 'first',
        'continued',
        'the sends went over more than one execution',
      );
    } finally {
      await chainReceiver.close();
    }
  });

  it('finds what an endpoint missed among many events in a few store reads, not two per event', async () => {
    const since = new Date();
    const endpointId = await createEndpoint('run.failed');
    await withMonitoredStores(async (stores, monitored) => {
      // 240 events of its type, all but every 60th delivered (the claim settled; their attempt rows lost).
      const ids = Array.from({ length: 240 }, (_, i) => `ev:many${i}:end`);
      const now = new Date(Date.now() + 1000);
      for (const [i, id] of ids.entries()) {
        const run = { id: `many${i}`, status: 'failed' as const, title: 'many' };
        await stores.teamEvents.record(
          {
            id,
            type: 'run.failed',
            teamId: 'acme',
            runId: run.id,
            run,
            data: {},
            occurredAt: now.toISOString(),
          },
          now,
        );
      }
      const missed = ids.filter((_, i) => i % 60 === 0);
      for (const id of ids.filter((id) => !missed.includes(id))) {
        const key = endpointDeliveryKey(id, endpointId);
        assert.ok(await stores.claims.tryMark(key, 'test'));
        await stores.claims.markDelivered(key, 'test', 'delivered');
      }
      let commands = 0;
      monitored.on('commandStarted', (e) => void (e.commandName !== 'endSessions' && commands++));
      const found = await missedEvents(stores, {
        teamId: 'acme',
        endpointId,
        since: since.toISOString(),
        until: new Date(now.getTime() + 1000).toISOString(),
        maxSends: 1000,
      });
      assert.deepEqual([...found].sort(), [...missed].sort());
      // The endpoint, the events and their claims (each read with its second batch), and the last attempt of
      // each event not settled delivered: nothing per event delivered.
      assert.ok(commands <= 5 + missed.length, `${commands} store commands for ${ids.length} events`);
    });
  });

  it('a listing retried (its worker lost, its time out) goes on from the page its last heartbeat says, with what it found', async () => {
    const since = new Date();
    const endpointId = await answersEndpoint('res', 'resumed', receiver.url);
    const events: TeamEvent[] = [];
    for (let i = 0; i < 3; i++)
      events.push(await recordedAnswer('resumed', 'res', `_${i}`, new Date(Date.now() + i).toISOString()));
    const first = (await stack.stores.teamEvents.get(events[0].id))!;
    const input = {
      teamId: 'resumed',
      endpointId,
      since: since.toISOString(),
      until: new Date(Date.now() + 1000).toISOString(),
      maxSends: 1000,
    };
    // The attempt before read the first event and had found one missed (named so the test can tell it apart).
    const env = new MockActivityEnvironment({
      heartbeatDetails: {
        after: { recordedAt: first.recordedAt.toISOString(), id: first._id },
        missed: ['found-before'],
      },
    });
    const beats: unknown[] = [];
    env.on('heartbeat', (details: unknown) => beats.push(details));
    const found = await env.run(() => missedEvents(stack.stores, input));
    assert.deepEqual(found, ['found-before', events[1].id, events[2].id]);
    const last = (await stack.stores.teamEvents.get(events[2].id))!;
    assert.deepEqual(beats.at(-1), {
      after: { recordedAt: last.recordedAt.toISOString(), id: last._id },
      missed: found,
    });
  });

  it("reads on past a window's first 50,000 events: one missed after them is found", async () => {
    const since = new Date();
    const endpointId = await answersEndpoint('pat', 'past-many', receiver.url);
    const endpoint = (await stack.stores.endpoints.get('past-many', endpointId))!;
    // 50,000 of its type recorded in the window that happened before it was created: none owed to it.
    const before = new Date(endpoint.createdAt.getTime() - 3600_000).toISOString();
    const recordedAt = new Date(endpoint.createdAt.getTime() + 1);
    const rows = Array.from({ length: 50_000 }, (_, i) => ({
      _id: `ev:pre${i}`,
      type: 'interaction.answered' as const,
      teamId: 'past-many',
      runId: `run_pre${i}`,
      run: { id: `run_pre${i}`, status: 'running' as const, title: 'pre' },
      data: {},
      occurredAt: before,
      sequence: 0,
      recordedAt,
    }));
    for (let from = 0; from < rows.length; from += 5000)
      await stack.mongo.db.collection<TeamEventRow>('team_events').insertMany(rows.slice(from, from + 5000));
    const missed = await recordedAnswer('past-many', 'pat', '', new Date().toISOString());
    const found = await missedEvents(stack.stores, {
      teamId: 'past-many',
      endpointId,
      since: since.toISOString(),
      until: new Date(Date.now() + 1000).toISOString(),
      maxSends: 1000,
    });
    assert.deepEqual(found, [missed.id]);
  });

  it("lists only the endpoint's types, and never an event's body: other types' finished runs with long answers cost it nothing", async () => {
    const since = new Date();
    const endpointId = await createEndpoint('run.cancelled');
    await withMonitoredStores(async (stores, monitored) => {
      const now = new Date(Date.now() + 1000);
      const record = (id: string, type: 'run.finished' | 'run.cancelled', data: Record<string, unknown>) =>
        stores.teamEvents.record(
          {
            id,
            type,
            teamId: 'acme',
            runId: id,
            run: { id, status: 'finished', title: 'long' },
            data,
            occurredAt: now.toISOString(),
          },
          now,
        );
      // Ten finished runs, each with a 100,000-character answer, and the one cancelled run the endpoint missed.
      for (let i = 0; i < 10; i++)
        await record(`ev:long${i}:end`, 'run.finished', { finalAnswer: 'x'.repeat(100_000) });
      await record('ev:cancelled:end', 'run.cancelled', {});
      let replied = 0;
      monitored.on('commandSucceeded', (e) => void (replied += JSON.stringify(e.reply).length));
      const found = await missedEvents(stores, {
        teamId: 'acme',
        endpointId,
        since: since.toISOString(),
        until: new Date(now.getTime() + 1000).toISOString(),
        maxSends: 1000,
      });
      assert.deepEqual(found, ['ev:cancelled:end']);
      assert.ok(replied < 20_000, `${replied} bytes read`);
    });
  });
});
