// Every push exchange has a whole deadline and a size cap: a push service that trickles its answer or streams an
// endless body must not keep a send, a fan-out or the test route pending, and a wedged lane is noticed by Temporal.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import type { Client } from '@temporalio/client';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { createRunsService } from '../runs/service';
import { createPushSender, pushSenderFor, type PushSender } from '../delivery/push/sender';
import type { Mongo } from '../store/mongo';
import type { Stores } from '../store';
import type { PushDeliveryResult } from '../contract/activities';
import type { EpisodeResult } from '../contract/workflows';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../activities';
import { PUSH_SEND_MARGIN_MS } from '../activities/push/recordedSends';
import { buildRunOutcome } from '../domain/outcome';
import { openStores, startTestApi, startTestWorker, temporalClient } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { testConfig } from './support/stack';
import { waitUntil } from './support/waitUntil';

const vapid = webpush.generateVAPIDKeys();
const vapidEnv = { VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey };
const payload = {
  v: 1 as const,
  kind: 'test' as const,
  title: 't',
  body: 'b',
  url: 'https://studio.example/',
  tag: 'e',
  runId: 'r',
  episodeId: 'e',
};
const options = { ttlSeconds: 60, urgency: 'normal' as const };

describe('push exchange deadlines and caps', function () {
  this.timeout(60_000);
  let push: PushService;
  before(async () => {
    push = await startPushService();
  });
  after(() => push?.close());
  beforeEach(() => push.reset());

  const sender = (extra: { timeoutMs?: number; maxAttempts?: number } = {}) =>
    createPushSender({
      vapid: { ...vapid, subject: 'mailto:ops@example.com' },
      allowPrivate: true,
      allowlist: [],
      ca: push.ca,
      sleep: async () => undefined,
      ...extra,
    });

  it('a service trickling one byte every 300 ms fails each attempt at the deadline and is hung up on', async () => {
    const s = sender({ timeoutMs: 1000, maxAttempts: 2 });
    try {
      const sub = push.endpoint('trickle');
      push.misbehave(sub, { trickleEveryMs: 300 });
      const outcome = await s.send(sub, payload, options);
      assert.equal(outcome.result, 'failed');
      assert.equal(outcome.attempts, 2);
      assert.match(outcome.detail ?? '', /within 1000 ms/);
      const answers = push.misbehaved(sub);
      assert.equal(answers.length, 2);
      // The server closes on its side when the client socket goes: give it a moment to notice.
      await new Promise((r) => setTimeout(r, 200));
      assert.ok(
        answers.every((a) => a.closedByClient),
        'each trickled answer was cut off by the sender',
      );
    } finally {
      s.close();
    }
  });

  it('an endless 201 body is read only up to its cap: delivered, and the connection dropped', async () => {
    const s = sender();
    try {
      const sub = push.endpoint('endless');
      push.misbehave(sub, { endlessBody: true });
      const outcome = await s.send(sub, payload, options);
      assert.equal(outcome.result, 'delivered');
      await new Promise((r) => setTimeout(r, 200));
      const [answer] = push.misbehaved(sub);
      assert.ok(answer.closedByClient, 'the sender hung up instead of reading on');
    } finally {
      s.close();
    }
  });

  describe('end to end', () => {
    let mongo: Mongo;
    let stores: Stores;
    let client: Client;
    let closeClient: () => Promise<void>;
    let config: Config;
    before(async () => {
      config = testConfig({ ...vapidEnv, PUSH_ALLOW_PRIVATE: '1', SWEEP_INTERVAL_SECONDS: '3600' });
      ({ mongo, stores } = await openStores(config));
      ({ client, close: closeClient } = await temporalClient(config));
    });
    after(async () => {
      await closeClient?.();
      await mongo?.client.close();
    });

    it('a lane wedged for ever is noticed within the heartbeat timeout, and the retry delivers', async () => {
      const real = pushSenderFor(config, { ca: push.ca })!;
      const wedged = push.endpoint('wedged');
      const fine = push.endpoint('fine');
      let wedgedOnce = false;
      let release: () => void = () => undefined;
      // The first send to `wedged` does not settle until the test ends (a bug, a stuck socket): only the heartbeat
      // can tell. It is released before the worker stops, which waits for every activity it started.
      const sink: PushSender = {
        ...real,
        send: (target, ...rest) => {
          if (target.endpoint === wedged.endpoint && !wedgedOnce) {
            wedgedOnce = true;
            return new Promise((resolve) => {
              release = () => resolve({ result: 'failed', detail: 'released by the test', attempts: 1 });
            });
          }
          return real.send(target, ...rest);
        },
      };
      const worker = await startTestWorker(config, stores, { pushSender: sink });
      try {
        await stores.pushSubscriptions.upsert({ userId: 'hal', teamId: 'acme' }, wedged, new Date());
        await stores.pushSubscriptions.upsert({ userId: 'hal', teamId: 'acme' }, fine, new Date());
        const engine = createRunsService({
          ...stores,
          emitter: createOutcomeEmitter({
            client,
            taskQueue: config.temporalTaskQueue,
            runs: stores.runs,
            options: episodeOptions(config),
          }),
        });
        const run = await engine.create({ userId: 'hal', teamId: 'acme' }, { title: 'wedge' });
        await engine.cancel({ userId: 'hal', teamId: 'acme' }, run._id);
        const result = (await client.workflow.getHandle(`${run._id}:end`).result()) as EpisodeResult;
        assert.equal(result.push, 'delivered');
        assert.equal(push.received(wedged).length, 1, 'the retry reached the wedged endpoint');
        assert.equal(push.received(fine).length, 1, 'and did not send the other one again');
      } finally {
        release();
        await worker.stop();
      }
    });

    it('a fan-out starts no send once what is left of its start-to-close could not see one through: the retry sends each device once', async () => {
      const real = pushSenderFor(config, { ca: push.ca })!;
      let started = 0;
      const counting: PushSender = { ...real, send: (...args) => (started++, real.send(...args)) };
      const activities = createActivities({
        config,
        stores,
        client,
        pushSender: counting,
        log: () => undefined,
      });
      const devices = ['a', 'b', 'c'].map((name) => push.endpoint(`late-${name}`));
      for (const device of devices)
        await stores.pushSubscriptions.upsert({ userId: 'ike', teamId: 'acme' }, device, new Date());
      const run = await createRunsService({
        ...stores,
        emitter: { emitRunOutcome: async () => undefined },
      }).create({ userId: 'ike', teamId: 'acme' }, { title: 'late' });
      const outcome = buildRunOutcome({ ...run, status: 'cancelled', endedAt: new Date() })!;
      const attempt = (n: number, startToCloseTimeoutMs: number) =>
        new MockActivityEnvironment({
          attempt: n,
          activityId: '1',
          workflowExecution: { workflowId: outcome.episodeId, runId: 'late-fan-out' },
          startToCloseTimeoutMs,
          heartbeatTimeoutMs: 60_000,
        }).run(() => activities.deliverPush(outcome));
      // Started with less left than one send may take: Temporal starts it again before a send could end.
      await assert.rejects(attempt(1, PUSH_SEND_MARGIN_MS - 1));
      assert.equal(started, 0, 'no send started');
      const result = (await attempt(2, 600_000)) as PushDeliveryResult;
      assert.ok(result.addressable && result.delivered === 3, JSON.stringify(result));
      for (const device of devices) assert.equal(push.received(device).length, 1);
    });

    it('POST /notifications/push/test answers within its deadline while a service trickles', async () => {
      const { api, client: anonymous } = await startTestApi(config, {
        pushSender: pushSenderFor(config, { ca: push.ca }),
      });
      try {
        const sub = push.endpoint('route-trickle');
        push.misbehave(sub, { trickleEveryMs: 1000 });
        const ivy = anonymous.as('ivy', 'acme');
        assert.equal((await ivy.post('/api/v1/notifications/push/subscriptions', sub)).status, 201);
        const res = await ivy.post('/api/v1/notifications/push/test');
        assert.equal(res.status, 202, res.text);
        assert.deepEqual(res.body, { sent: 0, timedOut: true });
      } finally {
        await (api as ApiHandle).close();
      }
    });
  });
});

describe('push keep-alive agents', function () {
  this.timeout(30_000);
  let push: PushService;
  before(async () => {
    push = await startPushService();
  });
  after(() => push?.close());

  it('an idle keep-alive socket is closed after the idle time', async () => {
    const s = createPushSender({
      vapid: { ...vapid, subject: 'mailto:ops@example.com' },
      allowPrivate: true,
      allowlist: [],
      ca: push.ca,
      idleSocketMs: 500,
    });
    try {
      const sub = push.endpoint('idle');
      assert.equal((await s.send(sub, payload, options)).result, 'delivered');
      assert.equal(push.openConnections, 1, 'kept alive for the next send');
      await waitUntil('the idle socket to be closed', () => push.openConnections === 0, {
        timeoutMs: 5_000,
        intervalMs: 50,
      });
    } finally {
      s.close();
    }
  });

  it('the agent cache is bounded: the least recently used pool is evicted and its idle sockets closed', async () => {
    const s = createPushSender({
      vapid: { ...vapid, subject: 'mailto:ops@example.com' },
      allowPrivate: true,
      allowlist: [],
      ca: push.ca,
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
      maxAgents: 1,
    });
    try {
      const a = push.endpoint('lru-a');
      const b = push.endpoint('lru-b');
      const viaName = { ...b, endpoint: b.endpoint.replace('127.0.0.1', 'localhost') };
      assert.equal((await s.send(a, payload, options)).result, 'delivered');
      assert.equal(push.openConnections, 1);
      // Another origin (the same service by name): a second pool, which pushes the first one out.
      assert.equal((await s.send(viaName, payload, options)).result, 'delivered');
      await waitUntil("the evicted pool's socket to be closed", () => push.openConnections === 1, {
        timeoutMs: 5_000,
        intervalMs: 50,
      });
    } finally {
      s.close();
    }
  });
});
