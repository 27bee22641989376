// The push family end to end: real API, real worker, real Temporal and FerretDB, and the loopback push service
// that verifies VAPID and decrypts what it receives.
import assert from 'node:assert/strict';
import { episodeOptions } from '../client/emitter';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import type { PushPayload } from '../domain/push';
import type { EpisodeResult } from '../contract/workflows';
import {
  createPushActivities,
  groupCommit,
  type DigestDeps,
  type PushActivityDeps,
} from '../activities/push';
import { pushFollowUp } from '../activities/interaction/pushes';
import type { Run } from '../domain/run';
import type { RunOutcome } from '../domain/outcome';
import type { PushDeliveryResult } from '../contract/activities';
import type { SweepReport } from '../contract/workflows';
import { pushSenderFor, type PushSender } from '../delivery/push/sender';
import { subscriptionId } from '../store/push/subscriptions';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { ApiClient, openStores, recordFixture, startTestApi } from './support/harness';
import { startPushService, type PushService, type SubscriptionJSON } from './support/pushService';
import { TEST_PUSH_BURST_LIMIT, testConfig } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { sweepWorkflow } from '../workflows/sweep';

const STUDIO = 'https://studio.flow.test';

/** A fresh VAPID identity's settings. */
function vapidVars(): Record<string, string> {
  const vapid = webpush.generateVAPIDKeys();
  return {
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: 'mailto:ops@flow.test',
  };
}

describe('push family', function () {
  let push: PushService;
  let stack: FamilyStack;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let anonymous: ApiClient;
  let alice: ApiClient; // owner of the runs below, team acme
  let bob: ApiClient; // acme, chose team-wide scope
  let carol: ApiClient; // acme, default scope (own runs only)
  let mallory: ApiClient; // another team, team-wide scope
  const subs: Record<string, SubscriptionJSON[]> = {};

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        STUDIO_URL: STUDIO,
        SWEEP_INTERVAL_SECONDS: '3600',
        // The fan-out's cases push alice's devices dozens of times in a minute; bursts are test/pushBurst.test.ts's.
        PUSH_BURST_LIMIT: TEST_PUSH_BURST_LIMIT,
      },
      // Fast retries: an episode whose every send fails goes through its five fan-out attempts in ~3 s, not 30.
      { push, fastRetries: true },
    );
    ({ config, mongo, stores, client, anonymous } = stack);
    alice = anonymous.as('alice', 'acme');
    bob = anonymous.as('bob', 'acme');
    carol = anonymous.as('carol', 'acme');
    mallory = anonymous.as('mallory', 'evil');

    for (const [name, user, count] of [
      ['alice', alice, 2],
      ['bob', bob, 1],
      ['carol', carol, 1],
      ['mallory', mallory, 1],
    ] as const) {
      subs[name] = [];
      for (let i = 0; i < count; i++) {
        const subscription = push.endpoint(`${name}${i}`);
        const res = await user.post('/api/v1/notifications/push/subscriptions', subscription);
        assert.equal(res.status, 201, res.text);
        subs[name].push(subscription);
      }
    }
    assert.equal((await bob.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    assert.equal((await mallory.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
  });

  after(async () => {
    await stack?.stop();
    await push?.close();
  });

  beforeEach(() => push.reset());

  const episodeResult = (episodeId: string) =>
    client.workflow.getHandle(episodeId).result() as Promise<EpisodeResult>;
  const payloadsFor = (sub: SubscriptionJSON) => push.received(sub).map((r) => r.payload as PushPayload);
  const sweep = () =>
    client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `sweep-test-${Date.now()}-${Math.random()}`,
    }) as Promise<SweepReport>;

  async function newRun(owner = alice, body: Record<string, unknown> = {}): Promise<string> {
    const res = await owner.post('/api/v1/runs', { title: 'Quarterly report', ...body });
    assert.equal(res.status, 201, res.text);
    return res.body.id as string;
  }

  it('a paused run pushes once to every endpoint of the owner and of team-wide teammates, and to no one else', async () => {
    const runId = await newRun();
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Approve the budget of $1,200?',
    });
    const episodeId = `${runId}:input:${paused.body.interactionId}`;
    assert.deepEqual(await episodeResult(episodeId), {
      episodeId,
      push: 'delivered',
      callback: 'not_owed',
      ops: 'not_owed',
    });

    for (const sub of [...subs.alice, ...subs.bob]) {
      const payloads = payloadsFor(sub);
      assert.equal(payloads.length, 1, `one push for ${sub.endpoint}`);
      // A question without choices offers a snooze, with the person's own single-use token.
      const { actions, ...payload } = payloads[0];
      assert.deepEqual(
        actions?.map(({ action, title }) => ({ action, title })),
        [{ action: 'snooze', title: 'Snooze 1 h' }],
      );
      assert.match(actions[0].token, /^[A-Za-z0-9_-]{43}$/);
      assert.deepEqual(payload, {
        v: 1,
        kind: 'human_input_requested',
        title: 'Quarterly report needs your input',
        body: 'Approve the budget of $1,200?',
        url: `${STUDIO}/runs/${runId}`,
        tag: episodeId,
        runId,
        episodeId,
        // The same notification, declaratively (Safari 18.4+ shows it without the service worker).
        web_push: 8030,
        notification: {
          title: 'Quarterly report needs your input',
          body: 'Approve the budget of $1,200?',
          navigate: `${STUDIO}/runs/${runId}`,
          tag: episodeId,
          require_interaction: true,
        },
        mutable: true,
        receipt: payloads[0].receipt,
      });
      assert.match(payloads[0].receipt ?? '', /^[A-Za-z0-9_-]{43}$/, "the device's receipt token");
      const [received] = push.received(sub);
      assert.equal(received.headers.urgency, 'high');
      assert.ok(received.headers.topic && received.headers.topic.length <= 32);
    }
    for (const sub of [...subs.carol, ...subs.mallory]) assert.equal(payloadsFor(sub).length, 0);
    assert.equal(await stores.claims.state(episodeId), 'delivered');
    assert.equal(await stores.pushDeliveries.countForEpisode(episodeId), 3);
  });

  it("a long final answer: the push says its head, and each push attempt's input in the history carries a few KB of it", async () => {
    const runId = await newRun();
    const answer = `Revenue grew 12%. ${'Detail. '.repeat(60_000)}`; // 480 KB
    assert.equal((await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: answer })).status, 200);
    await episodeResult(`${runId}:end`);
    const pushed = payloadsFor(subs.alice[0]).find((p) => p.runId === runId);
    assert.ok(
      pushed?.body.startsWith('Revenue grew 12%. Detail.') && pushed.body.endsWith('…'),
      pushed?.body,
    );
    const history = await client.workflow.getHandle(`${runId}:end`).fetchHistory();
    const inputs = (history.events ?? []).flatMap((e) => {
      const scheduled = e.activityTaskScheduledEventAttributes;
      if (scheduled?.activityType?.name !== 'deliverPush') return [];
      return [(scheduled.input?.payloads ?? []).reduce((sum, p) => sum + (p.data?.length ?? 0), 0)];
    });
    assert.ok(inputs.length >= 1, 'a push attempt scheduled');
    for (const bytes of inputs) assert.ok(bytes < 16_384, `a push attempt's input of ${bytes} bytes`);
  });

  it('the VAPID JWT is signed once per push service, not per message', async () => {
    const runId = await newRun();
    await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'Revenue grew 12%.' });
    await episodeResult(`${runId}:end`);
    assert.equal(push.received().length, 3);
    assert.equal(push.distinctJwtCount, 1);
  });

  it('terminal kinds: finished carries the final answer, failed the error, cancelled its own title', async () => {
    const finished = await newRun();
    await alice.post(`/api/v1/runs/${finished}/complete`, { finalAnswer: 'Revenue grew 12%.' });
    const failed = await newRun();
    await alice.post(`/api/v1/runs/${failed}/fail`, {
      error: { code: 'tool_crashed', message: 'The SQL tool crashed.' },
    });
    const cancelled = await newRun();
    await alice.post(`/api/v1/runs/${cancelled}/cancel`);
    await Promise.all([finished, failed, cancelled].map((id) => episodeResult(`${id}:end`)));
    const byRun = new Map(payloadsFor(subs.alice[0]).map((p) => [p.runId, p]));
    assert.equal(byRun.get(finished)?.kind, 'run_finished');
    assert.equal(byRun.get(finished)?.body, 'Revenue grew 12%.');
    assert.equal(byRun.get(failed)?.kind, 'run_failed');
    assert.equal(byRun.get(failed)?.body, 'The SQL tool crashed.');
    assert.equal(byRun.get(cancelled)?.title, 'Quarterly report was cancelled');
    assert.equal(push.received(subs.alice[0])[0].headers.urgency, 'normal');
  });

  it('a usage park has its own kind carrying the wall; an operator soft-pause pushes nothing', async () => {
    const parked = await newRun();
    await alice.post(`/api/v1/runs/${parked}/park`, { wall: 'monthly_usd' });
    assert.equal((await episodeResult(`${parked}:park:monthly_usd:1`)).push, 'delivered');
    const [payload] = payloadsFor(subs.alice[0]);
    assert.equal(payload.kind, 'usage_parked');
    assert.match(payload.body, /monthly_usd/);

    push.reset();
    const soft = await newRun();
    await alice.post(`/api/v1/runs/${soft}/soft-pause`);
    assert.equal((await episodeResult(`${soft}:soft-pause:1`)).push, 'not_owed');
    assert.equal(push.received().length, 0);
    assert.equal(await stores.claims.state(`${soft}:soft-pause:1`), 'absent');
  });

  it('the standby veto blocks the pause push of a watched run, leaves it replayable, and not its terminal push', async () => {
    const watched = await newRun(alice, { watchedIssueIds: ['ISSUE-7'] });
    const paused = await alice.post(`/api/v1/runs/${watched}/pause`, { prompt: 'Which issue first?' });
    const pauseEpisode = `${watched}:input:${paused.body.interactionId}`;
    assert.equal((await episodeResult(pauseEpisode)).push, 'vetoed');
    assert.equal(await stores.claims.state(pauseEpisode), 'absent', 'no claim: the episode stays replayable');

    const assisted = await newRun();
    assert.equal((await alice.put(`/api/v1/assistants/asst_1/watches/${assisted}`)).status, 200);
    const pausedToo = await alice.post(`/api/v1/runs/${assisted}/pause`, { prompt: 'Proceed?' });
    assert.equal((await episodeResult(`${assisted}:input:${pausedToo.body.interactionId}`)).push, 'vetoed');
    assert.equal(push.received().length, 0);

    await alice.post(`/api/v1/runs/${assisted}/interactions/${pausedToo.body.interactionId}/answer`, {
      answer: 'yes',
    });
    await alice.post(`/api/v1/runs/${assisted}/complete`, { finalAnswer: 'ok' });
    assert.equal((await episodeResult(`${assisted}:end`)).push, 'delivered');
    assert.equal(payloadsFor(subs.alice[0]).length, 1);
  });

  it('five concurrent emits of one outcome plus a sweep pass push once per endpoint', async () => {
    const runId = await newRun();
    await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'done' });
    const { createOutcomeEmitter } = await import('../client/emitter');
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    });
    await Promise.all(Array.from({ length: 5 }, () => emitter.emitRunOutcome(runId)));
    await episodeResult(`${runId}:end`);
    const report = await sweep();
    assert.ok(report.scanned >= 1);
    await episodeResult(`${runId}:end`);
    for (const sub of [...subs.alice, ...subs.bob]) {
      assert.equal(payloadsFor(sub).filter((p) => p.runId === runId).length, 1, sub.endpoint);
    }
  });

  it('404 and 410 prune the subscription; the rest of the fan-out still delivers', async () => {
    const owner = anonymous.as('erin', 'erin-team');
    const gone = push.endpoint('erin-gone');
    const expired = push.endpoint('erin-expired');
    const fine = push.endpoint('erin-fine');
    for (const s of [gone, expired, fine]) {
      assert.equal((await owner.post('/api/v1/notifications/push/subscriptions', s)).status, 201);
    }
    push.failAlways(gone, 404);
    push.failAlways(expired, 410);
    const runId = await newRun(owner);
    await owner.post(`/api/v1/runs/${runId}/cancel`);
    assert.equal((await episodeResult(`${runId}:end`)).push, 'delivered');
    assert.equal(push.received(fine).length, 1);
    const left = await stores.pushSubscriptions.listForUsers(['erin']);
    assert.deepEqual(
      left.map((s) => s.endpoint),
      [fine.endpoint],
    );
  });

  it('every endpoint failing releases the claim; once the sink recovers the next sweep delivers', async () => {
    const owner = anonymous.as('frank', 'frank-team');
    const flaky = push.endpoint('frank');
    await owner.post('/api/v1/notifications/push/subscriptions', flaky);
    push.failAlways(flaky, 500);
    const runId = await newRun(owner);
    await owner.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'x' });
    assert.equal((await episodeResult(`${runId}:end`)).push, 'released');
    assert.equal(await stores.claims.state(`${runId}:end`), 'absent');
    assert.equal(push.received(flaky).length, 0);
    assert.equal((await stores.pushSubscriptions.listForUsers(['frank'])).length, 1, '5xx never prunes');

    push.recover(flaky);
    const report = await sweep();
    assert.ok(report.started >= 1, JSON.stringify(report));
    assert.equal((await episodeResult(`${runId}:end`)).push, 'delivered');
    assert.equal(push.received(flaky).length, 1);
    assert.equal(await stores.claims.state(`${runId}:end`), 'delivered');
  });

  it('no recipient subscription confirms the claim, and the sweep never retries it', async () => {
    const nobody = anonymous.as('grace', 'lonely-team');
    const runId = await newRun(nobody);
    await nobody.post(`/api/v1/runs/${runId}/cancel`);
    assert.equal((await episodeResult(`${runId}:end`)).push, 'not_addressable');
    assert.equal(await stores.claims.state(`${runId}:end`), 'delivered');
    const before = await client.workflow.getHandle(`${runId}:end`).describe();
    await sweep();
    const after = await client.workflow.getHandle(`${runId}:end`).describe();
    assert.equal(after.runId, before.runId, 'no new run of the episode');
  });

  it('a 429 with Retry-After is retried after the wait and delivered once', async () => {
    const owner = anonymous.as('heidi', 'heidi-team');
    const busy = push.endpoint('heidi');
    await owner.post('/api/v1/notifications/push/subscriptions', busy);
    push.failNext(busy, [429], { 'Retry-After': '1' });
    const runId = await newRun(owner);
    await owner.post(`/api/v1/runs/${runId}/cancel`);
    assert.equal((await episodeResult(`${runId}:end`)).push, 'delivered');
    const attempts = push.attempts(busy).map((a) => a.status);
    assert.deepEqual(attempts, [429, 201]);
    const [first, second] = push.attempts(busy);
    assert.ok(second.at.getTime() - first.at.getTime() >= 900, 'waited for Retry-After');
  });

  it("a 429 whose Retry-After is longer than a send waits: the fan-out's next attempt is not before it", async () => {
    const owner = anonymous.as('heidi2', 'heidi2-team');
    const busy = push.endpoint('heidi2');
    await owner.post('/api/v1/notifications/push/subscriptions', busy);
    push.failNext(busy, [429], { 'Retry-After': '600' });
    const runId = await newRun(owner);
    await owner.post(`/api/v1/runs/${runId}/cancel`);
    const handle = client.workflow.getHandle(`${runId}:end`);
    const retrying = await waitUntil('the fan-out failed once and waits for its next attempt', async () => {
      const { raw } = await handle.describe();
      const fanOut = raw.pendingActivities?.find((a) => a.activityType?.name === 'deliverPush');
      return fanOut?.lastFailure && fanOut.nextAttemptScheduleTime ? fanOut : undefined;
    });
    try {
      const ms = (t: { seconds?: unknown; nanos?: number | null } | null | undefined) =>
        Number(t?.seconds ?? 0) * 1000 + Math.floor((t?.nanos ?? 0) / 1e6);
      const waitMs = ms(retrying.nextAttemptScheduleTime) - ms(retrying.lastAttemptCompleteTime);
      assert.ok(waitMs >= 590_000, `the next attempt ${waitMs} ms after the failed one, asked to wait 600 s`);
      assert.deepEqual(
        push.attempts(busy).map((a) => a.status),
        [429],
      );
    } finally {
      await handle.terminate('the test is done with it');
    }
  });

  it("a device whose push service failed without asking to wait is not held up by another service's Retry-After", async () => {
    const owner = anonymous.as('heidi3', 'heidi3-team');
    const [busy, flaky] = [push.endpoint('heidi3'), push.endpoint('heidi3')];
    for (const device of [busy, flaky]) await owner.post('/api/v1/notifications/push/subscriptions', device);
    push.failNext(busy, [429], { 'Retry-After': '600' });
    push.failNext(flaky, [503, 503, 503]); // every try of the send: the fan-out's next attempt is owed it
    const runId = await newRun(owner);
    await owner.post(`/api/v1/runs/${runId}/cancel`);
    try {
      // The fan-out's next attempt comes on the retry policy's backoff, a couple of seconds, not in ten minutes.
      await waitUntil(
        'the device whose service failed has the push',
        () => push.received(flaky).length === 1,
      );
    } catch (err) {
      await client.workflow.getHandle(`${runId}:end`).terminate('the test is done with it');
      throw err;
    }
    // That attempt tried the throttled service too, before its wait: the price of not holding the other device.
    assert.equal((await episodeResult(`${runId}:end`)).push, 'delivered');
    assert.deepEqual(
      push.attempts(busy).map((a) => a.status),
      [429, 201],
    );
  });

  it('413 is never retried as is, by the episode or the sweep, and does not prune', async () => {
    const owner = anonymous.as('ivan', 'ivan-team');
    const small = push.endpoint('ivan');
    await owner.post('/api/v1/notifications/push/subscriptions', small);
    push.failAlways(small, 413);
    const runId = await newRun(owner);
    await owner.post(`/api/v1/runs/${runId}/cancel`);
    assert.equal((await episodeResult(`${runId}:end`)).push, 'gave_up');
    recordFixture(config, `${runId}:end`, 'episode-history-push-refused-gave-up.json');
    assert.deepEqual(await stores.claims.describe(`${runId}:end`), {
      state: 'delivered',
      result: 'gave_up: every push service refused the message',
    });
    await sweep();
    await episodeResult(`${runId}:end`); // whatever the pass started
    assert.deepEqual(
      push.attempts(small).map((a) => a.status),
      [413],
    );
    assert.equal((await stores.pushSubscriptions.listForUsers(['ivan'])).length, 1);
  });

  describe('routes', () => {
    it('GET vapid-public-key answers the configured key', async () => {
      const res = await alice.get('/api/v1/notifications/push/vapid-public-key');
      assert.equal(res.status, 200);
      assert.equal(res.body.publicKey, config.vapid?.publicKey);
    });

    it('subscribe: 201 new, 200 updated; missing fields and bad bodies are 400 with the seed messages', async () => {
      const s = push.endpoint('judy');
      const judy = anonymous.as('judy', 'acme');
      assert.equal((await judy.post('/api/v1/notifications/push/subscriptions', s)).status, 201);
      assert.equal((await judy.post('/api/v1/notifications/push/subscriptions', s)).status, 200);
      for (const body of [
        {},
        { endpoint: s.endpoint },
        { endpoint: s.endpoint, keys: { p256dh: s.keys.p256dh } },
      ]) {
        const res = await judy.post('/api/v1/notifications/push/subscriptions', body);
        assert.equal(res.status, 400);
        assert.equal(res.body.error, 'subscription requires endpoint, keys.p256dh and keys.auth');
      }
      for (const body of [
        '[1,2]',
        '"text"',
        JSON.stringify({ endpoint: 42, keys: { p256dh: 1, auth: 2 } }),
      ]) {
        const res = await judy.request('POST', '/api/v1/notifications/push/subscriptions', body);
        assert.equal(res.status, 400);
        assert.equal(res.body.error, 'invalid subscription payload');
      }
    });

    it('unsubscribe deletes only the caller’s own row', async () => {
      const s = push.endpoint('kim');
      const kim = anonymous.as('kim', 'acme');
      await kim.post('/api/v1/notifications/push/subscriptions', s);
      const other = await mallory.delete('/api/v1/notifications/push/subscriptions', {
        endpoint: s.endpoint,
      });
      assert.equal(other.status, 204);
      assert.equal((await stores.pushSubscriptions.listForUsers(['kim'])).length, 1, 'still there');
      assert.equal(
        (await kim.delete('/api/v1/notifications/push/subscriptions', { endpoint: s.endpoint })).status,
        204,
      );
      assert.equal((await stores.pushSubscriptions.listForUsers(['kim'])).length, 0);
    });

    it('prefs: own by default, team stored as a row, own removes it; a bad scope is 400', async () => {
      const leo = anonymous.as('leo', 'acme');
      assert.equal((await leo.get('/api/v1/notifications/prefs')).body.scope, 'own');
      assert.equal((await leo.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
      assert.equal((await leo.get('/api/v1/notifications/prefs')).body.scope, 'team');
      assert.equal(
        await mongo.db.collection('notification_prefs').countDocuments({ userId: 'leo', teamId: 'acme' }),
        1,
      );
      await leo.put('/api/v1/notifications/prefs', { scope: 'own' });
      assert.equal(
        await mongo.db.collection('notification_prefs').countDocuments({ userId: 'leo', teamId: 'acme' }),
        0,
      );
      const bad = await leo.put('/api/v1/notifications/prefs', { scope: 'everyone' });
      assert.equal(bad.status, 400);
      assert.equal(bad.body.error, 'scope must be own or team');
    });

    it('push test: 202 with the number of the caller’s endpoints reached', async () => {
      const res = await alice.post('/api/v1/notifications/push/test');
      assert.equal(res.status, 202);
      assert.deepEqual(res.body, { sent: 2 });
      const payload = payloadsFor(subs.alice[0])[0];
      assert.equal(payload.kind, 'test');
    });

    it('every notification route needs a token', async () => {
      assert.equal((await anonymous.get('/api/v1/notifications/prefs')).status, 401);
      assert.equal((await anonymous.post('/api/v1/notifications/push/subscriptions', {})).status, 401);
    });
  });
});

describe('push routes when web push is off', () => {
  let api: ApiHandle;
  let user: ApiClient;
  before(async () => {
    const started = await startTestApi(testConfig());
    api = started.api;
    user = started.client.as('alice', 'acme');
  });
  after(() => api?.close());

  it('GET prefs reaches the JSON 404; the mutating routes answer 405', async () => {
    const get = await user.get('/api/v1/notifications/prefs');
    assert.equal(get.status, 404);
    assert.deepEqual(get.body, { error: 'not found' });
    assert.equal((await user.get('/api/v1/notifications/push/vapid-public-key')).status, 404);
    for (const [method, path] of [
      ['PUT', '/api/v1/notifications/prefs'],
      ['POST', '/api/v1/notifications/push/subscriptions'],
      ['DELETE', '/api/v1/notifications/push/subscriptions'],
      ['POST', '/api/v1/notifications/push/test'],
    ]) {
      const res = await user.request(method, path, {});
      assert.equal(res.status, 405, `${method} ${path}`);
    }
  });
});

describe('push delivery records', () => {
  it('group commit: records arriving during a write go in the next one, and a failed write fails only its own', async () => {
    const writes: number[][] = [];
    let failNext = false;
    let release: () => void = () => undefined;
    const record = groupCommit<number>(async (items) => {
      writes.push(items);
      await new Promise<void>((resolve) => (release = resolve));
      if (failNext) throw new Error('store down');
    });
    const first = record(1);
    const waiting = [record(2), record(3), record(4)];
    release();
    await first;
    failNext = true;
    release();
    const failed = await Promise.allSettled(waiting);
    assert.deepEqual(writes, [[1], [2, 3, 4]]);
    assert.deepEqual(
      failed.map((r) => r.status),
      ['rejected', 'rejected', 'rejected'],
    );
    failNext = false;
    const later = record(5);
    release();
    await later;
    assert.deepEqual(writes.at(-1), [5]);
  });

  it('group commit with a linger: records arriving within it share one write, a full batch or flushNow goes at once', async () => {
    const writes: number[][] = [];
    // A linger no test outlives: only fullAt and flushNow can start these writes.
    const record = groupCommit<number>(async (items) => void writes.push(items), {
      ms: 3_600_000,
      fullAt: 3,
    });
    const lingering = [record(1), record(2)];
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(writes, [], 'a batch below fullAt waits for others');
    record.flushNow();
    await Promise.all(lingering);
    assert.deepEqual(writes, [[1, 2]]);
    await Promise.all([record(3), record(4), record(5)]);
    assert.deepEqual(
      writes,
      [
        [1, 2],
        [3, 4, 5],
      ],
      'a full batch is written without waiting',
    );
    record.flushNow(); // nothing lingers: no empty write
    assert.equal(writes.length, 2);
  });

  it('batches: a second writer takes the next number, a batch written twice counts once, rows of the old shape stay readable', async () => {
    const { mongo, stores } = await openStores(testConfig());
    try {
      const episodeId = `run_rec_${Date.now()}:end`;
      const at = new Date();
      const delivery = (subscriptionId: string) => ({ subscriptionId, userId: 'alice', at });
      // A row of the old shape (one per send), as an existing .data folder holds it.
      await mongo.db.collection('push_deliveries').insertOne({
        _id: `${episodeId}|s0`,
        episodeId,
        subscriptionId: 's0',
        userId: 'alice',
        at: new Date(at.getTime() - 1000),
      } as never);
      const first = await stores.pushDeliveries.reached(episodeId, ['s0', 's1']);
      assert.deepEqual([...first.subscriptions.keys()], ['s0']);
      assert.equal(first.nextBatch, 0);
      // Two writers from the same number (a retried attempt beside a slow one): neither loses its batch.
      const a = stores.pushDeliveries.batchWriter(episodeId, 0);
      const b = stores.pushDeliveries.batchWriter(episodeId, 0);
      await a([delivery('s1'), delivery('s2')]);
      await b([delivery('s3')]);
      await a([delivery('s2'), delivery('s4')]); // written again after a write that failed once it had landed
      const later = await stores.pushDeliveries.reached(episodeId, ['s0', 's1', 's3', 's4', 's5']);
      assert.deepEqual([...later.subscriptions.keys()].sort(), ['s0', 's1', 's3', 's4']);
      assert.equal(later.nextBatch, 3);
      assert.equal(await stores.pushDeliveries.countForEpisode(episodeId), 5);
      const listed = await stores.pushDeliveries.listForEpisode(episodeId, 3);
      assert.deepEqual(
        listed.map((d) => [d.episodeId, d.subscriptionId]),
        [
          [episodeId, 's0'],
          [episodeId, 's1'],
          [episodeId, 's2'],
        ],
      );
      // Past the first page of batch numbers, the read goes on.
      const many = `run_many_${Date.now()}:end`;
      const write = stores.pushDeliveries.batchWriter(many, 0);
      for (let n = 0; n < 70; n++) await write([delivery(`m${n}`)]);
      const all = await stores.pushDeliveries.reached(
        many,
        Array.from({ length: 71 }, (_, n) => `m${n}`),
      );
      assert.equal(all.subscriptions.size, 70);
      assert.equal(all.nextBatch, 70);
      // Reaped like the rows of the old shape: by the newest delivery in it.
      const reaped = await stores.pushDeliveries.reapExpired(new Date(Date.now() + 31 * 24 * 3600 * 1000));
      assert.ok(reaped >= 74, `reaped ${reaped}`);
      assert.equal(await stores.pushDeliveries.countForEpisode(episodeId), 0);
    } finally {
      await mongo.client.close();
    }
  });

  it('the reads and writes before the first push that do not wait on each other go out together', async function () {
    this.timeout(30_000);
    const push = await startPushService();
    const config = testConfig({ PUSH_ALLOW_PRIVATE: '1', ...vapidVars() });
    const { mongo, stores } = await openStores(config);
    const sender = pushSenderFor(config, { ca: push.ca })!;
    /** Each store call's start and its answer, in the order they happened, by "<store>.<method>". */
    const seen: string[] = [];
    const watched = <T extends object>(name: string, store: T): T =>
      new Proxy(store, {
        get(obj, key) {
          const value = Reflect.get(obj, key) as unknown;
          if (typeof value !== 'function') return value;
          return async (...args: unknown[]) => {
            seen.push(`start ${name}.${String(key)}`);
            const answer: unknown = await (value as (...a: unknown[]) => unknown).apply(obj, args);
            seen.push(`done ${name}.${String(key)}`);
            return answer;
          };
        },
      });
    const delivered = (result: PushDeliveryResult) => (result.addressable ? result.delivered : result.reason);
    const startedBeforeDone = (started: string, done: string): void => {
      const a = seen.indexOf(`start ${started}`);
      const b = seen.indexOf(`done ${done}`);
      assert.ok(a >= 0 && b >= 0, `both seen: ${seen.join(', ')}`);
      assert.ok(a < b, `${started} waited for ${done}: ${seen.join(', ')}`);
    };
    try {
      const teamId = `together_${Date.now()}`;
      const now = new Date();
      await stores.pushSubscriptions.upsert({ userId: 'ann', teamId }, push.endpoint(`ann_${teamId}`), now);
      const deps: PushActivityDeps = {
        ...stores,
        interactions: watched('interactions', stores.interactions),
        pushSubscriptions: watched('pushSubscriptions', stores.pushSubscriptions),
        actionTokens: watched('actionTokens', stores.actionTokens),
        pushReceipts: watched('pushReceipts', stores.pushReceipts),
        sender,
        studioUrl: STUDIO,
        actionTokenTtlSeconds: config.actionTokenTtlSeconds,
        fanOutWidth: 4,
        now: () => new Date(),
        log: () => undefined,
        digests: {
          pushHolds: watched('pushHolds', stores.pushHolds),
          rateLimits: stores.rateLimits,
          burst: { limit: 100, windowSeconds: 60 },
          add: async () => undefined,
        },
      };
      const activities = createPushActivities(deps);
      const runId = `run_together_${Date.now()}`;
      const base = {
        version: 1,
        runId,
        teamId,
        ownerId: 'ann',
        title: 'Deploy',
        callbackRequested: false,
      } as const;
      // An end: the person's earlier holds are read beside their devices, not after them.
      const ended: RunOutcome = {
        ...base,
        episodeId: `${runId}:end`,
        kind: 'run_finished',
        status: 'finished',
        occurredAt: now.toISOString(),
      };
      assert.equal(delivered(await activities.deliverPush(ended)), 1);
      startedBeforeDone('pushHolds.heldOf', 'pushSubscriptions.listForUsers');
      // A question: the device's receipt token is stored beside its action tokens, not after them.
      seen.length = 0;
      const interactionId = `int_${Date.now()}`;
      await stores.interactions.insert({
        _id: interactionId,
        runId,
        teamId,
        prompt: 'Ship it?',
        choices: [{ id: 'yes', label: 'Yes' }],
        status: 'pending',
        createdAt: now,
      });
      const asked: RunOutcome = {
        ...base,
        episodeId: `${runId}:input:${interactionId}`,
        kind: 'run_paused',
        status: 'paused',
        pause: { reason: 'human_input', seq: 1, interactionId },
        occurredAt: now.toISOString(),
      };
      const paused: Run = {
        _id: runId,
        teamId,
        ownerId: 'ann',
        title: 'Deploy',
        status: 'paused',
        pause: { reason: 'human_input', seq: 1, interactionId, at: now },
        pauseCount: 1,
        watchedIssueIds: [],
        createdAt: now,
        updatedAt: now,
      };
      // The run waits on it (a question's push asks, beside its other reads).
      await mongo.db.collection<Run>('runs').insertOne(paused);
      assert.equal(delivered(await activities.deliverPush(asked)), 1);
      startedBeforeDone('pushReceipts.insertMany', 'actionTokens.insertMany');
      // A rung: both as above, and the question its send just read is not read again.
      seen.length = 0;
      const interaction = (await stores.interactions.get(runId, interactionId))!;
      const rung = await pushFollowUp(deps, { run: paused, interaction, outcome: asked }, ['ann'], 'rung:0');
      assert.equal(rung.result, 'delivered');
      startedBeforeDone('pushHolds.heldOf', 'pushSubscriptions.listForUsers');
      startedBeforeDone('pushReceipts.insertMany', 'actionTokens.insertMany');
      assert.deepEqual(
        seen.filter((step) => step.startsWith('start interactions.')),
        [],
        'the question read again',
      );
    } finally {
      sender.close();
      await mongo.client.close();
      await push.close();
    }
  });

  /**
   * The push activities on a loopback push service and stores of their own, the digests' burst bound and signal
   * as given, the clock `now`; all of it closed after `test`.
   */
  async function withPushActivities(
    digests: Pick<DigestDeps, 'burst' | 'add'>,
    now: () => Date,
    test: (on: {
      push: PushService;
      stores: Stores;
      deliverPush: ReturnType<typeof createPushActivities>['deliverPush'];
    }) => Promise<void>,
    /** Stores the activities are given in place of the real ones (a write that fails). */
    replaced: (stores: Stores) => Partial<Stores> = () => ({}),
  ): Promise<void> {
    const push = await startPushService();
    const config = testConfig({ PUSH_ALLOW_PRIVATE: '1', ...vapidVars() });
    const { mongo, stores } = await openStores(config);
    const sender = pushSenderFor(config, { ca: push.ca })!;
    try {
      const { deliverPush } = createPushActivities({
        ...stores,
        ...replaced(stores),
        sender,
        studioUrl: STUDIO,
        actionTokenTtlSeconds: config.actionTokenTtlSeconds,
        fanOutWidth: 4,
        now,
        log: () => undefined,
        digests: { pushHolds: stores.pushHolds, rateLimits: stores.rateLimits, ...digests },
      });
      await test({ push, stores, deliverPush });
    } finally {
      sender.close();
      await mongo.client.close();
      await push.close();
    }
  }

  /** A finished run's outcome, owned by ann. */
  const finished = (teamId: string, runId: string, at: Date): RunOutcome => ({
    version: 1,
    runId,
    teamId,
    ownerId: 'ann',
    title: 'Deploy',
    callbackRequested: false,
    episodeId: `${runId}:end`,
    kind: 'run_finished',
    status: 'finished',
    occurredAt: at.toISOString(),
  });

  it('a person reached on one device is not counted against their burst bound again when the episode tries their other device past the window', async function () {
    this.timeout(30_000);
    let now = new Date();
    const burst = { limit: 1, windowSeconds: 60 };
    await withPushActivities(
      { burst, add: async () => undefined },
      () => now,
      async ({ push, stores, deliverPush }) => {
        const teamId = `burst_retry_${Date.now()}`;
        const [laptop, phone] = [push.endpoint(`laptop_${teamId}`), push.endpoint(`phone_${teamId}`)];
        for (const device of [laptop, phone])
          await stores.pushSubscriptions.upsert({ userId: 'ann', teamId }, device, now);
        // The phone's push service fails through the fan-out's attempts: the episode tries it again later.
        push.failAlways(phone, 503);
        const first = await deliverPush(finished(teamId, 'run_first', now));
        assert.ok(first.addressable && first.delivered === 1 && first.retryable === 1, JSON.stringify(first));
        push.recover(phone);
        // Past the window, another run's push takes ann's one slot; then the first episode tries her phone again.
        now = new Date(now.getTime() + 61_000);
        const second = await deliverPush(finished(teamId, 'run_second', now));
        assert.ok(second.addressable && second.delivered === 2, JSON.stringify(second));
        const retried = await deliverPush(finished(teamId, 'run_first', now));
        assert.ok(retried.addressable, JSON.stringify(retried));
        assert.deepEqual([retried.delivered, retried.alreadyDelivered], [1, 1], JSON.stringify(retried));
      },
    );
  });

  it('one held person whose digest cannot be told does not stop the fan-out: the others are pushed, and the hold stays owed for the sweep', async function () {
    this.timeout(30_000);
    // Ben's digest's signal fails (Temporal refuses it).
    const add: DigestDeps['add'] = async (_team, userId) => {
      if (userId === 'ben') throw new Error('signal refused');
    };
    const burst = { limit: 100, windowSeconds: 60 };
    await withPushActivities(
      { burst, add },
      () => new Date(),
      async ({ push, stores, deliverPush }) => {
        const teamId = `digest_down_${Date.now()}`;
        const now = new Date();
        const [annPhone, benPhone] = [push.endpoint(`ann_${teamId}`), push.endpoint(`ben_${teamId}`)];
        await stores.pushSubscriptions.upsert({ userId: 'ann', teamId }, annPhone, now);
        await stores.pushSubscriptions.upsert({ userId: 'ben', teamId }, benPhone, now);
        // Ben (team-wide) is in do-not-disturb: his push is held.
        const dnd = new Date(now.getTime() + 3600_000);
        await stores.notificationPrefs.set('ben', teamId, { scope: 'team', doNotDisturbUntil: dnd }, now);
        const runId = `run_digest_down_${Date.now()}`;
        const result = await deliverPush(finished(teamId, runId, now));
        assert.ok(result.addressable && result.delivered === 1 && result.held === 1, JSON.stringify(result));
        assert.equal(push.received(annPhone).length, 1);
        const [hold] = await stores.pushHolds.listForRun(runId);
        assert.equal(hold?.userId, 'ben');
        assert.ok(hold.owedAt, 'owed: the sweep offers it to his digest again');
      },
    );
  });

  it("a dead device whose prune cannot be written fails nothing: the others' sends stand, the attempt succeeds", async function () {
    this.timeout(30_000);
    const burst = { limit: 100, windowSeconds: 60 };
    let pruneFailures = 0;
    await withPushActivities(
      { burst, add: async () => undefined },
      () => new Date(),
      async ({ push, stores, deliverPush }) => {
        const teamId = `prune_fails_${Date.now()}`;
        const now = new Date();
        const devices = ['laptop', 'phone', 'tablet'].map((d) => push.endpoint(`${d}_${teamId}`));
        for (const device of devices)
          await stores.pushSubscriptions.upsert({ userId: 'ann', teamId }, device, now);
        push.failAlways(devices[1], 410);
        const result = await deliverPush(finished(teamId, `run_prune_fails_${Date.now()}`, now));
        assert.equal(pruneFailures, 1, 'the prune was tried');
        assert.ok(
          result.addressable && result.delivered === 2 && result.retryable === 0,
          JSON.stringify(result),
        );
        // Still there: the next episode finds it gone again and prunes it then.
        assert.equal(
          (await stores.pushSubscriptions.listForUser('ann', 10)).rows.filter((r) => r.teamId === teamId)
            .length,
          3,
        );
      },
      (stores) => ({
        pushSubscriptions: {
          ...stores.pushSubscriptions,
          prune: async () => {
            pruneFailures++;
            throw new Error('the store is restarting');
          },
        },
      }),
    );
  });

  it('a fan-out resumed after a crash mid-lane sends nobody recorded twice, records everyone and each device’s last success', async function () {
    this.timeout(60_000);
    const push = await startPushService();
    const { mongo, stores } = await openStores(testConfig());
    const config = testConfig({ PUSH_ALLOW_PRIVATE: '1', ...vapidVars() });
    const sender = pushSenderFor(config, { ca: push.ca })!;
    try {
      const teamId = `crash_${Date.now()}`;
      const users = ['ann', 'ben', 'cid'].map((u) => `${u}_${teamId}`);
      const now = new Date();
      const ids: string[] = [];
      /** the push service's endpoint id → our subscription id */
      const idOfEndpoint = new Map<string, string>();
      for (const user of users) {
        if (user !== users[0]) await stores.notificationPrefs.setScope(user, teamId, 'team', now);
        for (let i = 0; i < 20; i++) {
          const sub = push.endpoint(`${user}${i}`);
          ids.push(subscriptionId(sub.endpoint));
          idOfEndpoint.set(push.idOf(sub), subscriptionId(sub.endpoint));
          await stores.pushSubscriptions.upsert({ userId: user, teamId }, sub, now);
        }
      }
      const runId = `run_crash_${Date.now()}`;
      const outcome: RunOutcome = {
        version: 1,
        episodeId: `${runId}:end`,
        kind: 'run_finished',
        runId,
        teamId,
        ownerId: users[0],
        title: 'Fleet rollout',
        status: 'finished',
        finalAnswer: 'done',
        callbackRequested: false,
        occurredAt: now.toISOString(),
      };
      const WIDTH = 4;
      const activities = (crash?: { after: number }) => {
        let accepted = 0;
        let crashed = false;
        const never = () => new Promise<never>(() => undefined);
        // The process dies: from then on nothing it starts reaches the push service or the store.
        const dies = <T extends object>(target: T): T =>
          new Proxy(target, {
            get(obj, key) {
              const value = Reflect.get(obj, key) as unknown;
              if (typeof value !== 'function' || !crash) return value;
              return (...args: unknown[]) => {
                if (crashed) return never();
                const got = (value as (...a: unknown[]) => unknown).apply(obj, args);
                if (typeof got !== 'function') return got;
                return (...inner: unknown[]) =>
                  crashed ? never() : (got as (...a: unknown[]) => unknown)(...inner);
              };
            },
          });
        const crashing: PushSender = {
          ...sender,
          send: async (...args) => {
            if (crashed) return never();
            const outcome = await sender.send(...args);
            if (crash && outcome.result === 'delivered' && ++accepted >= crash.after) crashed = true;
            return outcome;
          },
        };
        return createPushActivities({
          ...stores,
          pushDeliveries: dies(stores.pushDeliveries),
          pushSubscriptions: dies(stores.pushSubscriptions),
          sender: crashing,
          studioUrl: STUDIO,
          actionTokenTtlSeconds: config.actionTokenTtlSeconds,
          fanOutWidth: WIDTH,
          now: () => new Date(),
          log: () => undefined,
        });
      };

      void activities({ after: 25 }).deliverPush(outcome);
      // The sends in flight at the crash land; then nothing moves.
      let seen = -1;
      while (push.received().length !== seen || seen < 25) {
        seen = push.received().length;
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
      const recorded = await stores.pushDeliveries.deliveredSubscriptions(outcome.episodeId, ids);
      assert.ok(seen < ids.length, `the crash came after the fan-out ended (${seen})`);

      const resumed = await activities().deliverPush(outcome);
      assert.ok(resumed.addressable);
      assert.equal(resumed.alreadyDelivered, recorded.size);
      assert.equal(resumed.delivered, ids.length - recorded.size);
      const copies = new Map(ids.map((id) => [id, 0]));
      for (const received of push.received()) {
        const id = idOfEndpoint.get(received.endpointId)!;
        copies.set(id, copies.get(id)! + 1);
      }
      assert.deepEqual(
        [...copies].filter(([, n]) => n === 0),
        [],
        'subscriptions without the push',
      );
      const repeated = [...copies].filter(([, n]) => n > 1).map(([id]) => id);
      for (const id of repeated)
        assert.ok(!recorded.has(id), `${id} was recorded as reached, yet sent again`);
      assert.ok(repeated.length <= 2 * WIDTH, `${repeated.length} sent twice`);
      assert.equal(await stores.pushDeliveries.countForEpisode(outcome.episodeId), ids.length);
      const rows = await stores.pushSubscriptions.listForUsers(users);
      const withLast = rows.filter((row) => row.lastSuccessAt instanceof Date).length;
      assert.equal(withLast, ids.length, 'subscription rows carrying their last success');
      const last = await stores.pushDeliveries.lastSuccess(rows, new Date());
      assert.equal(last.size, ids.length);
    } finally {
      sender.close();
      await mongo.client.close();
      await push.close();
    }
  });
});
