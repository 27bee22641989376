// The callback attempt log, redelivery and the alert when retries run out, on the real servers: a loopback
// receiver that verifies every signature with the npm standardwebhooks library, as a launcher's endpoint would.
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Webhook } from 'standardwebhooks';
import webpush from 'web-push';
import { createCallbackActivities, logAttempt, RECORD_DEADLINE_MS } from '../activities/callback';
import { MongoClient, MongoNetworkError } from 'mongodb';
import { createCallbackAttemptStore } from '../store/callback/attempts';
import { createActivities } from '../activities';
import { createSweepActivities } from '../activities/sweep';
import { MAX_ATTEMPTS_SHOWN } from '../api/episodesView';
import { explainRun } from '../operator/explain';
import { startCallbackRedelivery } from '../client/redeliver';
import { renderExplanation } from '../operator/render';
import type { Config } from '../config';
import type { OperatorAlert } from '../domain/ops';
import { buildRunOutcome } from '../domain/outcome';
import { pushSenderFor } from '../delivery/push/sender';
import { createMetrics } from '../platform/metrics';
import { Registry } from 'prom-client';
import type { Stores } from '../store';
import { createClaimReader, type ClaimRow } from '../store/claims';
import type { Mongo } from '../store/mongo';
import type { EpisodeResult } from '../contract/workflows';
import type { CallbackAttempt } from '../contract/activities';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { ApiClient, saveHistory, startTestApi } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { waitUntil } from './support/waitUntil';

describe('callback attempt log', function () {
  /** RECORD_FIXTURES=1 saves the histories these tests produce (from the code as it is) as replay fixtures. */
  const record = (workflowId: string, name: string): void => {
    if (process.env.RECORD_FIXTURES === '1')
      saveHistory(config, workflowId, path.resolve(__dirname, 'fixtures', name));
  };

  let receiver: CallbackReceiver;
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    receiver = await CallbackReceiver.start();
    webhook = await CallbackReceiver.start();
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_TIMEOUT_SECONDS: '1',
      CALLBACK_RETRY_SECONDS: '1,1',
      CALLBACK_REDELIVER_RATE_LIMIT: '3',
      SWEEP_INTERVAL_SECONDS: '3600',
      OPS_ALERT_WEBHOOK_URL: webhook.url,
    });
    ({ config, mongo, stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
    await webhook?.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    webhook.received.length = 0;
    receiver.answerAlways({ status: 204 });
  });

  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  async function launch(): Promise<{ id: string; secret: string }> {
    const res = await alice.post('/api/v1/runs', {
      title: 'Nightly import',
      callback: { url: receiver.url },
    });
    assert.equal(res.status, 201, res.text);
    return { id: res.body.id, secret: res.body.callback.secret };
  }

  const attemptsOf = async (runId: string) => (await stores.callbackAttempts.listForRun(runId, 100)) ?? [];

  it('records every attempt: number, status or error category, duration and the wait before the next', async () => {
    receiver.answer(
      { status: 500 },
      { status: 503, headers: { 'retry-after': '2' } },
      { status: 200, delayMs: 3000 }, // past the 1 s deadline: a timeout, no status
    );
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });
    assert.equal((await episodeResult(`${id}:end`)).callback, 'gave_up');
    assert.equal(receiver.received.length, 3);
    record(`${id}:end`, 'episode-history-callback-jittered.json');

    const rows = await attemptsOf(id);
    assert.deepEqual(
      rows.map((r) => [r.episodeId, r.attempt, r.result, r.status, r.error, r.nextWaitSeconds, r.trigger]),
      [
        [`${id}:end`, 1, 'retry', 500, undefined, 1, 'episode'],
        // The receiver's Retry-After (2 s) outweighs the schedule's 1 s.
        [`${id}:end`, 2, 'retry', 503, undefined, 2, 'episode'],
        // The last of the schedule: no wait follows.
        [`${id}:end`, 3, 'retry', undefined, 'timeout', undefined, 'episode'],
      ],
    );
    assert.equal(rows[1].retryAfterSeconds, 2);
    // Each row's time is when its request left, before the receiver saw it; its duration ends before the next left.
    for (const [i, row] of rows.entries()) {
      assert.equal(row.runId, id);
      assert.ok(row.durationMs >= 0, `duration ${row.durationMs}`);
      assert.ok(row.at.getTime() <= receiver.received[i].at.getTime(), `row ${i + 1} left after it was seen`);
      const next = rows[i + 1];
      if (next)
        assert.ok(row.at.getTime() + row.durationMs <= next.at.getTime(), `row ${i + 1} overlaps the next`);
    }
    assert.ok(rows[2].durationMs >= 900, 'the timed-out attempt took its whole deadline');
    // A failed attempt with another to come says when: its end plus the wait; the next request left no earlier (a
    // durable timer). How punctually is the time-skipping test's (test/workflows/callbackSchedule). The last says
    // nothing.
    for (const i of [0, 1]) {
      const due = rows[i].nextAttemptAt;
      assert.ok(due instanceof Date, `row ${i + 1} has nextAttemptAt`);
      assert.equal(
        due.getTime(),
        rows[i].at.getTime() + rows[i].durationMs + rows[i].nextWaitSeconds! * 1000,
      );
      const next = receiver.received[i + 1].at.getTime();
      assert.ok(
        next >= due.getTime() - 100,
        `due ${due.toISOString()}, came ${due.getTime() - next} ms early`,
      );
    }
    assert.equal(rows[2].nextAttemptAt, undefined);

    // The same attempts, per episode, in GET /runs/:id/episodes.
    const view = await alice.get(`/api/v1/runs/${id}/episodes`);
    assert.equal(view.status, 200, view.text);
    const [episode] = view.body.episodes;
    assert.equal(episode.families.callback.result, 'gave_up: timeout');
    assert.deepEqual(
      episode.callbackAttempts.map((a: Record<string, unknown>) => [
        a.attempt,
        a.result,
        a.status ?? a.error,
        a.nextWaitSeconds ?? null,
      ]),
      [
        [1, 'retry', 500, 1],
        [2, 'retry', 503, 2],
        [3, 'retry', 'timeout', null],
      ],
    );
    assert.equal(typeof episode.callbackAttempts[0].at, 'string');
    assert.deepEqual(
      episode.callbackAttempts.map((a: Record<string, unknown>) => a.nextAttemptAt ?? null),
      [rows[0].nextAttemptAt!.toISOString(), rows[1].nextAttemptAt!.toISOString(), null],
    );
    assert.equal(typeof episode.callbackAttempts[0].durationMs, 'number');
    assert.equal(episode.callbackAttempts[0].workflowRunId, undefined, 'no Temporal internals for users');
    // Another team sees nothing of it.
    assert.equal((await alice.as('eve', 'other').get(`/api/v1/runs/${id}/episodes`)).status, 404);
  });

  it('an attempt after many held ones, or a replayed first one, is logged in a few writes, not one per row before it', async () => {
    const episodeId = 'run_held_many:end';
    const at = new Date();
    // A callback the team's breaker held through a long outage: a row per hold, all under its second attempt.
    await mongo.db.collection('callback_attempts').insertMany(
      Array.from({ length: 300 }, (_, i) => ({
        _id: `${episodeId}|${i + 1}`,
        episodeId,
        runId: 'run_held_many',
        teamId: 'acme',
        attempt: i + 1,
        at: new Date(at.getTime() - (300 - i) * 1000),
        result: 'retry',
        error: 'breaker_open',
      })) as never[],
    );
    const monitored = new MongoClient(config.mongoUrl, { monitorCommands: true });
    await monitored.connect();
    try {
      let inserts = 0;
      monitored.on('commandStarted', (event) => void (event.commandName === 'insert' && inserts++));
      const log = createCallbackAttemptStore(monitored.db(config.mongoDb));
      const outcome = { result: 'retry', detail: 'breaker open', held: 'breaker_open' } as const;
      await logAttempt(
        {},
        log,
        { episodeId, runId: 'run_held_many' },
        {
          sent: true,
          outcome,
          error: 'breaker_open',
          held: 'breaker_open',
          at,
          durationMs: 0,
          teamId: 'acme',
        },
        { attempt: 2, trigger: 'episode', waitIfRetried: 60, heldWaits: { held: 298 } },
      );
      assert.ok(inserts <= 2, `${inserts} inserts`);
      assert.equal((await log.listForEpisode(episodeId, 1))[0].attempt, 301);
      // The sweep's replay of the released callback: a new execution's first attempt.
      inserts = 0;
      await logAttempt(
        {},
        log,
        { episodeId, runId: 'run_held_many' },
        {
          sent: true,
          outcome: { result: 'retry', detail: 'timed out' },
          error: 'timeout',
          at: new Date(at.getTime() + 1000),
          durationMs: 30_000,
          teamId: 'acme',
        },
        { attempt: 1, trigger: 'episode', waitIfRetried: 60 },
      );
      assert.ok(inserts <= 2, `${inserts} inserts`);
      assert.equal((await log.listForEpisode(episodeId, 1))[0].attempt, 302);
    } finally {
      await monitored.close();
    }
  });

  it('a delivered first attempt is one row; an episode without a callback has none', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    assert.equal((await episodeResult(`${id}:end`)).callback, 'delivered');
    const rows = await attemptsOf(id);
    assert.deepEqual(
      rows.map((r) => [r.attempt, r.result, r.status, r.nextWaitSeconds]),
      [[1, 'delivered', 204, undefined]],
    );
    const plain = (await alice.post('/api/v1/runs', {})).body.id as string;
    await alice.post(`/api/v1/runs/${plain}/cancel`);
    await episodeResult(`${plain}:end`);
    const view = await alice.get(`/api/v1/runs/${plain}/episodes`);
    assert.deepEqual(view.body.episodes[0].callbackAttempts, []);
  });

  it('an attempt log that hangs is given up at its own deadline: one POST, a settled result', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    await episodeResult(`${id}:end`);
    receiver.received.length = 0;
    // The store stalls (a primary lost mid-insert: insertOne waits for its socket timeout); the activity must
    // still answer well inside its start-to-close, or Temporal runs it again and POSTs a second time.
    const hanging = { ...stores.callbackAttempts, record: () => new Promise<number>(() => undefined) };
    const told: string[] = [];
    const activities = createCallbackActivities({
      runs: stores.runs,
      callbackAttempts: hanging,
      allowPrivate: true,
      timeoutMs: 1000,
      secretOverlapSeconds: 0,
      now: () => new Date(),
      log: (line) => told.push(line),
    });
    // The race bounds a hang only: the attempt's deadline gives the record up, which the log says.
    const settled = await Promise.race([
      activities.sendCallback(`${id}:end`, id, { attempt: 2, trigger: 'redeliver' }),
      new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 30_000)),
    ]);
    assert.deepEqual(settled, { result: 'delivered', status: 204 });
    assert.deepEqual(told, [
      `callback: attempt of episode ${id}:end not recorded: no answer from the store within ${RECORD_DEADLINE_MS} ms`,
    ]);
    assert.equal(receiver.received.length, 1);
  });

  it('an attempt whose row was written but whose answer was lost (a reconnect) is one row, not two', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    await episodeResult(`${id}:end`);
    const before = await stores.callbackAttempts.countForEpisode(`${id}:end`);
    // The store writes the first try's row, then the connection drops before its answer: the try throws.
    let lost = false;
    const answerLost: typeof stores.callbackAttempts = {
      ...stores.callbackAttempts,
      async record(...args) {
        const taken = await stores.callbackAttempts.record(...args);
        if (lost) return taken;
        lost = true;
        throw new MongoNetworkError('connection closed before the answer');
      },
    };
    const activities = createCallbackActivities({
      runs: stores.runs,
      callbackAttempts: answerLost,
      allowPrivate: true,
      timeoutMs: 5000,
      secretOverlapSeconds: 0,
      now: () => new Date(),
    });
    await activities.sendCallback(`${id}:end`, id, { attempt: before + 1, trigger: 'redeliver' });
    assert.ok(lost, 'the first try wrote and threw');
    assert.equal(await stores.callbackAttempts.countForEpisode(`${id}:end`), before + 1);
  });

  /** A run whose callback was delivered, the receiver's log emptied, and callback activities to call by hand. */
  async function deliveredOnce() {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    await episodeResult(`${id}:end`);
    receiver.received.length = 0;
    const activities = createCallbackActivities({
      runs: stores.runs,
      callbackAttempts: stores.callbackAttempts,
      allowPrivate: true,
      timeoutMs: 5000,
      secretOverlapSeconds: 0,
      now: () => new Date(),
    });
    return { id, activities };
  }

  it('an attempt Temporal runs again after it delivered (its worker lost before the answer) answers delivered, sending nothing', async () => {
    const { id, activities } = await deliveredOnce();
    const place = { attempt: 2, trigger: 'redeliver' } as const;
    const send = (attempt: number): Promise<CallbackAttempt> =>
      new MockActivityEnvironment({
        attempt,
        activityId: '3',
        workflowExecution: { workflowId: `cb-redeliver|${id}:end`, runId: `retried-${id}` },
        startToCloseTimeoutMs: 60_000,
      }).run(() => activities.sendCallback(`${id}:end`, id, place, 'acme'));
    assert.equal((await send(1)).result, 'delivered');
    // The receiver restarts: a second POST would be answered 503, and that answer would replace the delivery.
    receiver.answerAlways({ status: 503 });
    assert.deepEqual(await send(2), { result: 'delivered', status: 204 });
    assert.equal(receiver.received.length, 1, 'sent once');
  });

  it("an attempt reads the run under the episode's tenant: another team's view of the run sends nothing", async () => {
    const { id, activities } = await deliveredOnce();
    const place = { attempt: 2, trigger: 'redeliver' } as const;
    assert.equal((await activities.sendCallback(`${id}:end`, id, place, 'someone-else')).result, 'stop');
    assert.equal(receiver.received.length, 0, "another tenant's attempt reached the receiver");
    assert.equal((await activities.sendCallback(`${id}:end`, id, place, 'acme')).result, 'delivered');
    assert.equal(receiver.received.length, 1);
  });

  it('the attempt metrics count sent attempts only, timed from the lookup to the last byte', async () => {
    const registry = new Registry();
    const activities = createActivities({
      config,
      stores,
      client,
      metrics: createMetrics(registry, { processMetrics: false }),
      log: () => undefined,
    });
    const sample = async (name: string) =>
      (await registry.getSingleMetric(name)?.get())?.values.filter((v) => v.value > 0) ?? [];
    // A run without a callback: no attempt, nothing recorded.
    const plain = (await alice.post('/api/v1/runs', {})).body.id as string;
    await alice.post(`/api/v1/runs/${plain}/cancel`);
    await episodeResult(`${plain}:end`);
    assert.equal((await activities.sendCallback(`${plain}:end`, plain)).result, 'stop');
    assert.deepEqual(await sample('flow_notify_callback_attempts_total'), []);
    assert.deepEqual(await sample('flow_notify_callback_attempt_duration_seconds'), []);
    // One sent attempt: counted once, its duration the one in its log row.
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    await episodeResult(`${id}:end`);
    receiver.answer({ status: 204, delayMs: 300 });
    assert.equal(
      (await activities.sendCallback(`${id}:end`, id, { attempt: 2, trigger: 'redeliver' })).result,
      'delivered',
    );
    const counted = await sample('flow_notify_callback_attempts_total');
    assert.deepEqual(
      counted.map((v) => [v.labels.result, v.labels.status_class, v.value]),
      [['delivered', '2xx', 1]],
    );
    const durations = await sample('flow_notify_callback_attempt_duration_seconds');
    const sum = durations.find((v) => (v as { metricName?: string }).metricName?.endsWith('_sum'))!.value;
    const row = (await attemptsOf(id)).find((r) => r.attempt === 2)!;
    assert.equal(sum, row.durationMs / 1000);
  });

  const redeliver = (as: ApiClient, runId: string, episodeId: string) =>
    as.post(`/api/v1/runs/${runId}/episodes/${encodeURIComponent(episodeId)}/callback/redeliver`);
  const redelivery = (episodeId: string) =>
    client.workflow.getHandle(`cb-redeliver|${episodeId}`).result() as Promise<unknown>;

  async function gaveUp(): Promise<{ id: string; secret: string; episodeId: string }> {
    receiver.answerAlways({ status: 503 });
    const launched = await launch();
    await alice.post(`/api/v1/runs/${launched.id}/cancel`);
    const episodeId = `${launched.id}:end`;
    assert.equal((await episodeResult(episodeId)).callback, 'gave_up');
    receiver.answerAlways({ status: 204 });
    return { ...launched, episodeId };
  }

  it('redeliver: 202, the same webhook-id with a fresh timestamp and signature, numbered after the schedule', async () => {
    const { id, secret, episodeId } = await gaveUp();
    assert.equal(receiver.received.length, 3);
    const res = await redeliver(alice, id, episodeId);
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(res.body, { episodeId, webhookId: episodeId });
    await redelivery(episodeId);
    assert.equal(receiver.received.length, 4);
    const [first, , , again] = receiver.received;
    assert.equal(again.headers['webhook-id'], episodeId, 'receivers dedupe on it');
    assert.ok(Number(again.headers['webhook-timestamp']) > Number(first.headers['webhook-timestamp']));
    assert.notEqual(again.headers['webhook-signature'], first.headers['webhook-signature']);
    assert.deepEqual(
      new Webhook(secret).verify(again.body, again.headers as Record<string, string>),
      JSON.parse(first.body),
      'the same event, signed for this attempt',
    );
    assert.deepEqual(
      (await attemptsOf(id)).map((r) => [r.attempt, r.result, r.status, r.trigger]),
      [
        [1, 'retry', 503, 'episode'],
        [2, 'retry', 503, 'episode'],
        [3, 'retry', 503, 'episode'],
        [4, 'delivered', 204, 'redeliver'],
      ],
    );
    const view = await alice.get(`/api/v1/runs/${id}/episodes`);
    assert.equal(view.body.episodes[0].families.callback.result, 'redelivered');
    assert.equal(view.body.episodes[0].callbackAttempts.length, 4);
  });

  it('redeliver: a delivery whose holder is gone (its claim pending past the grace, nothing left to settle it) is redelivered', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    await episodeResult(episodeId);
    receiver.received.length = 0;
    // Its schedule stopped holding the claim (its release failed in a store outage at the end of its day, and the
    // run is past the sweep's reach): pending, its holder long gone.
    await mongo.db.collection<ClaimRow>('sent_notifications').updateOne(
      { _id: `cb|${episodeId}` },
      {
        $set: { delivered: false, holder: 'lost-schedule', sent_at: new Date(Date.now() - 35 * 3600_000) },
        $unset: { result: '', held_until: '' },
      },
    );
    const res = await redeliver(alice, id, episodeId);
    assert.equal(res.status, 202, res.text);
    await redelivery(episodeId);
    assert.equal(receiver.received.length, 1);
    assert.deepEqual(await stores.claims.describe(`cb|${episodeId}`), {
      state: 'delivered',
      result: 'redelivered',
    });
  });

  it('redeliver: a delivery whose holder is gone, redelivered and failing again, is found by a recover as given up', async () => {
    const { id, episodeId } = await gaveUp();
    // Its schedule's last attempt was never marked given up: the claim pending, its holder long gone.
    await mongo.db.collection('callback_attempts').updateMany({ episodeId }, { $unset: { gaveUp: '' } });
    await mongo.db.collection<ClaimRow>('sent_notifications').updateOne(
      { _id: `cb|${episodeId}` },
      {
        $set: { delivered: false, holder: 'lost-schedule', sent_at: new Date(Date.now() - 35 * 3600_000) },
        $unset: { result: '', held_until: '' },
      },
    );
    receiver.answerAlways({ status: 503 });
    assert.equal((await redeliver(alice, id, episodeId)).status, 202);
    assert.equal(((await redelivery(episodeId)) as { result: string }).result, 'failed');
    assert.equal((await stores.claims.describe(`cb|${episodeId}`)).state, 'delivered', 'settled given up');
    const found = await stores.callbackAttempts.listGaveUp(
      'acme',
      new Date(Date.now() - 3600_000),
      new Date(),
      100,
    );
    assert.ok(
      found.rows.some((row) => row.episodeId === episodeId),
      'a recover finds it among those given up',
    );
  });

  it('redeliver: 409 while the episode still runs its schedule, and while another redelivery runs (two API processes)', async () => {
    receiver.answerAlways({ status: 503 });
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    await waitUntil(
      'the callback claim to be pending',
      async () => (await stores.claims.state(`cb|${episodeId}`)) === 'pending',
      { timeoutMs: 10_000, intervalMs: 50 },
    );
    const during = await redeliver(alice, id, episodeId);
    assert.equal(during.status, 409, during.text);
    assert.equal(during.body.error, 'a delivery of this episode is in progress');
    assert.equal((await episodeResult(episodeId)).callback, 'gave_up');
    assert.equal(receiver.received.length, 3, 'the refused request sent nothing');

    // Two API processes asked at once: one redelivery starts, the other is refused while it runs.
    // They fail too (503), so the callback still reads gave_up and may be redelivered again.
    receiver.answerAlways({ status: 503, delayMs: 500 });
    const second = await startTestApi(config);
    try {
      const both = await Promise.all([
        redeliver(alice, id, episodeId),
        redeliver(second.client.as('alice', 'acme'), id, episodeId),
      ]);
      assert.deepEqual(both.map((r) => r.status).sort(), [202, 409], both.map((r) => r.text).join(' | '));
      await redelivery(episodeId);
      assert.equal(receiver.received.length, 4, 'one redelivery went out');
      // Once it is over, another may start.
      assert.equal((await redeliver(alice, id, episodeId)).status, 202);
      await redelivery(episodeId);
      assert.equal(receiver.received.length, 5);
      assert.deepEqual(
        (await attemptsOf(id)).map((r) => r.attempt),
        [1, 2, 3, 4, 5],
      );
    } finally {
      await second.api.close();
    }
  });

  it('redeliver: 404 for an unknown episode or another team; 409 when nothing is owed; 429 past the rate limit', async () => {
    const { id, episodeId } = await gaveUp();
    assert.equal((await redeliver(alice, id, `${id}:input:nope`)).status, 404);
    assert.equal((await redeliver(alice.as('eve', 'other'), id, episodeId)).status, 404);
    const other = await launch();
    assert.equal((await redeliver(alice, other.id, episodeId)).status, 404, "another run's episode");
    // A run without a callback owes none.
    const plain = (await alice.post('/api/v1/runs', {})).body.id as string;
    await alice.post(`/api/v1/runs/${plain}/cancel`);
    await episodeResult(`${plain}:end`);
    const none = await redeliver(alice, plain, `${plain}:end`);
    assert.equal(none.status, 409);
    assert.equal(none.body.error, 'the run has no callback URL');
    assert.equal(receiver.received.length, 3, 'nothing sent so far');

    // Three redeliveries per run per window here (CALLBACK_REDELIVER_RATE_LIMIT): the fourth is refused. They
    // fail, so each leaves the callback gave_up (a delivered one is not redelivered).
    receiver.answerAlways({ status: 503 });
    for (let i = 0; i < 3; i++) {
      assert.equal((await redeliver(alice, id, episodeId)).status, 202);
      await redelivery(episodeId);
    }
    record(`cb-redeliver|${episodeId}`, 'callback-redeliver-failed-history.json');
    const limited = await redeliver(alice, id, episodeId);
    assert.equal(limited.status, 429, limited.text);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal(receiver.received.length, 6);

    // A refused request writes nothing: a claim left pending by a holder long gone stays as it is.
    await mongo.db.collection<ClaimRow>('sent_notifications').updateOne(
      { _id: `cb|${episodeId}` },
      {
        $set: { delivered: false, holder: 'lost-schedule', sent_at: new Date(Date.now() - 35 * 3600_000) },
        $unset: { result: '', held_until: '' },
      },
    );
    assert.equal((await redeliver(alice, id, episodeId)).status, 429);
    assert.deepEqual(await stores.claims.describe(`cb|${episodeId}`), { state: 'pending', stale: true });
  });

  it('redeliver: a delivered callback is sent again; the claim stays delivered, the attempt is logged, a failure alerts nobody', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    assert.equal((await episodeResult(episodeId)).callback, 'delivered');
    // The receiver acknowledged, then lost it: it asks again, and this time the attempt fails.
    receiver.answerAlways({ status: 503 });
    const res = await redeliver(alice, id, episodeId);
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(await redelivery(episodeId), { result: 'failed', status: 503, detail: 'http 503' });
    record(`cb-redeliver|${episodeId}`, 'callback-redeliver-delivered-claim-history.json');
    assert.equal(receiver.received.length, 2);
    assert.deepEqual(await stores.claims.describe(`cb|${episodeId}`), {
      state: 'delivered',
      result: 'delivered',
    });
    assert.deepEqual(
      (await attemptsOf(id)).map((r) => [r.attempt, r.result, r.status, r.trigger]),
      [
        [1, 'delivered', 204, 'episode'],
        [2, 'retry', 503, 'redeliver'],
      ],
    );
    // And again, delivered this time: still the same claim.
    receiver.answerAlways({ status: 204 });
    assert.equal((await redeliver(alice, id, episodeId)).status, 202);
    assert.deepEqual(await redelivery(episodeId), { result: 'delivered', status: 204 });
    assert.deepEqual(await stores.claims.describe(`cb|${episodeId}`), {
      state: 'delivered',
      result: 'delivered',
    });
    const view = await alice.get(`/api/v1/runs/${id}/episodes`);
    assert.equal(view.body.episodes[0].families.callback.result, 'delivered');
    assert.deepEqual(
      view.body.episodes[0].callbackAttempts.map((a: Record<string, unknown>) => a.result),
      ['delivered', 'retry', 'delivered'],
    );
    assert.deepEqual(webhook.received, [], 'a failed redelivery alerts nobody');

    // One that gave up and was then redelivered may be redelivered again; failing, it stays redelivered.
    const again = await gaveUp();
    assert.equal((await redeliver(alice, again.id, again.episodeId)).status, 202);
    await redelivery(again.episodeId);
    receiver.answerAlways({ status: 503 });
    assert.equal((await redeliver(alice, again.id, again.episodeId)).status, 202);
    assert.equal(((await redelivery(again.episodeId)) as { result: string }).result, 'failed');
    const after = await alice.get(`/api/v1/runs/${again.id}/episodes`);
    assert.equal(after.body.episodes[0].families.callback.result, 'redelivered');
  });

  it('redeliver: a request made while another redelivery was in flight, started once that one ended, sends nothing', async () => {
    const { id, episodeId } = await gaveUp();
    // What the route saw: the schedule's 3 attempts, before the redelivery in flight logged its own.
    const seenAttempts = (await attemptsOf(id)).length;
    assert.equal((await redeliver(alice, id, episodeId)).status, 202);
    await redelivery(episodeId);
    assert.equal(receiver.received.length, 4);
    // The late request's start lands after that redelivery closed.
    assert.equal(
      await startCallbackRedelivery(client, config.temporalTaskQueue, {
        runId: id,
        teamId: 'acme',
        episodeId,
        seenAttempts,
      }),
      true,
    );
    assert.deepEqual(await redelivery(episodeId), { result: 'superseded' });
    assert.equal(receiver.received.length, 4, 'nothing more was sent');
    assert.equal((await attemptsOf(id)).length, 4);
  });

  it('redeliver: an episode older than the claims are kept (its claim and attempts expired) is sent again', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    assert.equal((await episodeResult(episodeId)).callback, 'delivered');
    // 31 days on: the claim and the attempt rows expired 30 days after they were written; the record stays.
    const monthAgo = new Date(Date.now() - 31 * 24 * 3600_000);
    await mongo.db
      .collection('episodes')
      .updateOne({ _id: episodeId as never }, { $set: { recordedAt: monthAgo } });
    await mongo.db.collection('sent_notifications').deleteOne({ _id: `cb|${episodeId}` as never });
    await mongo.db.collection('callback_attempts').deleteMany({ episodeId });
    const sent = receiver.received.length;
    const res = await redeliver(alice, id, episodeId);
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(await redelivery(episodeId), { result: 'delivered', status: 204 });
    assert.equal(receiver.received.length, sent + 1);
    // A pause as old owed no callback: no claim to have expired, nothing to send.
    const paused = await launch();
    const asked = await alice.post(`/api/v1/runs/${paused.id}/pause`, { prompt: 'Ship it?' });
    assert.equal(asked.status, 200, asked.text);
    const pauseEpisode = `${paused.id}:input:${asked.body.interactionId}`;
    await waitUntil('the pause recorded', () =>
      mongo.db.collection('episodes').findOne({ _id: pauseEpisode as never }),
    );
    await mongo.db
      .collection('episodes')
      .updateOne({ _id: pauseEpisode as never }, { $set: { recordedAt: monthAgo } });
    const refused = await redeliver(alice, paused.id, pauseEpisode);
    assert.equal(refused.status, 409, refused.text);
  });

  it('redeliver: an episode whose record is missing (a view write that failed) is found by its claim', async () => {
    const { id, episodeId } = await gaveUp();
    await mongo.db.collection('episodes').deleteOne({ _id: episodeId as never });
    const res = await redeliver(alice, id, episodeId);
    assert.equal(res.status, 202, res.text);
    await redelivery(episodeId);
    assert.equal(receiver.received.length, 4);
  });

  it('a callback that gave up raises one callback_exhausted operator alert through the dispatcher', async () => {
    const { id, episodeId } = await gaveUp();
    const alerts = () =>
      webhook.received.filter(
        (r) =>
          (JSON.parse(r.body) as OperatorAlert).kind === 'callback_exhausted' && r.body.includes(`"${id}"`),
      );
    await waitUntil('a callback_exhausted alert', () => alerts().length > 0);
    const [sent, ...more] = alerts();
    assert.ok(sent, 'an alert reached the operator webhook');
    assert.equal(more.length, 0);
    const alert = JSON.parse(sent.body) as OperatorAlert;
    assert.deepEqual(
      { ...alert, at: undefined },
      {
        version: '1',
        kind: 'callback_exhausted',
        severity: 'warning',
        runId: id,
        teamId: 'acme',
        episodeKey: `callback:${episodeId}`,
        summary: `The completion callback of run ${id} gave up after 3 attempts: http 503`,
        detail: {
          episodeId,
          attempts: 3,
          lastError: 'http 503',
          redeliver: `/api/v1/runs/${id}/episodes/${episodeId}/callback/redeliver`,
        },
        at: undefined,
      },
    );
    assert.equal(sent.headers['idempotency-key'], `ops|callback:${episodeId}`);
    // Its own ops| workflow and claim: settled once sent.
    await client.workflow.getHandle(`ops|callback:${episodeId}`).result();
    assert.equal(await stores.claims.state(`ops|callback:${episodeId}`), 'delivered');
  });

  it('past the cap the newest attempts are shown, oldest first, and the view and explain say they were cut', async () => {
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    assert.equal((await episodeResult(episodeId)).callback, 'delivered'); // attempt 1
    // 1000 later attempts (as if redelivered for weeks): 1001 in all, one past what is shown.
    const first = (await attemptsOf(id))[0].at.getTime();
    await mongo.db.collection('callback_attempts').insertMany(
      Array.from({ length: MAX_ATTEMPTS_SHOWN }, (_, i) => ({
        _id: `${episodeId}|${i + 2}` as never,
        episodeId,
        runId: id,
        attempt: i + 2,
        at: new Date(first + (i + 1) * 1000),
        durationMs: 3,
        result: 'retry',
        status: 503,
        trigger: 'redeliver',
      })),
    );
    const newest = await stores.callbackAttempts.listForRun(id, 3);
    assert.deepEqual(
      newest.map((r) => r.attempt),
      [999, 1000, 1001],
    );

    const view = await alice.get(`/api/v1/runs/${id}/episodes`);
    assert.equal(view.status, 200, view.text);
    const shown = view.body.episodes[0].callbackAttempts as { attempt: number }[];
    assert.equal(shown.length, MAX_ATTEMPTS_SHOWN);
    assert.deepEqual([shown[0].attempt, shown.at(-1)!.attempt], [2, 1001]);
    assert.equal(view.body.callbackAttemptsTruncated, true);

    const explained = await explainRun(
      {
        ...stores,
        claims: createClaimReader(mongo.db),
        client,
        namespace: 'default',
        temporalUiUrl: 'http://ui',
        limits: { callbackAttempts: 10 },
      },
      id,
    );
    assert.deepEqual(
      explained!.episodes[0].callbackAttempts.map((a) => a.attempt),
      Array.from({ length: 10 }, (_, i) => 992 + i),
    );
    assert.equal(explained!.truncated.callbackAttempts, true);
    assert.match(renderExplanation(explained!), /callback attempts \(10, older ones not shown\)/);
    // Not cut: no flag.
    const { id: small } = await launch();
    await alice.post(`/api/v1/runs/${small}/cancel`);
    await episodeResult(`${small}:end`);
    assert.equal((await alice.get(`/api/v1/runs/${small}/episodes`)).body.callbackAttemptsTruncated, false);
  });

  it("an attempt the worker held (nothing sent) is not counted among an episode's attempts: a redelivery decided before it still sends", async () => {
    const base = { runId: 'run_held', durationMs: 5, trigger: 'redeliver' as const, at: new Date() };
    const episodeId = 'run_held:end';
    await stores.callbackAttempts.record({ ...base, episodeId, result: 'retry', status: 503 });
    // What a redelivery request saw before a manual one was held by the team's pacing.
    const seen = await stores.callbackAttempts.countForEpisode(episodeId);
    await stores.callbackAttempts.record({ ...base, episodeId, result: 'retry', error: 'paced' }, seen + 1);
    await stores.callbackAttempts.record(
      { ...base, episodeId, result: 'retry', error: 'breaker_open' },
      seen + 2,
    );
    assert.equal(
      await stores.callbackAttempts.countForEpisode(episodeId),
      seen,
      'a hold superseded the request',
    );
  });

  /** The sweep's activities on these stores at `now` (their reapers are what is called). */
  const reaperAt = (now: Date, on: Stores) =>
    createSweepActivities({
      ...on,
      client,
      taskQueue: config.temporalTaskQueue,
      episodeOptions: { callbackRetrySeconds: [1] },
      families: { ops: false },
      lookbackSeconds: 60,
      pageSize: 10,
      now: () => now,
    });

  it('attempts older than 30 days are reaped by the sweep where the server has no TTL index', async () => {
    const now = new Date();
    const old = new Date(now.getTime() - 31 * 24 * 3600_000);
    const base = { runId: 'run_reap', durationMs: 5, result: 'retry' as const, trigger: 'episode' as const };
    await stores.callbackAttempts.record({ ...base, episodeId: 'run_reap:end', at: old, status: 503 });
    await stores.callbackAttempts.record({ ...base, episodeId: 'run_reap:end', at: now, status: 503 });
    const sweep = reaperAt(now, stores);
    assert.ok((await sweep.sweepReapExpired()) >= 1);
    assert.deepEqual(
      (await attemptsOf('run_reap')).map((r) => r.attempt),
      [2],
    );
  });

  it("one collection's reaper failing leaves the others reaping: the pass fails after they ran, for its retry", async () => {
    const now = new Date();
    const old = new Date(now.getTime() - 31 * 24 * 3600_000);
    const base = {
      runId: 'run_reap_on',
      durationMs: 5,
      result: 'retry' as const,
      trigger: 'episode' as const,
    };
    await stores.callbackAttempts.record({ ...base, episodeId: 'run_reap_on:end', at: old, status: 503 });
    const sweep = reaperAt(now, {
      ...stores,
      // The claims' reaper comes first; its store refuses (as FerretDB did a delete of too many rows at once).
      claims: { ...stores.claims, reapExpired: () => Promise.reject(new Error('too many SQL variables')) },
    });
    await assert.rejects(sweep.sweepReapExpired(), /too many SQL variables/);
    assert.deepEqual(await attemptsOf('run_reap_on'), []);
  });
});

describe('push_config_fault operator alert', function () {
  let push: PushService;
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    push = await startPushService();
    webhook = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        // The loopback push service is a known one only when allowlisted (see pushPrune.test.ts otherwise).
        PUSH_ENDPOINT_ALLOWLIST: '127.0.0.1',
        SWEEP_INTERVAL_SECONDS: '3600',
        OPS_ALERT_WEBHOOK_URL: webhook.url,
      },
      { push },
    );
    ({ client, config, stores } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await push?.close();
    await webhook?.close();
  });

  it('an allowlisted push service refusing our VAPID identity as a whole alerts the operator once per hour per origin', async () => {
    // Alice's two devices and Bob's (he hears the team's runs), all refused: several users, nothing accepted.
    const bob = alice.as('bob', 'acme');
    assert.equal((await bob.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    const devices: [ApiClient, ReturnType<PushService['endpoint']>][] = [
      [alice, push.endpoint('alice-phone')],
      [alice, push.endpoint('alice-laptop')],
      [bob, push.endpoint('bob-tablet')],
    ];
    for (const [user, subscription] of devices) {
      assert.equal((await user.post('/api/v1/notifications/push/subscriptions', subscription)).status, 201);
      push.failAlways(subscription, 403);
    }
    // Two episodes, each reaching the three subscriptions on the same push service: six refusals, one alert.
    const hourBefore = new Date().toISOString().slice(0, 13);
    for (let i = 0; i < 2; i++) {
      const run = (await alice.post('/api/v1/runs', { title: `Report ${i}` })).body.id as string;
      await alice.post(`/api/v1/runs/${run}/cancel`);
      await client.workflow.getHandle(`${run}:end`).result();
    }
    assert.ok(push.attempts().filter((a) => a.status === 403).length >= 6);
    // Keyed by the UTC hour it was met in (the test may straddle one).
    const hours = [hourBefore, new Date().toISOString().slice(0, 13)];
    await waitUntil('an operator alert', () => webhook.received.length > 0);
    const alerts = webhook.received.map((r) => JSON.parse(r.body) as OperatorAlert);
    assert.equal(alerts.length, 1, JSON.stringify(alerts));
    const [alert] = alerts;
    assert.ok(
      hours.map((h) => `push-config:${push.origin}:${h}`).includes(alert.episodeKey),
      alert.episodeKey,
    );
    assert.deepEqual(
      [alert.kind, alert.severity, alert.detail.origin, alert.detail.status],
      ['push_config_fault', 'critical', push.origin, 403],
    );
    assert.equal(webhook.received[0].headers['idempotency-key'], `ops|${alert.episodeKey}`);
    await client.workflow.getHandle(`ops|${alert.episodeKey}`).result();
    // Filed under whichever run met the fault first, but not about it: that run's ops marker is left alone.
    const filedUnder = await stores.runs.getById(alert.runId);
    assert.ok(filedUnder);
    assert.deepEqual(
      [filedUnder.opsAlerted ?? [], filedUnder.opsAlertedAt],
      [[], undefined],
      'no push-config stamp on an unrelated run',
    );
    // A later episode in the same hour raises nothing more.
    const run = (await alice.post('/api/v1/runs', { title: 'Report 2' })).body.id as string;
    await alice.post(`/api/v1/runs/${run}/cancel`);
    await client.workflow.getHandle(`${run}:end`).result();
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(webhook.received.length, 1);
    assert.match(alerts[0].summary, /refuses our VAPID identity as a whole/);
    assert.deepEqual([alert.detail.subscriptions, alert.detail.users], [3, 2]);
  });

  it('a slow Temporal or store behind the alert never stalls the sends of a fan-out', async () => {
    // Within the window of the refusals above: Bob's refused phone is one more, so the fan-out raises the alert.
    const phone = push.endpoint('bob-phone');
    assert.equal(
      (await alice.as('bob', 'acme').post('/api/v1/notifications/push/subscriptions', phone)).status,
      201,
    );
    push.failAlways(phone, 403);
    const run = (await alice.as('bob', 'acme').post('/api/v1/runs', { title: 'Slow alert' })).body
      .id as string;
    await alice.as('bob', 'acme').post(`/api/v1/runs/${run}/cancel`);
    await client.workflow.getHandle(`${run}:end`).result();
    // The alert's claim read never answers (a stalled store; a Temporal that stalls its start is the same lane).
    const claims = { ...stores.claims, isMarked: () => new Promise<boolean>(() => undefined) };
    const sender = pushSenderFor(config, { ca: push.ca });
    const lines: string[] = [];
    try {
      const activities = createActivities({
        config,
        stores: { ...stores, claims },
        client,
        pushSender: sender,
        log: (line) => lines.push(line),
      });
      const outcome = buildRunOutcome((await stores.runs.getById(run))!)!;
      const before = push.attempts().length;
      const settled = await Promise.race([
        activities.deliverPush(outcome),
        new Promise<'still running'>((resolve) => setTimeout(() => resolve('still running'), 30_000)),
      ]);
      assert.notEqual(settled, 'still running');
      assert.ok(push.attempts().length > before, 'the send went out');
      // And the alert itself gives up within its own deadline (logged), rather than hang for good.
      await waitUntil(
        'the alert to give up (logged)',
        () => lines.some((l) => /push_config_fault alert .* was not raised/.test(l)),
        { seen: () => lines.join('\n') },
      );
    } finally {
      sender?.close();
    }
  });
});

describe('callback redelivery with a long receiver timeout', function () {
  this.timeout(120_000);
  let stack: FamilyStack;
  let receiver: CallbackReceiver;

  before(async () => {
    receiver = await CallbackReceiver.start();
    // A receiver given a minute: an attempt's start-to-close is that and a margin, a redelivery's too.
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_TIMEOUT_SECONDS: '60',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  it('a redelivery goes out (its attempt has the time the receiver is given)', async () => {
    const alice = stack.anonymous.as('alice', 'acme');
    const res = await alice.post('/api/v1/runs', {
      title: 'Nightly import',
      callback: { url: receiver.url },
    });
    assert.equal(res.status, 201, res.text);
    const id = res.body.id as string;
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });
    const episodeId = `${id}:end`;
    assert.equal(
      ((await stack.client.workflow.getHandle(episodeId).result()) as EpisodeResult).callback,
      'delivered',
    );
    const asked = await alice.post(
      `/api/v1/runs/${id}/episodes/${encodeURIComponent(episodeId)}/callback/redeliver`,
    );
    assert.equal(asked.status, 202, asked.text);
    const result = await stack.client.workflow.getHandle(`cb-redeliver|${episodeId}`).result();
    assert.equal(receiver.received.length, 2, `the redelivery sent nothing: ${JSON.stringify(result)}`);
  });
});
