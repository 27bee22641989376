// Recover (POST /api/v1/callbacks/recover) end to end: real API, worker, Temporal and FerretDB; a loopback receiver
// down long enough for a schedule of attempts, then back. Every callback of the team that gave up in the window is
// delivered once more (same webhook-id, a signature that verifies), and nothing else is sent.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import {
  callbackRecoverWorkflowId,
  callbackRedeliverWorkflowId,
  type EpisodeResult,
} from '../contract/workflows';
import { createOriginPacing } from '../delivery/callback/pacing';
import type { Stores } from '../store';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { recordFixture, startTestApi, type ApiClient } from './support/harness';
import { waitUntil } from './support/waitUntil';

describe('recover of the callbacks that gave up', function () {
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let stores: Stores;
  let client: Client;
  let alice: ApiClient;
  let bob: ApiClient;

  /**
   * While set, an attempt's own write of its give-up row fails, every try (the store away as it is made); the
   * write the workflow makes after the give-up (`recordOnce`) goes through.
   */
  let loseGiveUpRows = false;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack(
      {
        CALLBACK_RETRY_SECONDS: '1,1',
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_TIMEOUT_SECONDS: '2',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      {
        workerStores: (stores) => ({
          ...stores,
          callbackAttempts: {
            ...stores.callbackAttempts,
            record: async (row, ...rest) => {
              if (row.gaveUp && loseGiveUpRows) throw new Error('connection to the store closed');
              return stores.callbackAttempts.record(row, ...rest);
            },
          },
        }),
      },
    );
    ({ stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
    bob = stack.anonymous.as('bob', 'globex');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  async function endRun(caller: ApiClient): Promise<{ id: string; secret: string }> {
    const res = await caller.post('/api/v1/runs', {
      title: 'Nightly import',
      callback: { url: receiver.url },
    });
    assert.equal(res.status, 201, res.text);
    const run = { id: res.body.id as string, secret: res.body.callback.secret as string };
    assert.equal((await caller.post(`/api/v1/runs/${run.id}/complete`, { finalAnswer: 'ok' })).status, 200);
    return run;
  }

  async function finished(caller: ApiClient, id: string): Promise<Record<string, unknown>> {
    await client.workflow.getHandle(callbackRecoverWorkflowId('acme')).result();
    const res = await caller.get(`/api/v1/callbacks/recover/${id}`);
    assert.equal(res.status, 200, res.text);
    return res.body;
  }

  it('redelivers each gave-up callback of the team in the window once, and nothing else', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    // The receiver is down: three of alice's runs and one of bob's give up after their three attempts.
    receiver.answerAlways({ status: 503 });
    const down = [await endRun(alice), await endRun(alice), await endRun(alice)];
    const otherTeam = await endRun(bob);
    for (const run of [...down, otherTeam])
      assert.equal((await episodeResult(`${run.id}:end`)).callback, 'gave_up');
    // Back up: one more run of alice's is delivered in the window, and is not sent again.
    receiver.answerAlways({ status: 204 });
    const delivered = await endRun(alice);
    assert.equal((await episodeResult(`${delivered.id}:end`)).callback, 'delivered');
    receiver.received.length = 0;

    const started = await alice.post('/api/v1/callbacks/recover', { since });
    assert.equal(started.status, 202, started.text);
    const id = started.body.id as string;
    const progress = await finished(alice, id);
    // The current path's fixture (callback-recover-history.json was recorded here before issue #35).
    recordFixture(stack.config, callbackRecoverWorkflowId('acme'), 'callback-recover-bounded-history.json');
    assert.deepEqual(
      { ...progress, since: undefined, until: undefined },
      {
        id,
        status: 'completed',
        since: undefined,
        until: undefined,
        found: 3,
        skipped: 0,
        sent: 3,
        delivered: 3,
        failed: 0,
        held: 0,
        stoppedAtMax: false,
      },
    );
    assert.equal(progress.since, since);

    // Exactly one more delivery of each, same webhook-id, signed with the run's secret.
    assert.equal(receiver.received.length, 3);
    const byId = new Map(receiver.received.map((r) => [r.headers['webhook-id'] as string, r]));
    for (const run of down) {
      const call = byId.get(`${run.id}:end`);
      assert.ok(call, `${run.id} redelivered`);
      new Webhook(run.secret).verify(call.body, call.headers as Record<string, string>);
      assert.equal((await stores.claims.describe(`cb|${run.id}:end`)).result, 'redelivered');
    }
    assert.equal((await stores.claims.describe(`cb|${otherTeam.id}:end`)).result, 'gave_up: http 503');

    // What the next recover reads: no give-up of a callback delivered since (its cost follows what is still owed).
    const left = await stores.callbackAttempts.listGaveUp('acme', new Date(since), new Date(), 100);
    assert.deepEqual(
      left.rows.map((row) => row.episodeId),
      [],
    );
    // Again over the same window: nothing is left given up, nothing is sent.
    const again = await alice.post('/api/v1/callbacks/recover', { since });
    assert.equal(again.status, 202, again.text);
    const second = await finished(alice, again.body.id);
    assert.deepEqual([second.found, second.sent], [0, 0]);
    assert.equal(receiver.received.length, 3);

    // Another team's recover is not found there.
    assert.equal((await bob.get(`/api/v1/callbacks/recover/${id}`)).status, 404);
  });

  it('a give-up whose attempt row the store lost as it was written is still found by a recover, and redelivered', async () => {
    const since = new Date(Date.now() - 1000).toISOString();
    receiver.answerAlways({ status: 503 });
    loseGiveUpRows = true;
    const run = await endRun(alice);
    assert.equal((await episodeResult(`${run.id}:end`)).callback, 'gave_up');
    loseGiveUpRows = false;
    recordFixture(stack.config, `${run.id}:end`, 'episode-history-callback-give-up-recorded-again.json');
    receiver.answerAlways({ status: 204 });
    receiver.received.length = 0;

    const started = await alice.post('/api/v1/callbacks/recover', { since });
    assert.equal(started.status, 202, started.text);
    const progress = await finished(alice, started.body.id as string);
    assert.deepEqual(
      [progress.found, progress.sent, progress.delivered],
      [1, 1, 1],
      JSON.stringify(progress),
    );
    assert.deepEqual(
      receiver.received.map((r) => r.headers['webhook-id']),
      [`${run.id}:end`],
    );
    new Webhook(run.secret).verify(
      receiver.received[0].body,
      receiver.received[0].headers as Record<string, string>,
    );
    // The attempt log shows the give-up once, numbered as the schedule's third attempt.
    const rows = await stores.callbackAttempts.listForEpisode(`${run.id}:end`, 10);
    assert.deepEqual(
      rows.map((row) => [row.attempt, row.result, row.trigger]),
      [
        [1, 'retry', 'episode'],
        [2, 'retry', 'episode'],
        [3, 'retry', 'episode'],
        [4, 'delivered', 'redeliver'],
      ],
    );
    // Written once: a retry of that write, or the lost write landing after all, finds the row and adds none.
    const { _id: _, attempt: __, ...gaveUp } = rows[2];
    assert.equal(gaveUp.gaveUp, undefined, 'cleared by the redelivery that delivered');
    assert.equal(await stores.callbackAttempts.recordOnce({ ...gaveUp, gaveUp: true }, 3), 3);
    assert.equal((await stores.callbackAttempts.listForEpisode(`${run.id}:end`, 10)).length, 4);
  });

  it('one recover per team at a time: a second while one runs is 409', async () => {
    // A receiver that holds its answer keeps the first recover running.
    receiver.answerAlways({ status: 503 });
    const run = await endRun(alice);
    assert.equal((await episodeResult(`${run.id}:end`)).callback, 'gave_up');
    receiver.answerAlways({ status: 204, delayMs: 1500 });
    const since = new Date(Date.now() - 60_000).toISOString();
    const first = await alice.post('/api/v1/callbacks/recover', { since });
    assert.equal(first.status, 202, first.text);
    const second = await alice.post('/api/v1/callbacks/recover', { since });
    assert.equal(second.status, 409, second.text);
    // Another team is not held up by it.
    const bobs = await bob.post('/api/v1/callbacks/recover', { since });
    assert.equal(bobs.status, 202, bobs.text);
    const done = await finished(alice, first.body.id);
    assert.deepEqual([done.found, done.delivered], [1, 1]);
    receiver.answerAlways({ status: 204 });
  });

  it('refuses a window longer than 14 days, in the future, or empty, and a malformed time', async () => {
    const now = Date.now();
    const iso = (ms: number) => new Date(ms).toISOString();
    const cases: [unknown, RegExp][] = [
      [{ since: iso(now - 15 * 86_400_000) }, /at most 14 days/],
      [{ since: iso(now - 20 * 86_400_000), until: iso(now - 5.9 * 86_400_000) }, /at most 14 days/],
      [{ since: iso(now + 60_000) }, /future/],
      [{ since: iso(now - 60_000), until: iso(now - 120_000) }, /before until/],
      [{ since: 'yesterday' }, /./],
      [{}, /./],
    ];
    for (const [body, message] of cases) {
      const res = await alice.post('/api/v1/callbacks/recover', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.body.error, message);
    }
  });

  it('a recover whose row the API could not write is answered 202 with its id all the same: GET finds it once its workflow wrote it', async () => {
    const failing = await startTestApi(stack.config, {
      stores: (s) => ({
        ...s,
        callbackRecovers: {
          ...s.callbackRecovers,
          open: () => Promise.reject(new Error('the store is away')),
        },
      }),
    });
    try {
      const since = new Date(Date.now() - 60_000).toISOString();
      const res = await failing.client.as('ivy', 'initech').post('/api/v1/callbacks/recover', { since });
      assert.equal(res.status, 202, res.text);
      const ivy = stack.anonymous.as('ivy', 'initech');
      const found = await waitUntil('its row', async () => {
        const read = await ivy.get(`/api/v1/callbacks/recover/${res.body.id}`);
        return read.status === 200 ? read.body : undefined;
      });
      assert.equal(found.found, 0);
    } finally {
      await failing.api.close();
    }
  });

  it('an unknown id is 404', async () => {
    assert.equal((await alice.get('/api/v1/callbacks/recover/rec_missing')).status, 404);
  });
});

// Issue #35, item 1: a recover is no amplifier. What it re-sent within CALLBACK_RECOVER_RESEND_AFTER_SECONDS is
// skipped by the next one, its sends count against the team's redelivery budget, an open breaker holds them, and
// one recover sends at most CALLBACK_RECOVER_MAX. Each test has its own receiver (its own origin) and team.
describe('a recover is no amplifier', function () {
  const TEAM_BUDGET = 4;
  const RECOVER_MAX = 3;
  const BREAKER_FAILURES = 3;
  let stack: FamilyStack;
  let stores: Stores;
  let client: Client;
  const receivers: CallbackReceiver[] = [];

  before(async () => {
    stack = await startFamilyStack(
      {
        CALLBACK_RETRY_SECONDS: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_TIMEOUT_SECONDS: '2',
        SWEEP_INTERVAL_SECONDS: '3600',
        CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM: String(TEAM_BUDGET),
        CALLBACK_REDELIVER_RATE_WINDOW_SECONDS: '3600',
        CALLBACK_RECOVER_MAX: String(RECOVER_MAX),
      },
      {
        // A breaker that stays open for the test once it opened (an hour's cool-down).
        callbackPacing: createOriginPacing({
          maxInFlight: 8,
          breakerFailures: BREAKER_FAILURES,
          cooldownMs: 3_600_000,
          maxCooldownMs: 3_600_000,
        }),
      },
    );
    ({ stores, client } = stack);
  });
  after(async () => {
    await stack?.stop();
    for (const receiver of receivers) await receiver.close();
  });

  async function receiverAnswering(status: number): Promise<CallbackReceiver> {
    const receiver = await CallbackReceiver.start();
    receivers.push(receiver);
    receiver.answerAlways({ status });
    return receiver;
  }

  /** `n` runs of the caller's team whose callbacks gave up (the receiver refuses them), their episode ids. */
  async function gaveUp(caller: ApiClient, receiver: CallbackReceiver, n: number): Promise<string[]> {
    const episodes: string[] = [];
    for (let i = 0; i < n; i++) {
      const res = await caller.post('/api/v1/runs', { callback: { url: receiver.url } });
      assert.equal(res.status, 201, res.text);
      const runId = res.body.id as string;
      assert.equal((await caller.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
      episodes.push(`${runId}:end`);
    }
    for (const episode of episodes) {
      const result = (await client.workflow.getHandle(episode).result()) as EpisodeResult;
      assert.equal(result.callback, 'gave_up', episode);
    }
    return episodes;
  }

  const runOf = (episodeId: string) => episodeId.slice(0, -':end'.length);

  async function startRecover(caller: ApiClient, since: string): Promise<string> {
    const res = await caller.post('/api/v1/callbacks/recover', { since });
    assert.equal(res.status, 202, res.text);
    return res.body.id as string;
  }

  async function progressOf(caller: ApiClient, id: string): Promise<Record<string, unknown>> {
    const res = await caller.get(`/api/v1/callbacks/recover/${id}`);
    assert.equal(res.status, 200, res.text);
    return res.body;
  }

  async function recovered(caller: ApiClient, team: string, since: string): Promise<Record<string, unknown>> {
    const id = await startRecover(caller, since);
    await client.workflow.getHandle(callbackRecoverWorkflowId(team)).result();
    return progressOf(caller, id);
  }

  const counts = (p: Record<string, unknown>) => ({
    found: p.found,
    skipped: p.skipped,
    sent: p.sent,
    delivered: p.delivered,
    failed: p.failed,
    held: p.held,
    stoppedAtMax: p.stoppedAtMax,
  });

  it('a give-up re-sent within CALLBACK_RECOVER_RESEND_AFTER_SECONDS is skipped by the next recover, and counted so', async () => {
    const caller = stack.anonymous.as('umbrella-admin', 'umbrella');
    const receiver = await receiverAnswering(400);
    const since = new Date(Date.now() - 1000).toISOString();
    const episodes = await gaveUp(caller, receiver, 2);
    assert.equal(receiver.received.length, 2);

    // The receiver still refuses: the first recover sends both, and both fail.
    const first = await recovered(caller, 'umbrella', since);
    assert.deepEqual([first.found, first.sent, first.failed], [2, 2, 2]);
    assert.equal(receiver.received.length, 4);

    // A second recover right after finds them still given up, and sends nothing: it skips them, and says so.
    const second = await recovered(caller, 'umbrella', since);
    assert.deepEqual([second.found, second.sent], [2, 0], 'the second recover sends nothing');
    assert.equal(receiver.received.length, 4, 'nothing reached the receiver again');
    const none = { delivered: 0, failed: 0, held: 0, stoppedAtMax: false };
    assert.deepEqual(counts(first), { ...none, found: 2, skipped: 0, sent: 2, failed: 2 });
    assert.deepEqual(counts(second), { ...none, found: 2, skipped: 2, sent: 0 });

    // Once the re-sends are older than the setting (rows moved back two hours), a recover sends them again.
    await stack.mongo.db
      .collection('callback_attempts')
      .updateMany(
        { episodeId: { $in: episodes }, trigger: 'redeliver' },
        { $set: { at: new Date(Date.now() - 2 * 3600_000) } },
      );
    const third = await recovered(caller, 'umbrella', since);
    assert.deepEqual([third.found, third.skipped, third.sent], [2, 0, 2]);
    assert.equal(receiver.received.length, 6);
  });

  it('a redelivery that fails itself (terminated while its attempt is in flight) counts as failed; the recover goes on', async () => {
    const caller = stack.anonymous.as('wayne-admin', 'wayne');
    const receiver = await receiverAnswering(400);
    const since = new Date(Date.now() - 1000).toISOString();
    const episodes = await gaveUp(caller, receiver, 2);
    // The receiver now holds every request: each redelivery's attempt is in flight until its deadline.
    receiver.answerAlways({ status: 204, delayMs: 30_000 });
    const id = await startRecover(caller, since);
    const recoverHandle = client.workflow.getHandle(callbackRecoverWorkflowId('wayne'));
    try {
      await waitUntil('a redelivery in flight', () => receiver.open > 0, { intervalMs: 10 });
      for (const episode of episodes)
        await client.workflow
          .getHandle(callbackRedeliverWorkflowId(episode))
          .terminate('an operator stops it')
          .catch(() => undefined); // not started yet, or done
      const closed = await waitUntil(
        'the recover to close',
        async () => {
          const { status } = await recoverHandle.describe();
          return status.name === 'RUNNING' ? undefined : status.name;
        },
        { timeoutMs: 60_000 },
      );
      assert.equal(closed, 'COMPLETED');
    } finally {
      recordFixture(
        stack.config,
        callbackRecoverWorkflowId('wayne'),
        'callback-recover-redelivery-failed-counted-history.json',
      );
      await recoverHandle.terminate('test over').catch(() => undefined);
      receiver.answerAlways({ status: 400 });
    }
    const progress = await progressOf(caller, id);
    assert.equal(progress.status, 'completed');
    assert.deepEqual(counts(progress), {
      found: 2,
      skipped: 0,
      sent: 2,
      delivered: 0,
      failed: 2,
      held: 0,
      stoppedAtMax: false,
    });
  });

  it("with the team's redelivery budget spent, a recover sends nothing past it and says it waits for it", async () => {
    // The probe: the team's budget is TEAM_BUDGET; manual redeliveries answer 202 until it is spent, then 429.
    const caller = stack.anonymous.as('initech-admin', 'initech');
    const receiver = await receiverAnswering(400);
    const since = new Date(Date.now() - 1000).toISOString();
    const episodes = await gaveUp(caller, receiver, TEAM_BUDGET + 1);
    const statuses: number[] = [];
    for (const episode of episodes) {
      const res = await caller.post(`/api/v1/runs/${runOf(episode)}/episodes/${episode}/callback/redeliver`);
      statuses.push(res.status);
    }
    assert.deepEqual(statuses, [...Array<number>(TEAM_BUDGET).fill(202), 429]);
    for (const episode of episodes.slice(0, TEAM_BUDGET))
      await client.workflow.getHandle(callbackRedeliverWorkflowId(episode)).result();
    const before = receiver.received.length;
    assert.equal(before, 2 * TEAM_BUDGET + 1);

    // The recover skips the ones just redelivered, and the last one waits for the team's budget.
    const id = await startRecover(caller, since);
    const recoverHandle = client.workflow.getHandle(callbackRecoverWorkflowId('initech'));
    try {
      const waiting = await waitUntil(
        'the recover to wait for the budget, or to end',
        async () => {
          const p = await progressOf(caller, id);
          return p.waitingForBudgetUntil !== undefined || p.status === 'completed' ? p : undefined;
        },
        { timeoutMs: 60_000 },
      );
      assert.deepEqual(
        { found: waiting.found, skipped: waiting.skipped, sent: waiting.sent, status: waiting.status },
        { found: TEAM_BUDGET + 1, skipped: TEAM_BUDGET, sent: 0, status: 'running' },
      );
      assert.ok(
        Date.parse(String(waiting.waitingForBudgetUntil)) > Date.now(),
        `waits until ${String(waiting.waitingForBudgetUntil)}`,
      );
      assert.equal(receiver.received.length, before, 'nothing sent past the budget');
    } finally {
      await recoverHandle.terminate('test over').catch(() => undefined);
    }
  });

  it("a recover's redeliveries do not go past an open breaker: held, counted, and left given up", async () => {
    const caller = stack.anonymous.as('hooli-admin', 'hooli');
    const receiver = await receiverAnswering(400);
    const since = new Date(Date.now() - 1000).toISOString();
    // Callbacks that gave up (refused with a 400: the receiver is up for the breaker, so it stays closed).
    const episodes = await gaveUp(caller, receiver, 2 * BREAKER_FAILURES);
    // Then the receiver fails: manual redeliveries of some (they go past a breaker, and their failures count)
    // open the team's breaker there.
    receiver.answerAlways({ status: 503 });
    const opening = episodes.slice(0, BREAKER_FAILURES);
    for (const episode of opening) {
      const res = await caller.post(`/api/v1/runs/${runOf(episode)}/episodes/${episode}/callback/redeliver`);
      assert.equal(res.status, 202, res.text);
      await client.workflow.getHandle(callbackRedeliverWorkflowId(episode)).result();
    }
    const before = receiver.received.length;
    const rest = episodes.slice(BREAKER_FAILURES);
    const claimsBefore = await Promise.all(rest.map((e) => stores.claims.describe(`cb|${e}`)));

    // The recover skips the ones just redelivered; the others are held by the open breaker.
    const progress = await recovered(caller, 'hooli', since);
    assert.equal(receiver.received.length, before, 'nothing went past the open breaker');
    recordFixture(stack.config, callbackRedeliverWorkflowId(rest[0]), 'callback-redeliver-held-history.json');
    assert.deepEqual(counts(progress), {
      found: 2 * BREAKER_FAILURES,
      skipped: BREAKER_FAILURES,
      sent: 0,
      delivered: 0,
      failed: 0,
      held: BREAKER_FAILURES,
      stoppedAtMax: false,
    });
    // Held is not a failure: each claim reads as it did (a later recover finds them again).
    const claimsAfter = await Promise.all(rest.map((e) => stores.claims.describe(`cb|${e}`)));
    assert.deepEqual(
      claimsAfter.map((c) => c.result),
      claimsBefore.map((c) => c.result),
    );
  });

  it('one recover sends at most CALLBACK_RECOVER_MAX, and its progress says it stopped there', async () => {
    const caller = stack.anonymous.as('stark-admin', 'stark');
    const receiver = await receiverAnswering(400);
    const since = new Date(Date.now() - 1000).toISOString();
    await gaveUp(caller, receiver, RECOVER_MAX + 2);
    const before = receiver.received.length;
    const progress = await recovered(caller, 'stark', since);
    assert.equal(progress.status, 'completed');
    assert.deepEqual([progress.sent, progress.stoppedAtMax], [RECOVER_MAX, true]);
    assert.equal(receiver.received.length, before + RECOVER_MAX);
  });
});
