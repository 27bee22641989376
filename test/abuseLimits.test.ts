// Abuse limits on what users register and trigger: subscriptions per user, no takeover of another user's
// endpoint, test pushes per user (held across API processes) and route decision errors per run and per team.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import type { Mongo } from '../store/mongo';
import type { Stores } from '../store';
import { createPushSubscriptionStore } from '../store/push/subscriptions';
import { claimKeys } from '../domain/outcome';
import { ApiClient, openStores, startTestApi, temporalClient } from './support/harness';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { startPushService, type PushService } from './support/pushService';
import { testConfig } from './support/stack';

/** The hits a rate-limit key holds in its window (its window row's count, store/rateLimits.ts). */
async function countedHits(mongo: Mongo, key: string): Promise<number> {
  const rows = mongo.db.collection<{ _id: string; total?: number }>('rate_limits');
  return (await rows.findOne({ _id: `window|${key}` }))?.total ?? 0;
}

describe('abuse limits', function () {
  this.timeout(60_000);
  let push: PushService;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let api: ApiHandle;
  let second: ApiHandle; // a second API process over the same database
  let anonymous: ApiClient;

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    config = testConfig({
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      PUSH_ALLOW_PRIVATE: '1',
      PUSH_MAX_SUBSCRIPTIONS_PER_USER: '3',
      PUSH_TEST_RATE_LIMIT: '2',
      PUSH_TEST_RATE_WINDOW_SECONDS: '60',
      ROUTE_ERROR_LIMIT_PER_RUN: '2',
      ROUTE_ERROR_LIMIT_PER_TEAM: '3',
      ROUTE_ERROR_WINDOW_SECONDS: '600',
    });
    ({ mongo, stores } = await openStores(config));
    ({ api, client: anonymous } = await startTestApi(config));
    ({ api: second } = await startTestApi(config));
  });
  after(async () => {
    await api?.close();
    await second?.close();
    await mongo?.client.close();
    await push?.close();
  });

  const subscribe = (client: ApiClient, sub: unknown) =>
    client.post('/api/v1/notifications/push/subscriptions', sub);

  it('a user holds at most PUSH_MAX_SUBSCRIPTIONS_PER_USER subscriptions: the next new one is 409', async () => {
    const alice = anonymous.as('alice', 'acme');
    const subs = [0, 1, 2].map((i) => push.endpoint(`alice-${i}`));
    for (const sub of subs) assert.equal((await subscribe(alice, sub)).status, 201);
    const fourth = await subscribe(alice, push.endpoint('alice-3'));
    assert.equal(fourth.status, 409, fourth.text);
    assert.equal(fourth.body.error, 'subscription limit reached (3 per user): remove a device first');
    assert.equal((await stores.pushSubscriptions.listForUsers(['alice'])).length, 3);
    // Re-registering one already held is an update, not a new one.
    assert.equal((await subscribe(alice, subs[1])).status, 200);
    // Another user has their own allowance.
    assert.equal((await subscribe(anonymous.as('bob', 'acme'), push.endpoint('bob-0'))).status, 201);
    // Removing a device frees a place.
    const removed = await alice.delete('/api/v1/notifications/push/subscriptions', {
      endpoint: subs[0].endpoint,
    });
    assert.equal(removed.status, 204);
    assert.equal((await subscribe(alice, push.endpoint('alice-4'))).status, 201);
  });

  it('the subscription cap holds under 200 concurrent registrations from two API processes', async () => {
    const racer = anonymous.as('racer', 'acme');
    const racerOnSecond = new ApiClient(second.url, racer.token);
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        subscribe(i % 2 ? racerOnSecond : racer, push.endpoint(`racer-${i}`)),
      ),
    );
    const statuses = answers.map((a) => a.status);
    assert.deepEqual([...new Set(statuses)].sort(), [201, 409], answers.find((a) => a.status >= 500)?.text);
    const kept = await stores.pushSubscriptions.listForUsers(['racer']);
    assert.ok(kept.length <= 3, `${kept.length} rows kept against a cap of 3`);
    assert.ok(kept.length >= 1, 'the burst locked the user out');
    assert.equal(statuses.filter((s) => s === 201).length, kept.length, 'every 201 kept its row');
    // Removing one frees its place for the next registration.
    const removed = await racer.delete('/api/v1/notifications/push/subscriptions', {
      endpoint: kept[0].endpoint,
    });
    assert.equal(removed.status, 204);
    assert.equal((await subscribe(racerOnSecond, push.endpoint('racer-after'))).status, 201);
  });

  it('a slot abandoned long ago is reclaimed when its user is full; a moved row frees its old slot', async () => {
    const store = stores.pushSubscriptions;
    const now = new Date();
    const abandon = (userId: string, at: Date) =>
      mongo.db.collection('push_subscription_slots').insertMany(
        [0, 1, 2].map((slot) => ({
          _id: `${userId}|${slot}|0` as never,
          key: userId,
          slot,
          n: 0,
          at,
          subscriptionId: 'never-written',
        })),
      );
    // Three slots taken by registrations that never wrote their rows (a crash in between).
    await abandon('ivy', new Date(now.getTime() - 3600_000));
    await abandon('jay', now);
    const ivy = { userId: 'ivy', teamId: 'acme' };
    assert.equal(await store.register(ivy, push.endpoint('ivy-0'), now, 3), 'created');
    assert.equal(
      await store.register({ userId: 'jay', teamId: 'acme' }, push.endpoint('jay-0'), now, 3),
      'limit_reached',
    );
    // A row moving to another user (the same browser) gives its slot back to its old owner.
    const subs = [push.endpoint('ivy-1'), push.endpoint('ivy-2')];
    for (const sub of subs) assert.equal(await store.register(ivy, sub, now, 3), 'created');
    assert.equal(await store.register(ivy, push.endpoint('ivy-3'), now, 3), 'limit_reached');
    assert.equal(await store.register({ userId: 'kim', teamId: 'acme' }, subs[0], now, 3), 'updated');
    assert.equal(await store.register(ivy, push.endpoint('ivy-4'), now, 3), 'created');
  });

  it("another user's endpoint is taken over only with the same keys.auth; otherwise 409", async () => {
    const carol = anonymous.as('carol', 'acme');
    const mallory = anonymous.as('mallory', 'evil');
    const victim = push.endpoint('carol');
    assert.equal((await subscribe(carol, victim)).status, 201);
    const other = push.endpoint('mallory');
    const hijack = await subscribe(mallory, { ...victim, keys: other.keys });
    assert.equal(hijack.status, 409, hijack.text);
    assert.equal(hijack.body.error, 'this endpoint is subscribed by another user');
    const [row] = await stores.pushSubscriptions.listForUsers(['carol']);
    assert.equal(row?.endpoint, victim.endpoint);
    assert.equal(row.keys.auth, victim.keys.auth);
    assert.deepEqual(await stores.pushSubscriptions.listForUsers(['mallory']), []);
    // The browser holding the subscription (same keys) signs in as someone else: the row follows it.
    const relogin = await subscribe(anonymous.as('carol2', 'acme'), victim);
    assert.equal(relogin.status, 200, relogin.text);
    assert.equal((await stores.pushSubscriptions.listForUsers(['carol2'])).length, 1);
  });

  /**
   * The store over a database whose next `op` on push_subscriptions goes through `around` (given the real call and
   * the row it names): another request landing between the store's read and its write, or an answer lost.
   */
  const storeWith = (
    op: 'updateOne' | 'deleteOne' | 'insertOne',
    around: (call: () => Promise<unknown>, id: string) => Promise<unknown>,
  ) => {
    let armed = true;
    const db = new Proxy(mongo.db, {
      get(target, prop, receiver) {
        if (prop !== 'collection') return Reflect.get(target, prop, receiver);
        return (name: string) => {
          const collection = target.collection<{ _id: string }>(name);
          if (name !== 'push_subscriptions') return collection;
          return new Proxy(collection, {
            get(coll, key, r) {
              if (key !== op) return Reflect.get(coll, key, r);
              return async (first: { _id: string }, ...rest: unknown[]) => {
                const call = () => (coll[op] as (...a: unknown[]) => Promise<unknown>)(first, ...rest);
                if (!armed) return call();
                armed = false;
                return around(call, first._id);
              };
            },
          });
        };
      },
    });
    return createPushSubscriptionStore(db);
  };
  /** The store whose next `op` first runs `meanwhile` with the row it names. */
  const storeRacedBy = (op: 'updateOne' | 'deleteOne', meanwhile: (id: string) => Promise<unknown>) =>
    storeWith(op, async (call, id) => {
      await meanwhile(id);
      return call();
    });
  const rawSub = (name: string) => ({
    endpoint: `https://push.example.com/raced-${name}`,
    keys: { p256dh: 'p256dh-raced', auth: `auth-${name}` },
  });
  const member = (userId: string) => ({ userId, teamId: 'acme' });

  it('a registration whose row a prune removed between its read and its write stores it: nobody holds it, so it is no 409', async () => {
    const racedByPrune = () =>
      storeRacedBy('updateOne', (id) =>
        mongo.db.collection<{ _id: string }>('push_subscriptions').deleteOne({ _id: id }),
      );
    // The user's own row, pruned as they register it again (another tab, a new key).
    await stores.pushSubscriptions.upsert(member('rae'), rawSub('own'), new Date());
    assert.equal(await racedByPrune().register(member('rae'), rawSub('own'), new Date(), 3), 'created');
    assert.equal((await stores.pushSubscriptions.listForUser('rae', 10)).rows.length, 1);
    // Another user's row with the same browser's keys, pruned as it moves here.
    await stores.pushSubscriptions.upsert(member('old'), rawSub('moved'), new Date());
    assert.equal(await racedByPrune().register(member('ray'), rawSub('moved'), new Date(), 3), 'created');
    assert.equal((await stores.pushSubscriptions.listForUser('ray', 10)).rows.length, 1);
  });

  it("a prune of a browser that moved to another user between the prune's read and its delete leaves the moved row", async () => {
    const browser = rawSub('pruned-as-it-moves');
    assert.equal(await stores.pushSubscriptions.register(member('uma'), browser, new Date(), 3), 'created');
    const [row] = (await stores.pushSubscriptions.listForUser('uma', 10)).rows;
    // The push service said gone to a push meant for uma; meanwhile the browser signs in as vic.
    const movedMeanwhile = storeRacedBy('deleteOne', () =>
      stores.pushSubscriptions.register(member('vic'), browser, new Date(), 3),
    );
    await movedMeanwhile.prune(row._id);
    const vics = (await stores.pushSubscriptions.listForUser('vic', 10)).rows;
    assert.deepEqual(
      vics.map((sub) => sub._id),
      [row._id],
      "vic's registration, made after the prune's read, is kept",
    );
    const slot = await mongo.db
      .collection<{ _id: string; released?: boolean }>('push_subscription_slots')
      .findOne({ _id: vics[0].slotId! });
    assert.equal(slot?.released, undefined, "and so is vic's slot");
  });

  it("a new row whose insert landed but whose answer was lost keeps its slot: the user's cap still holds", async () => {
    const answerLost = storeWith('insertOne', async (call) => {
      await call();
      throw new Error('connection reset after the write');
    });
    await assert.rejects(answerLost.register(member('una'), rawSub('insert-answer-lost'), new Date(), 3));
    const [row] = (await stores.pushSubscriptions.listForUser('una', 10)).rows;
    assert.ok(row?.slotId, 'the row landed, naming its slot');
    const slot = await mongo.db
      .collection<{ _id: string; released?: boolean }>('push_subscription_slots')
      .findOne({ _id: row.slotId });
    assert.equal(slot?.released, undefined, 'the slot the row names is still held');
  });

  it('test pushes are rate-limited per user, across API processes: 429 with Retry-After', async () => {
    const dave = anonymous.as('dave', 'acme');
    const daveOnSecond = new ApiClient(second.url, dave.token);
    assert.equal((await dave.post('/api/v1/notifications/push/test')).status, 202);
    assert.equal((await daveOnSecond.post('/api/v1/notifications/push/test')).status, 202);
    for (const client of [dave, daveOnSecond]) {
      const refused = await client.post('/api/v1/notifications/push/test');
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.body.error, 'too many test notifications; try again later');
      const retryAfter = Number(refused.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${refused.headers.get('retry-after')}`);
    }
    // Refusals are not counted: the window holds the two admitted hits only.
    assert.equal(await countedHits(mongo, 'push-test|dave'), 2);
    assert.equal((await anonymous.as('erin', 'acme').post('/api/v1/notifications/push/test')).status, 202);
  });

  it('a refusal names what was sent in a few words, whatever its size: unknown fields, long keys, many of them', async () => {
    const frank = anonymous.as('frank', 'acme');
    const long = 'k'.repeat(500_000);
    const many = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`field${i}`, 1]));
    for (const [path, body] of [
      ['/api/v1/runs', { [long]: 1 }],
      ['/api/v1/runs', { title: 'ok', ...many }],
      ['/api/v1/notifications/prefs', { scope: 'own', kinds: { [long]: true } }],
    ] as const) {
      const refused = await (path === '/api/v1/runs' ? frank.post(path, body) : frank.put(path, body));
      assert.equal(refused.status, 400, refused.text.slice(0, 200));
      assert.ok(refused.text.length < 1024, `${path}: ${refused.text.length} bytes`);
    }
    const named = await frank.post('/api/v1/runs', { title: 'ok', colour: 'red' });
    assert.equal(named.body.error, 'invalid request: Unrecognized key: "colour"');
  });

  it('route decision errors are bounded per run and per team (429), a repeated decision counts once', async () => {
    const frank = anonymous.as('frank', 'routers');
    const report = (runId: string, decisionId: string) =>
      frank.post(`/api/v1/runs/${runId}/route-decision-errors`, {
        decisionId,
        error: { code: 'router_timeout', message: 'no decision' },
      });
    const runA = (await frank.post('/api/v1/runs', { title: 'a' })).body.id as string;
    const runB = (await frank.post('/api/v1/runs', { title: 'b' })).body.id as string;
    assert.equal((await report(runA, 'd1')).status, 202);
    assert.equal((await report(runA, 'd2')).status, 202);
    const perRun = await report(runA, 'd3');
    assert.equal(perRun.status, 429, perRun.text);
    assert.equal(perRun.body.error, 'too many route decision errors for this run; try again later');
    assert.ok(Number(perRun.headers.get('retry-after')) >= 1);
    assert.equal((await report(runA, 'd1')).status, 202, 'a retried decision is not a new one');
    assert.equal((await report(runB, 'd1')).status, 202);
    const perTeam = await report(runB, 'd2');
    assert.equal(perTeam.status, 429, perTeam.text);
    assert.equal(perTeam.body.error, 'too many route decision errors for this team; try again later');
    // The team's refusal gave the run's slot back, and another team is unaffected.
    assert.equal(await countedHits(mongo, `rde-run|${runB}`), 1);
    const grace = anonymous.as('grace', 'other');
    const runC = (await grace.post('/api/v1/runs', { title: 'c' })).body.id as string;
    const other = await grace.post(`/api/v1/runs/${runC}/route-decision-errors`, {
      decisionId: 'd1',
      error: { code: 'router_timeout', message: 'no decision' },
    });
    assert.equal(other.status, 202, other.text);
  });
});

describe('outbound callback limits per user and per team', function () {
  this.timeout(60_000);
  let receiver: CallbackReceiver;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let api: ApiHandle;
  let anonymous: ApiClient;
  const redelivered: string[] = [];

  before(async () => {
    receiver = await CallbackReceiver.start();
    config = testConfig({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_TEST_RATE_LIMIT: '5',
      CALLBACK_TEST_RATE_LIMIT_PER_USER: '3',
      CALLBACK_TEST_RATE_LIMIT_PER_TEAM: '4',
      CALLBACK_REDELIVER_RATE_LIMIT: '5',
      CALLBACK_REDELIVER_RATE_LIMIT_PER_USER: '3',
      CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM: '4',
      RUN_CREATE_RATE_LIMIT: '6',
    });
    ({ mongo, stores } = await openStores(config));
    ({ api, client: anonymous } = await startTestApi(config));
  });
  after(async () => {
    // The redeliveries started here have no worker on this task queue: end them.
    const temporal = await temporalClient(config);
    for (const episodeId of redelivered) {
      await temporal.client.workflow
        .getHandle(`cb-redeliver|${episodeId}`)
        .terminate()
        .catch(() => undefined);
    }
    await temporal.close();
    await api?.close();
    await mongo?.client.close();
    await receiver?.close();
  });

  const launch = async (as: ApiClient): Promise<string> => {
    const res = await as.post('/api/v1/runs', { callback: { url: receiver.url } });
    assert.equal(res.status, 201, res.text);
    return res.body.id as string;
  };
  const retryAfter = (res: { headers: Headers }) => Number(res.headers.get('retry-after'));

  it('test pings: the (n+1)th across runs of one user, then of one team, is 429 with Retry-After', async () => {
    const [ann, ben] = [anonymous.as('ann', 'pingers'), anonymous.as('ben', 'pingers')];
    const runs = [
      await launch(ann),
      await launch(ann),
      await launch(ann),
      await launch(ann),
      await launch(ben),
    ];
    const ping = (as: ApiClient, runId: string) => as.post(`/api/v1/runs/${runId}/callback/test`);
    for (const runId of runs.slice(0, 3)) assert.equal((await ping(ann, runId)).status, 200);
    const perUser = await ping(ann, runs[3]);
    assert.equal(perUser.status, 429, perUser.text);
    assert.equal(perUser.body.error, 'too many test pings from this user; try again later');
    assert.ok(retryAfter(perUser) >= 1 && retryAfter(perUser) <= 60, String(retryAfter(perUser)));
    const sent = receiver.received.length;
    assert.equal((await ping(ben, runs[4])).status, 200);
    const perTeam = await ping(ben, runs[4]);
    assert.equal(perTeam.status, 429, perTeam.text);
    assert.equal(perTeam.body.error, 'too many test pings from this team; try again later');
    assert.ok(retryAfter(perTeam) >= 1 && retryAfter(perTeam) <= 60, String(retryAfter(perTeam)));
    assert.equal(receiver.received.length, sent + 1, 'a refused ping sends nothing');
    // A refusal by the user's or the team's bound gave the run's slot back.
    assert.equal(await countedHits(mongo, `callback-test|${runs[3]}`), 0);
    const other = anonymous.as('cat', 'elsewhere');
    assert.equal((await ping(other, await launch(other))).status, 200);
  });

  it("endpoint test events share the user's and the team's test-ping bounds: a new endpoint brings no new budget", async () => {
    const [dee, eve] = [adminOf(anonymous, 'dee', 'churners'), adminOf(anonymous, 'eve', 'churners')];
    const sent = receiver.received.length;
    /** A new endpoint to the receiver, tested once, then deleted (each endpoint has a bound of its own). */
    const churn = async (as: ApiClient) => {
      const created = await as.post('/api/v1/endpoints', { url: receiver.url, eventTypes: ['run.failed'] });
      assert.equal(created.status, 201, created.text);
      const tested = await as.post(`/api/v1/endpoints/${created.body.id}/test`);
      assert.equal((await as.request('DELETE', `/api/v1/endpoints/${created.body.id}`)).status, 204);
      return tested;
    };
    for (let i = 0; i < 3; i++) assert.equal((await churn(dee)).status, 200);
    const perUser = await churn(dee);
    assert.equal(perUser.status, 429, perUser.text);
    assert.equal(perUser.body.error, 'too many test pings from this user; try again later');
    assert.equal((await churn(eve)).status, 200);
    const perTeam = await churn(eve);
    assert.equal(perTeam.status, 429, perTeam.text);
    assert.equal(perTeam.body.error, 'too many test pings from this team; try again later');
    assert.equal(receiver.received.length, sent + 4, 'a refused test sends nothing');
  });

  it('redeliveries: the (n+1)th across runs of one user, then of one team, is 429 with Retry-After', async () => {
    const [dan, eve] = [anonymous.as('dan', 'redeliverers'), anonymous.as('eve', 'redeliverers')];
    const runs = [
      await launch(dan),
      await launch(dan),
      await launch(dan),
      await launch(dan),
      await launch(eve),
    ];
    // Each run's callback gave up (as its schedule would have settled it).
    for (const runId of runs) {
      const key = claimKeys.callback(`${runId}:end`);
      if (await stores.claims.tryMark(key, 'seed'))
        await stores.claims.markDelivered(key, 'seed', 'gave_up: http 503');
    }
    const again = async (as: ApiClient, runId: string) => {
      const res = await as.post(`/api/v1/runs/${runId}/episodes/${runId}:end/callback/redeliver`);
      if (res.status === 202) redelivered.push(`${runId}:end`);
      return res;
    };
    for (const runId of runs.slice(0, 3)) assert.equal((await again(dan, runId)).status, 202);
    const perUser = await again(dan, runs[3]);
    assert.equal(perUser.status, 429, perUser.text);
    assert.equal(perUser.body.error, 'too many redeliveries from this user; try again later');
    assert.ok(retryAfter(perUser) >= 1 && retryAfter(perUser) <= 60, String(retryAfter(perUser)));
    assert.equal((await again(eve, runs[4])).status, 202);
    const perTeam = await again(eve, runs[3]);
    assert.equal(perTeam.status, 429, perTeam.text);
    assert.equal(perTeam.body.error, 'too many redeliveries from this team; try again later');
    assert.ok(retryAfter(perTeam) >= 1 && retryAfter(perTeam) <= 60, String(retryAfter(perTeam)));
  });

  it('run creation past RUN_CREATE_RATE_LIMIT per team is 429, with a callback or without', async () => {
    const fay = anonymous.as('fay', 'creators');
    for (let i = 0; i < 3; i++) await launch(i % 2 ? fay : anonymous.as('gus', 'creators'));
    for (let i = 0; i < 3; i++)
      assert.equal((await fay.post('/api/v1/runs', { title: `plain ${i}` })).status, 201);
    for (const body of [{ callback: { url: receiver.url } }, { title: 'no callback' }]) {
      const refused = await fay.post('/api/v1/runs', body);
      assert.equal(refused.status, 429, refused.text);
      assert.equal(refused.body.error, 'too many runs from this team; try again later');
      assert.ok(retryAfter(refused) >= 1 && retryAfter(refused) <= 60, String(retryAfter(refused)));
    }
    const other = anonymous.as('hal', 'makers');
    assert.equal((await other.post('/api/v1/runs', { callback: { url: receiver.url } })).status, 201);
  });
});
