// Recover (POST /api/v1/callbacks/recover) end to end: real API, worker, Temporal and FerretDB; a loopback receiver
// down long enough for a schedule of attempts, then back. Every callback of the team that gave up in the window is
// delivered once more (same webhook-id, a signature that verifies), and nothing else is sent.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import { callbackRecoverWorkflowId, type EpisodeResult } from '../contract/workflows';
import type { Stores } from '../store';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';

describe('recover of the callbacks that gave up', function () {
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let stores: Stores;
  let client: Client;
  let alice: ApiClient;
  let bob: ApiClient;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack({
      CALLBACK_RETRY_SECONDS: '1,1',
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_TIMEOUT_SECONDS: '2',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
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
    assert.deepEqual(
      { ...progress, since: undefined, until: undefined },
      {
        id,
        status: 'completed',
        since: undefined,
        until: undefined,
        found: 3,
        sent: 3,
        delivered: 3,
        failed: 0,
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

    // Again over the same window: nothing is left given up, nothing is sent.
    const again = await alice.post('/api/v1/callbacks/recover', { since });
    assert.equal(again.status, 202, again.text);
    const second = await finished(alice, again.body.id);
    assert.deepEqual([second.found, second.sent], [0, 0]);
    assert.equal(receiver.received.length, 3);

    // Another team's recover is not found there.
    assert.equal((await bob.get(`/api/v1/callbacks/recover/${id}`)).status, 404);
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

  it('an unknown id is 404', async () => {
    assert.equal((await alice.get('/api/v1/callbacks/recover/rec_missing')).status, 404);
  });
});
