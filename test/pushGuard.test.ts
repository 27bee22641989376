// Push endpoints are user-supplied URLs the worker POSTs to: refused at subscribe when malformed, and held to the
// callbacks' outbound guard at send (resolve once, classify, pin), a refused endpoint being pruned as a dead sink.
import assert from 'node:assert/strict';
import { episodeOptions } from '../client/emitter';
import Koa from 'koa';
import webpush from 'web-push';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import type { HostLookup } from '../delivery/ssrfGuard';
import { pushSenderFor } from '../delivery/push/sender';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import { errorMiddleware } from '../platform/http/httpErrors';
import { notificationsRouter } from '../api/routes/notifications';
import { ApiClient, openStores, startTestApi, startTestWorker, temporalClient } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { testConfig } from './support/stack';

const vapid = webpush.generateVAPIDKeys();
const vapidEnv = { VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey };

/** Names a test may point endpoints at; anything else fails to resolve (no outside DNS here). */
const names: Record<string, string> = {
  'metadata.flow.test': '169.254.169.254',
  'loopback.flow.test': '127.0.0.1',
  // The loopback certificate names localhost, so this one can complete TLS through the pin.
  localhost: '127.0.0.1',
};
const lookup: HostLookup = async (hostname) => {
  const address = names[hostname] ?? (hostname === '127.0.0.1' ? '127.0.0.1' : undefined);
  if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return [{ address, family: 4 }];
};

describe('push endpoint guard', () => {
  let push: PushService;
  before(async () => {
    push = await startPushService();
  });
  after(() => push?.close());

  describe('at subscribe', () => {
    let api: ApiHandle;
    let user: ApiClient;
    let config: Config;
    let mongo: Mongo;
    before(async () => {
      config = testConfig({
        ...vapidEnv,
        PUSH_ENDPOINT_ALLOWLIST: 'push.services.mozilla.com,fcm.googleapis.com',
      });
      ({ mongo } = await openStores(config));
      const started = await startTestApi(config);
      api = started.api;
      user = started.client.as('alice', 'acme');
    });
    after(async () => {
      await api?.close();
      await mongo?.client.close();
    });

    const good = (s: ReturnType<PushService['endpoint']>) => ({
      ...s,
      endpoint: 'https://updates.push.services.mozilla.com/wpush/v2/abc',
    });

    it('accepts an https endpoint of an allowed push service', async () => {
      const res = await user.post('/api/v1/notifications/push/subscriptions', good(push.endpoint()));
      assert.equal(res.status, 201, res.text);
    });

    const refusals: [string, (s: ReturnType<PushService['endpoint']>) => unknown, RegExp][] = [
      [
        'an http endpoint',
        (s) => ({ ...good(s), endpoint: 'http://updates.push.services.mozilla.com/x' }),
        /must be https/,
      ],
      [
        'userinfo in the endpoint',
        (s) => ({ ...good(s), endpoint: 'https://u:p@updates.push.services.mozilla.com/x' }),
        /must not carry credentials/,
      ],
      [
        'an endpoint over 2,048 characters',
        (s) => ({ ...good(s), endpoint: `https://fcm.googleapis.com/${'a'.repeat(2048)}` }),
        /longer than 2048/,
      ],
      [
        'a host outside the allowlist',
        (s) => ({ ...good(s), endpoint: 'https://169.254.169.254/latest' }),
        /169\.254\.169\.254 is not an allowed push service/,
      ],
      [
        'a look-alike host',
        (s) => ({ ...good(s), endpoint: 'https://evil-fcm.googleapis.com.attacker.test/x' }),
        /is not an allowed push service/,
      ],
      ['a relative endpoint', (s) => ({ ...good(s), endpoint: '/push/1' }), /must be an absolute URL/],
      [
        'a p256dh that is not 65 bytes',
        (s) => ({ ...good(s), keys: { ...s.keys, p256dh: Buffer.alloc(33, 2).toString('base64url') } }),
        /keys\.p256dh must be/,
      ],
      [
        'a p256dh that is not on the curve',
        (s) => ({
          ...good(s),
          keys: {
            ...s.keys,
            p256dh: Buffer.concat([Buffer.from([4]), Buffer.alloc(64, 1)]).toString('base64url'),
          },
        }),
        /keys\.p256dh must be/,
      ],
      [
        'an auth secret that is not 16 bytes',
        (s) => ({ ...good(s), keys: { ...s.keys, auth: Buffer.alloc(8).toString('base64url') } }),
        /keys\.auth must be/,
      ],
    ];
    for (const [what, make, message] of refusals) {
      it(`refuses ${what} with a 400 naming the rule, and stores nothing`, async () => {
        const before = await mongo.db.collection('push_subscriptions').countDocuments();
        const res = await user.post('/api/v1/notifications/push/subscriptions', make(push.endpoint()));
        assert.equal(res.status, 400, res.text);
        assert.match(res.body.error, message);
        assert.equal(await mongo.db.collection('push_subscriptions').countDocuments(), before);
      });
    }
  });

  describe('at send', () => {
    async function fanOutWith(allowPrivate: '0' | '1') {
      const config = testConfig({
        ...vapidEnv,
        PUSH_ALLOW_PRIVATE: allowPrivate,
        SWEEP_INTERVAL_SECONDS: '3600',
      });
      const { mongo, stores } = await openStores(config);
      const worker = await startTestWorker(config, stores, {
        pushSender: pushSenderFor(config, { ca: push.ca, lookup }),
      });
      const { client, close } = await temporalClient(config);
      return { config, mongo, stores, worker, client, close };
    }

    /** Stores a subscription whose endpoint URL may name another host, with the keys of a real registration. */
    async function subscribe(
      stores: Stores,
      userId: string,
      endpoint: string,
      keys = push.endpoint(userId).keys,
    ) {
      await stores.pushSubscriptions.upsert({ userId, teamId: 'acme' }, { endpoint, keys }, new Date());
    }

    it('strict: endpoints naming loopback or metadata addresses are refused and reach nothing; names are counted, literals pruned', async () => {
      const { mongo, stores, worker, client, close, config } = await fanOutWith('0');
      try {
        const port = new URL(push.origin).port;
        const real = push.endpoint('direct');
        await subscribe(stores, 'alice', `https://metadata.flow.test:${port}/push/${push.idOf(real)}`);
        await subscribe(stores, 'alice', `https://loopback.flow.test:${port}/push/${push.idOf(real)}`);
        await subscribe(stores, 'alice', real.endpoint, real.keys); // 127.0.0.1 itself: not public either
        const { createRunsService } = await import('../runs/service');
        const { createOutcomeEmitter } = await import('../client/emitter');
        const engine = createRunsService({
          ...stores,
          emitter: createOutcomeEmitter({
            client,
            taskQueue: config.temporalTaskQueue,
            runs: stores.runs,
            options: episodeOptions(config),
          }),
        });
        const run = await engine.create({ userId: 'alice', teamId: 'acme' }, { title: 'guarded' });
        await engine.cancel({ userId: 'alice', teamId: 'acme' }, run._id);
        const result = await client.workflow.getHandle(`${run._id}:end`).result();
        assert.equal(result.push, 'released', 'every sink refused');
        assert.equal(push.attempts().length, 0, 'the push service was never contacted');
        // A name's answer can be a sinkhole or a split-horizon mistake: counted like a lookup failure, pruned
        // only when it lasts (pushPrune.test.ts). An address in the URL itself never changes: pruned at once.
        const left = await stores.pushSubscriptions.listForUsers(['alice']);
        assert.deepEqual(left.map((s) => new URL(s.endpoint).hostname).sort(), [
          'loopback.flow.test',
          'metadata.flow.test',
        ]);
        for (const row of left) assert.equal(row.unresolved?.count, 1, row.endpoint);
      } finally {
        await close();
        await worker.stop();
        await mongo.client.close();
      }
    });

    it('PUSH_ALLOW_PRIVATE=1: the loopback push service works, metadata is still refused (counted), the rest still delivers', async () => {
      const { mongo, stores, worker, client, close, config } = await fanOutWith('1');
      try {
        push.reset();
        const port = new URL(push.origin).port;
        const good = push.endpoint('good');
        const viaName = push.endpoint('via-name');
        await subscribe(stores, 'bob', good.endpoint, good.keys);
        await subscribe(stores, 'bob', `https://localhost:${port}/push/${push.idOf(viaName)}`, viaName.keys);
        await subscribe(stores, 'bob', `https://metadata.flow.test:${port}/push/${push.idOf(good)}`);
        const { createRunsService } = await import('../runs/service');
        const { createOutcomeEmitter } = await import('../client/emitter');
        const engine = createRunsService({
          ...stores,
          emitter: createOutcomeEmitter({
            client,
            taskQueue: config.temporalTaskQueue,
            runs: stores.runs,
            options: episodeOptions(config),
          }),
        });
        const run = await engine.create({ userId: 'bob', teamId: 'acme' }, { title: 'mixed' });
        await engine.cancel({ userId: 'bob', teamId: 'acme' }, run._id);
        const result = await client.workflow.getHandle(`${run._id}:end`).result();
        assert.equal(result.push, 'delivered');
        assert.equal(push.received(good).length, 1);
        assert.equal(push.received(viaName).length, 1, 'pinned to the validated address, Host kept');
        const rows = await stores.pushSubscriptions.listForUsers(['bob']);
        const left = rows.map((s) => new URL(s.endpoint).hostname);
        assert.deepEqual(left.sort(), ['127.0.0.1', 'localhost', 'metadata.flow.test']);
        const metadata = rows.find((s) => s.endpoint.includes('metadata.flow.test'));
        assert.equal(
          metadata?.unresolved?.count,
          1,
          'a name answering metadata is counted, not pruned at once',
        );
      } finally {
        await close();
        await worker.stop();
        await mongo.client.close();
      }
    });
  });
});

describe('notification routes without their stores', () => {
  it('answer 404 "web push is not configured" and "notification prefs are not available"', async () => {
    const app = new Koa<{ caller: { userId: string; teamId: string } }>();
    app.use(errorMiddleware(() => undefined));
    app.use(async (ctx, next) => {
      ctx.state.caller = { userId: 'alice', teamId: 'acme' };
      await next();
    });
    const router = notificationsRouter({
      vapidPublicKey: vapid.publicKey,
      endpointRules: { allowInsecure: false, allowlist: [] },
      studioUrl: 'https://studio.flow.test',
      now: () => new Date(),
      log: () => undefined,
    });
    app.use(router.routes());
    const server = app.listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    try {
      const { port } = server.address() as { port: number };
      const api = new ApiClient(`http://127.0.0.1:${port}`);
      const sub = await api.post('/api/v1/notifications/push/subscriptions', {});
      assert.equal(sub.status, 404);
      assert.equal(sub.body.error, 'web push is not configured on this server');
      const test = await api.post('/api/v1/notifications/push/test');
      assert.equal(test.body.error, 'web push is not configured on this server');
      const prefs = await api.get('/api/v1/notifications/prefs');
      assert.equal(prefs.status, 404);
      assert.equal(prefs.body.error, 'notification prefs are not available on this server');
    } finally {
      server.close();
    }
  });
});
