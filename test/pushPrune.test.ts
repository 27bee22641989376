// Endpoints that look dead or hostile without a push service saying so (a name that does not exist, an answer
// pointing somewhere we may not go, a 401/403 from a host that is no known push service) are refused and counted,
// never pruned on one DNS answer, and never page the operator; only a known push service's 401/403 does.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import { createActivities } from '../activities';
import type { Config } from '../config';
import type { EpisodeResult } from '../contract/workflows';
import { BROWSER_PUSH_SERVICES, isKnownPushService } from '../domain/pushServices';
import { buildRunOutcome } from '../domain/outcome';
import { createRunsService } from '../runs/service';
import { pushSenderFor, type PushSender } from '../delivery/push/sender';
import type { HostLookup } from '../delivery/ssrfGuard';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { openStores, type ApiClient } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { testConfig } from './support/stack';
import { waitUntil } from './support/waitUntil';
import type { OperatorAlert } from '../domain/ops';

const HOUR_MS = 3600_000;

describe('known push services', () => {
  it('the built-in list names the browsers’ push services, matched on a label boundary', () => {
    for (const host of [
      'fcm.googleapis.com',
      'updates.push.services.mozilla.com',
      'push.services.mozilla.com',
      'web.push.apple.com',
      'wns2-by3p.notify.windows.com',
    ])
      assert.ok(isKnownPushService(host, []), host);
    for (const host of [
      '127.0.0.1',
      'push.attacker.test',
      'evil-fcm.googleapis.com.attacker.test',
      'notfcm.googleapis.com',
      'xnotify.windows.com',
    ])
      assert.ok(!isKnownPushService(host, []), host);
    assert.ok(BROWSER_PUSH_SERVICES.length > 0);
  });

  it('PUSH_ENDPOINT_ALLOWLIST, when set, is the list (the built-in one no longer applies)', () => {
    assert.ok(isKnownPushService('push.example.com', ['example.com']));
    assert.ok(!isKnownPushService('fcm.googleapis.com', ['example.com']));
  });
});

describe('PUSH_PRUNE_MIN_HOURS', () => {
  it('defaults to 24, takes hours (fractions too), and refuses anything else naming the variable', () => {
    assert.equal(testConfig().pushPruneMinHours, 24);
    assert.equal(testConfig({ PUSH_PRUNE_MIN_HOURS: '0.5' }).pushPruneMinHours, 0.5);
    for (const bad of ['0', '-1', 'a day'])
      assert.throws(
        () => testConfig({ PUSH_PRUNE_MIN_HOURS: bad }),
        /^ConfigError: PUSH_PRUNE_MIN_HOURS must be a positive number/,
      );
  });
});

describe('a 401/403 from a host that is no known push service', function () {
  this.timeout(90_000);
  let push: PushService;
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  const lines: string[] = [];

  before(async () => {
    push = await startPushService();
    webhook = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    // No allowlist: the built-in list decides, and the loopback push service (127.0.0.1) is not on it.
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
        OPS_ALERT_WEBHOOK_URL: webhook.url,
      },
      { push, workerLog: (line) => lines.push(line) },
    );
  });
  after(async () => {
    await stack?.stop();
    await push?.close();
    await webhook?.close();
  });

  it('raises no push_config_fault and counts toward pruning like a lookup failure', async () => {
    const mallory = stack.anonymous.as('mallory', 'evil');
    const own = push.endpoint('mallory-own-host');
    assert.equal((await mallory.post('/api/v1/notifications/push/subscriptions', own)).status, 201);
    push.failAlways(own, 403);
    const run = (await mallory.post('/api/v1/runs', { title: 'Page the operator' })).body.id as string;
    await mallory.post(`/api/v1/runs/${run}/cancel`);
    await stack.client.workflow.getHandle(`${run}:end`).result();
    assert.ok(
      push.attempts(own).some((a) => a.status === 403),
      'the host did answer 403',
    );

    assert.ok(!lines.some((l) => /OPERATOR ACTION NEEDED/.test(l)), lines.join('\n'));
    // A raised alert would have been started while the fan-out ran; give its POST a moment to arrive.
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(
      webhook.received.map((r) => (JSON.parse(r.body) as { kind: string }).kind),
      [],
      'no operator alert',
    );
    const [row] = await stack.stores.pushSubscriptions.listForUsers(['mallory']);
    assert.ok(row, 'kept: one episode prunes nothing');
    assert.equal(row.unresolved?.count, 1, 'counted like a lookup failure');
  });
});

describe('a known push service refusing subscriptions made under another key (401/403)', function () {
  this.timeout(120_000);
  let push: PushService;
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let ourKey: string;
  const otherKey = webpush.generateVAPIDKeys().publicKey; // another application server's key (staging, a rotation)
  const lines: string[] = [];
  /** While set, the worker's reads of what push services refused fail (the store away for them). */
  let pushServicesAway = false;

  before(async () => {
    push = await startPushService();
    webhook = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    ourKey = vapid.publicKey;
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        // The loopback push service is a known one: its 401/403 is about our VAPID identity.
        PUSH_ENDPOINT_ALLOWLIST: '127.0.0.1',
        SWEEP_INTERVAL_SECONDS: '3600',
        OPS_ALERT_WEBHOOK_URL: webhook.url,
      },
      {
        push,
        workerLog: (line) => lines.push(line),
        workerStores: (stores) => ({
          ...stores,
          pushServices: {
            ...stores.pushServices,
            get: async (...args) => {
              if (pushServicesAway) throw new Error('the store is away');
              return stores.pushServices.get(...args);
            },
          },
        }),
      },
    );
  });
  after(async () => {
    await stack?.stop();
    await push?.close();
    await webhook?.close();
  });

  /** Subscribes the device as the browser would, made under `key`. */
  async function device(user: ApiClient, name: string, key: string) {
    const sub = push.endpoint(name, { applicationServerKey: key });
    assert.equal((await user.post('/api/v1/notifications/push/subscriptions', sub)).status, 201);
    return sub;
  }
  async function endRun(owner: ApiClient): Promise<string> {
    return (await endRunWithResult(owner)).run;
  }
  async function endRunWithResult(owner: ApiClient): Promise<{ run: string; result: EpisodeResult }> {
    const run = (await owner.post('/api/v1/runs', { title: 'Refused' })).body.id as string;
    assert.equal((await owner.post(`/api/v1/runs/${run}/cancel`)).status, 200);
    const result = (await stack.client.workflow.getHandle(`${run}:end`).result()) as EpisodeResult;
    return { run, result };
  }
  const rowOf = async (userId: string, sub: { endpoint: string }) =>
    (await stack.stores.pushSubscriptions.listForUsers([userId])).find((r) => r.endpoint === sub.endpoint);

  it('stale devices of two users, refused while the same push service accepts our key, page no one and count toward their pruning', async () => {
    const carol = stack.anonymous.as('carol', 'acme');
    const dan = stack.anonymous.as('dan', 'acme');
    assert.equal((await dan.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    const laptop = await device(carol, 'carol-laptop', ourKey);
    const stale = [
      await device(carol, 'carol-old-phone', otherKey),
      await device(carol, 'carol-old-tablet', otherKey),
      await device(dan, 'dan-old-phone', otherKey),
    ];
    const start = lines.length;
    await endRun(carol);

    assert.equal(push.received(laptop).length, 1, 'our key is accepted by this push service');
    for (const sub of stale)
      assert.ok(
        push.rejections(sub).some((r) => r.status === 403),
        `the push service refused ${sub.endpoint}`,
      );
    const logged = lines.slice(start);
    assert.ok(!logged.some((l) => /OPERATOR ACTION NEEDED/.test(l)), logged.join('\n'));
    assert.deepEqual(webhook.received, [], 'no operator alert');
    for (const [user, sub] of [
      ['carol', stale[0]],
      ['carol', stale[1]],
      ['dan', stale[2]],
    ] as const) {
      const row = await rowOf(user, sub);
      assert.ok(row, 'kept: one episode prunes nothing');
      assert.equal(row.unresolved?.count, 1, `${sub.endpoint}: counted toward its pruning`);
    }
    assert.equal((await rowOf('carol', laptop))?.unresolved, undefined);
  });

  it("a fan-out whose bookkeeping of a push service's refusals fails (the store away for it) is still delivered: the device it reached is not sent again", async () => {
    const kit = stack.anonymous.as('kit', 'bookkeeping');
    const laptop = await device(kit, 'kit-laptop', ourKey);
    await device(kit, 'kit-old-phone', otherKey);
    pushServicesAway = true;
    try {
      const { result } = await endRunWithResult(kit);
      assert.equal(result.push, 'delivered');
    } finally {
      pushServicesAway = false;
    }
    assert.equal(push.received(laptop).length, 1);
  });

  it("a retried fan-out (another device's push service failing) does not take the stale devices' refusals for our key's", async () => {
    const gil = stack.anonymous.as('gil', 'initech');
    const hal = stack.anonymous.as('hal', 'initech');
    assert.equal((await hal.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    const laptop = await device(gil, 'gil-laptop', ourKey);
    const flaky = await device(hal, 'hal-flaky', ourKey);
    push.failAlways(flaky, 503);
    const stale = await device(gil, 'gil-old-phone', otherKey);
    await device(gil, 'gil-old-tablet', otherKey);
    await device(hal, 'hal-old-phone', otherKey);
    const start = lines.length;
    try {
      const run = (await gil.post('/api/v1/runs', { title: 'Refused, retried' })).body.id as string;
      assert.equal((await gil.post(`/api/v1/runs/${run}/cancel`)).status, 200);
      // The first attempt reached the laptop; the next ones send only to the devices it did not reach. The third
      // attempt's refusal: the second has weighed its own.
      await waitUntil('a third attempt of the fan-out', () => push.rejections(stale).length >= 3, {
        timeoutMs: 60_000,
      });
      await stack.client.workflow.getHandle(`${run}:end`).terminate('the test is done with it');
    } finally {
      push.recover(flaky);
    }
    assert.equal(push.received(laptop).length, 1);
    const logged = lines.slice(start);
    assert.ok(!logged.some((l) => /OPERATOR ACTION NEEDED/.test(l)), logged.join('\n'));
  });

  it('several subscriptions of several users refused with nothing accepted: one push_config_fault that says our key is refused as a whole, and nothing counted toward pruning', async () => {
    // Another team, whose devices all met a key that is not ours: as if our key were wrong for this service.
    const erin = stack.anonymous.as('erin', 'globex');
    const frank = stack.anonymous.as('frank', 'globex');
    assert.equal((await frank.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    const refused = [
      await device(erin, 'erin-phone', otherKey),
      await device(erin, 'erin-laptop', otherKey),
      await device(frank, 'frank-phone', otherKey),
    ];
    const start = lines.length;
    await endRun(erin);
    assert.ok(
      lines.slice(start).some((l) => /OPERATOR ACTION NEEDED/.test(l)),
      lines.join('\n'),
    );

    const [received] = await webhook.waitFor(1, 30_000);
    const alert = JSON.parse(received.body) as OperatorAlert;
    assert.deepEqual(
      [alert.kind, alert.severity, alert.detail.origin, alert.detail.status],
      ['push_config_fault', 'critical', push.origin, 403],
    );
    assert.match(alert.summary, /as a whole/);
    assert.match(alert.summary, /3 subscriptions of 2 users/);
    assert.deepEqual([alert.detail.subscriptions, alert.detail.users], [3, 2]);
    for (const [user, sub] of [
      ['erin', refused[0]],
      ['erin', refused[1]],
      ['frank', refused[2]],
    ] as const) {
      const row = await rowOf(user, sub);
      assert.ok(row, 'kept');
      assert.equal(row.unresolved, undefined, `${sub.endpoint}: our fault, not counted toward its pruning`);
    }
  });
});

describe('pruning endpoints that do not answer as a push service', function () {
  this.timeout(90_000);
  let push: PushService;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let permissive: PushSender; // PUSH_ALLOW_PRIVATE=1: the loopback push service is reachable
  let strict: PushSender;
  let known: PushSender; // PUSH_ENDPOINT_ALLOWLIST=127.0.0.1: the loopback push service is a known one
  let clock: Date;
  const lines: string[] = [];

  /** The resolver a DNS sinkhole or a split horizon would be: a name gone, a name answered 0.0.0.0 or 10.x. */
  const lookup: HostLookup = async (hostname) => {
    const answers: Record<string, string> = {
      localhost: '127.0.0.1',
      'sinkhole.push.test': '0.0.0.0',
      'split.push.test': '10.1.2.3',
    };
    const address = answers[hostname];
    if (!address) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return [{ address, family: 4 }];
  };

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    // Strict: a private answer (10.x) is refused as it would be in production.
    config = testConfig({ VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey });
    ({ mongo, stores } = await openStores(config));
    permissive = pushSenderFor({ ...config, pushAllowPrivate: true }, { ca: push.ca, lookup })!;
    strict = pushSenderFor(config, { ca: push.ca, lookup })!;
    known = pushSenderFor(
      { ...config, pushAllowPrivate: true, pushEndpointAllowlist: ['127.0.0.1'] },
      { ca: push.ca, lookup },
    )!;
  });
  after(async () => {
    known?.close();
    permissive?.close();
    strict?.close();
    await mongo?.client.close();
    await push?.close();
  });

  /** The push activity on the real store and push service, with a clock the test moves. */
  const activitiesAt = (allowPrivate: boolean | 'known') =>
    createActivities({
      config: { ...config, pushAllowPrivate: allowPrivate !== false },
      stores,
      client: undefined as unknown as Client, // no operator family here
      pushSender: allowPrivate === 'known' ? known : allowPrivate ? permissive : strict,
      now: () => clock,
      log: (line) => lines.push(line),
    });

  /** One episode of a run of this user (cancelled), pushed at the clock's time. */
  async function episodeAt(userId: string, at: Date, allowPrivate: boolean | 'known' = false) {
    clock = at;
    const engine = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    const caller = { userId, teamId: 'acme' };
    const run = await engine.create(caller, { title: 'prune' });
    await engine.cancel(caller, run._id);
    const outcome = buildRunOutcome((await stores.runs.getById(run._id))!)!;
    return activitiesAt(allowPrivate).deliverPush(outcome);
  }

  async function subscribe(userId: string, endpoint: string) {
    const keys = push.endpoint(userId).keys;
    await stores.pushSubscriptions.upsert({ userId, teamId: 'acme' }, { endpoint, keys }, new Date());
  }
  const hostsOf = async (userId: string) =>
    (await stores.pushSubscriptions.listForUsers([userId])).map((s) => new URL(s.endpoint).hostname).sort();

  it('a name answering a private address is refused, reaches nothing, and is not pruned at once', async () => {
    const port = new URL(push.origin).port;
    await subscribe('pat', `https://split.push.test:${port}/push/x`);
    await subscribe('pat', `https://sinkhole.push.test:${port}/push/x`);
    const before = push.attempts().length;
    const result = await episodeAt('pat', new Date());
    assert.equal(result.addressable && result.pruned, 0, JSON.stringify(result));
    assert.equal(push.attempts().length, before, 'nothing was sent');
    assert.deepEqual(await hostsOf('pat'), ['sinkhole.push.test', 'split.push.test']);
    for (const row of await stores.pushSubscriptions.listForUsers(['pat']))
      assert.equal(row.unresolved?.count, 1);
  });

  it('three episodes in quick succession prune nothing; the one that makes the span PUSH_PRUNE_MIN_HOURS prunes', async () => {
    const port = new URL(push.origin).port;
    const denying = push.endpoint('quinn-denying');
    push.failAlways(denying, 403);
    await subscribe('quinn', `https://gone.push.test:${port}/push/x`); // ENOTFOUND
    await subscribe('quinn', `https://sinkhole.push.test:${port}/push/x`); // 0.0.0.0: refused even here
    await stores.pushSubscriptions.upsert(
      { userId: 'quinn', teamId: 'acme' },
      { endpoint: denying.endpoint, keys: denying.keys }, // 127.0.0.1 answering 403: no known push service
      new Date(),
    );
    const t0 = new Date('2026-03-01T08:00:00Z');
    for (const minutes of [0, 1, 2]) {
      const result = await episodeAt('quinn', new Date(t0.getTime() + minutes * 60_000), true);
      assert.equal(result.addressable && result.pruned, 0, JSON.stringify(result));
      assert.equal((await hostsOf('quinn')).length, 3, `kept after the episode at +${minutes} min`);
    }
    await episodeAt('quinn', new Date(t0.getTime() + 23 * HOUR_MS), true);
    assert.equal((await hostsOf('quinn')).length, 3, 'kept: four episodes, but within 23 h');
    const result = await episodeAt('quinn', new Date(t0.getTime() + 24 * HOUR_MS), true);
    assert.equal(result.addressable && result.pruned, 3, JSON.stringify(result));
    assert.deepEqual(await hostsOf('quinn'), []);
    assert.ok(push.attempts(denying).length >= 5, 'the 403 host was asked every episode');
  });

  it('three episodes spanning PUSH_PRUNE_MIN_HOURS prune on the third', async () => {
    const port = new URL(push.origin).port;
    await subscribe('ray', `https://gone.push.test:${port}/push/x`);
    await subscribe('ray', `https://split.push.test:${port}/push/x`);
    const t0 = new Date('2026-03-02T08:00:00Z');
    await episodeAt('ray', t0);
    await episodeAt('ray', new Date(t0.getTime() + 12 * HOUR_MS));
    assert.equal((await hostsOf('ray')).length, 2);
    await episodeAt('ray', new Date(t0.getTime() + 24 * HOUR_MS));
    assert.deepEqual(await hostsOf('ray'), [], 'both pruned on the third episode, 24 h after the first');
  });

  it('a delivery in between starts the span again', async () => {
    const real = push.endpoint('sam');
    await stores.pushSubscriptions.upsert(
      { userId: 'sam', teamId: 'acme' },
      { endpoint: `https://localhost:${new URL(push.origin).port}/push/${push.idOf(real)}`, keys: real.keys },
      new Date(),
    );
    push.failAlways(real, 403);
    const t0 = new Date('2026-03-03T08:00:00Z');
    await episodeAt('sam', t0, true);
    await episodeAt('sam', new Date(t0.getTime() + 1 * HOUR_MS), true);
    push.recover(real);
    const recovered = await episodeAt('sam', new Date(t0.getTime() + 2 * HOUR_MS), true);
    assert.equal(push.received(real).length, 1);
    // The streak starts again only on a send the sender saw go through (not one it gave up waiting for).
    assert.equal(
      recovered.addressable && recovered.delivered,
      1,
      `${JSON.stringify(recovered)}\n${lines.slice(-5).join('\n')}`,
    );
    push.failAlways(real, 403);
    for (const hours of [25, 26, 27]) await episodeAt('sam', new Date(t0.getTime() + hours * HOUR_MS), true);
    const [row] = await stores.pushSubscriptions.listForUsers(['sam']);
    assert.ok(row, 'kept: three in a row, but the streak started again at +25 h');
    assert.equal(row.unresolved?.count, 3);
    assert.equal(row.unresolved?.since?.getTime(), t0.getTime() + 25 * HOUR_MS);
  });

  it('a device a known push service refuses under another key is pruned after 3 episodes spanning PUSH_PRUNE_MIN_HOURS; the good one keeps its pushes', async () => {
    const vapidKey = config.vapid!.publicKey;
    const good = push.endpoint('gina-laptop', { applicationServerKey: vapidKey });
    const stale = push.endpoint('gina-old-phone', {
      applicationServerKey: webpush.generateVAPIDKeys().publicKey,
    });
    for (const sub of [good, stale])
      await stores.pushSubscriptions.upsert({ userId: 'gina', teamId: 'acme' }, sub, new Date());
    const t0 = new Date('2026-03-04T08:00:00Z');
    for (const hours of [0, 12]) {
      const result = await episodeAt('gina', new Date(t0.getTime() + hours * HOUR_MS), 'known');
      assert.equal(result.addressable && result.pruned, 0, JSON.stringify(result));
    }
    const [row] = (await stores.pushSubscriptions.listForUsers(['gina'])).filter(
      (r) => r.endpoint === stale.endpoint,
    );
    assert.equal(row?.unresolved?.count, 2, 'counted, once per episode');
    const result = await episodeAt('gina', new Date(t0.getTime() + 24 * HOUR_MS), 'known');
    assert.equal(result.addressable && result.pruned, 1, JSON.stringify(result));
    assert.deepEqual(
      (await stores.pushSubscriptions.listForUsers(['gina'])).map((r) => r.endpoint),
      [good.endpoint],
    );
    assert.equal(push.received(good).length, 3);
    assert.ok(!lines.some((l) => /OPERATOR ACTION NEEDED/.test(l)), lines.join('\n'));
  });

  it('while a known push service refuses our key as a whole, nothing it refuses is pruned, however long it lasts', async () => {
    // hal's two devices and ivy's one, all refused (as if our key were wrong there): every episode of either.
    const otherKey = webpush.generateVAPIDKeys().publicKey;
    const refused = {
      hal: [
        push.endpoint('hal-phone', { applicationServerKey: otherKey }),
        push.endpoint('hal-laptop', { applicationServerKey: otherKey }),
      ],
      ivy: [push.endpoint('ivy-phone', { applicationServerKey: otherKey })],
    };
    for (const [userId, subs] of Object.entries(refused))
      for (const sub of subs)
        await stores.pushSubscriptions.upsert({ userId, teamId: 'acme' }, sub, new Date());
    const t0 = new Date('2026-03-05T08:00:00Z');
    for (const hours of [0, 12, 24, 36, 48]) {
      for (const userId of ['hal', 'ivy']) {
        const result = await episodeAt(userId, new Date(t0.getTime() + hours * HOUR_MS), 'known');
        assert.equal(
          result.addressable && result.pruned,
          0,
          `${userId} at +${hours} h: ${JSON.stringify(result)}`,
        );
      }
    }
    assert.equal((await stores.pushSubscriptions.listForUsers(['hal', 'ivy'])).length, 3, 'all kept');
  });
});
