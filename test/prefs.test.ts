// Per-user-in-a-team push preferences (scope and kinds) and the caller's own devices, end to end: real API, real
// worker, real Temporal and FerretDB, and the loopback push service.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { Config } from '../config';
import type { PushPayload } from '../domain/push';
import type { EpisodeResult } from '../contract/workflows';
import { MongoClient, type Document } from 'mongodb';
import { ensureAllIndexes, type Stores } from '../store';
import { createNotificationPrefStore } from '../store/push/notificationPrefs';
import { subscriptionId } from '../store/push/subscriptions';
import type { Mongo } from '../store/mongo';
import type { PushHoldRow } from '../store/push/holds';
import { startFamilyStack, sweepActivitiesOf, type FamilyStack } from './support/familyStack';
import { addToDigest } from '../client/digest';
import { ApiClient, recordFixture } from './support/harness';
import { startPushService, type PushService, type SubscriptionJSON } from './support/pushService';
import { waitUntil } from './support/waitUntil';

/** Who listRecipientPrefs names, by user id. */
const userIdsOf = async (recipients: Promise<{ userId: string }[]>): Promise<string[]> =>
  (await recipients).map((recipient) => recipient.userId);

describe('push preferences and devices', function () {
  let push: PushService;
  let stack: FamilyStack;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let anonymous: ApiClient;

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { push },
    );
    ({ config, mongo, stores, client, anonymous } = stack);
  });

  after(async () => {
    await stack?.stop();
    await push?.close();
  });

  const episodeResult = (episodeId: string) =>
    client.workflow.getHandle(episodeId).result() as Promise<EpisodeResult>;
  const kindsReceived = (sub: SubscriptionJSON, runIds: string[]) =>
    push
      .received(sub)
      .map((r) => r.payload as PushPayload)
      .filter((p) => runIds.includes(p.runId))
      .map((p) => p.kind)
      .sort();

  async function subscribe(user: ApiClient, name: string, headers: Record<string, string> = {}) {
    const subscription = push.endpoint(name);
    const res = await user.request('POST', '/api/v1/notifications/push/subscriptions', subscription, headers);
    assert.equal(res.status, 201, res.text);
    return subscription;
  }

  /** One finished and one failed run of this owner in its team, both episodes settled. */
  async function finishAndFail(owner: ApiClient): Promise<string[]> {
    const ids: string[] = [];
    for (const end of ['complete', 'fail'] as const) {
      const res = await owner.post('/api/v1/runs', { title: `Run to ${end}` });
      assert.equal(res.status, 201, res.text);
      const id = res.body.id as string;
      const ended = await owner.post(
        `/api/v1/runs/${id}/${end}`,
        end === 'complete' ? { finalAnswer: 'done' } : { error: { code: 'x', message: 'broke' } },
      );
      assert.ok(ended.status < 300, ended.text);
      await episodeResult(`${id}:end`);
      ids.push(id);
    }
    return ids;
  }

  describe('prefs belong to a user in a team', () => {
    it('setting own in one team keeps the team opt-in of the other, and its pushes', async () => {
      const danAcme = anonymous.as('dan', 'acme');
      const danBeta = anonymous.as('dan', 'beta');
      const dan = await subscribe(danAcme, 'dan-laptop');
      assert.equal((await danAcme.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
      assert.equal((await danBeta.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
      assert.equal((await danBeta.put('/api/v1/notifications/prefs', { scope: 'own' })).status, 200);
      assert.equal((await danAcme.get('/api/v1/notifications/prefs')).body.scope, 'team');
      assert.equal((await danBeta.get('/api/v1/notifications/prefs')).body.scope, 'own');

      const runs = await finishAndFail(anonymous.as('alice', 'acme'));
      assert.deepEqual(kindsReceived(dan, runs), ['run_failed', 'run_finished']);
      const betaRuns = await finishAndFail(anonymous.as('beth', 'beta'));
      assert.deepEqual(kindsReceived(dan, betaRuns), [], 'own in beta: no push for a teammate’s run');
    });

    it('start-up migrates user-keyed rows to (user, team) rows, and running it again changes nothing', async () => {
      const at = new Date('2026-01-01T00:00:00Z');
      await mongo.db
        .collection('notification_prefs')
        .insertOne({ _id: 'olga', teamId: 'acme', scope: 'team', updatedAt: at } as never);
      await ensureAllIndexes(mongo.db);
      const once = await mongo.db.collection('notification_prefs').find({ userId: 'olga' }).toArray();
      await ensureAllIndexes(mongo.db);
      const twice = await mongo.db.collection('notification_prefs').find({ userId: 'olga' }).toArray();
      assert.equal(once.length, 1);
      assert.deepEqual(twice, once);
      assert.equal(once[0].teamId, 'acme');
      assert.equal(once[0].scope, 'team');
      assert.equal(
        await mongo.db.collection('notification_prefs').countDocuments({ _id: 'olga' as never }),
        0,
      );
      assert.equal(
        (await anonymous.as('olga', 'acme').get('/api/v1/notifications/prefs')).body.scope,
        'team',
      );
    });
  });

  describe('kinds', () => {
    const ALL_ON = {
      human_input_requested: true,
      usage_parked: true,
      run_finished: true,
      run_failed: true,
      run_cancelled: true,
    };

    it('GET answers every kind on by default; a body without kinds keeps the seed’s answers', async () => {
      const pia = anonymous.as('pia', 'acme');
      assert.deepEqual((await pia.get('/api/v1/notifications/prefs')).body, {
        scope: 'own',
        kinds: ALL_ON,
        breakThrough: ['human_input_requested'],
      });
      const put = await pia.put('/api/v1/notifications/prefs', { scope: 'team' });
      assert.equal(put.status, 200);
      assert.equal(put.body.scope, 'team');
      for (const body of [{ scope: 'everyone' }, {}, { scope: 'everyone', kinds: { run_failed: false } }]) {
        const bad = await pia.put('/api/v1/notifications/prefs', body);
        assert.equal(bad.status, 400);
        assert.equal(bad.body.error, 'scope must be own or team');
      }
      for (const kinds of [{ run_paused: false }, { run_failed: 'no' }, [true], 'all']) {
        const bad = await pia.put('/api/v1/notifications/prefs', { scope: 'own', kinds });
        assert.equal(bad.status, 400, JSON.stringify(kinds));
        assert.match(bad.body.error, /^kinds /);
      }
      // kinds named are set, the others keep their value; scope alone leaves the kinds as they are.
      await pia.put('/api/v1/notifications/prefs', { scope: 'team', kinds: { run_finished: false } });
      await pia.put('/api/v1/notifications/prefs', { scope: 'team', kinds: { usage_parked: false } });
      await pia.put('/api/v1/notifications/prefs', { scope: 'own' });
      assert.deepEqual((await pia.get('/api/v1/notifications/prefs')).body, {
        scope: 'own',
        kinds: { ...ALL_ON, run_finished: false, usage_parked: false },
        breakThrough: ['human_input_requested'],
      });
      await pia.put('/api/v1/notifications/prefs', { scope: 'own', kinds: ALL_ON });
      assert.equal(await mongo.db.collection('notification_prefs').countDocuments({ userId: 'pia' }), 0);
    });

    it('changes made at once to different kinds all hold: none is written over by another read before it', async () => {
      const quinn = anonymous.as('quinn', 'acme');
      const off = ['usage_parked', 'run_finished', 'run_failed', 'run_cancelled'] as const;
      const puts = await Promise.all(
        off.map((kind) =>
          quinn.put('/api/v1/notifications/prefs', { scope: 'own', kinds: { [kind]: false } }),
        ),
      );
      assert.deepEqual(
        puts.map((put) => put.status),
        off.map(() => 200),
      );
      const kinds = (await quinn.get('/api/v1/notifications/prefs')).body.kinds;
      assert.deepEqual(kinds, { ...ALL_ON, ...Object.fromEntries(off.map((kind) => [kind, false])) });
    });

    it('an owner with run_finished off gets the failed run’s push, not the finished one’s', async () => {
      const quinn = anonymous.as('quinn', 'gamma');
      const sub = await subscribe(quinn, 'quinn-phone');
      const off = await quinn.put('/api/v1/notifications/prefs', {
        scope: 'own',
        kinds: { run_finished: false },
      });
      assert.equal(off.status, 200, off.text);
      assert.deepEqual(off.body, {
        scope: 'own',
        kinds: { ...ALL_ON, run_finished: false },
        breakThrough: ['human_input_requested'],
      });
      const runs = await finishAndFail(quinn);
      assert.deepEqual(kindsReceived(sub, runs), ['run_failed']);
    });

    it('a team-wide teammate’s kinds are honoured; the owner’s own switch too', async () => {
      const rae = anonymous.as('rae', 'delta');
      const sam = anonymous.as('sam', 'delta');
      const raeSub = await subscribe(rae, 'rae-laptop');
      const samSub = await subscribe(sam, 'sam-laptop');
      await rae.put('/api/v1/notifications/prefs', { scope: 'team', kinds: { run_failed: false } });
      await sam.put('/api/v1/notifications/prefs', { scope: 'team' });
      const runs = await finishAndFail(anonymous.as('tom', 'delta'));
      assert.deepEqual(kindsReceived(raeSub, runs), ['run_finished']);
      assert.deepEqual(kindsReceived(samSub, runs), ['run_failed', 'run_finished']);
      // The resolution itself: owner off for the kind drops out, team-wide rows filter by kind.
      await anonymous.as('tom', 'delta').put('/api/v1/notifications/prefs', {
        scope: 'own',
        kinds: { run_finished: false },
      });
      assert.deepEqual(
        (await userIdsOf(stores.notificationPrefs.listRecipientPrefs('delta', 'tom', 'run_finished'))).sort(),
        ['rae', 'sam'],
      );
      assert.deepEqual(
        (await userIdsOf(stores.notificationPrefs.listRecipientPrefs('delta', 'tom', 'run_failed'))).sort(),
        ['sam', 'tom'],
      );
    });

    it("recipients are read by who they can be (the team-wide rows, the owner's), never every member's own row", async () => {
      const monitored = new MongoClient(config.mongoUrl, { monitorCommands: true });
      await monitored.connect();
      try {
        const finds: Document[] = [];
        monitored.on('commandStarted', (e) => {
          if (e.commandName === 'find') finds.push(e.command);
        });
        const db = monitored.db(config.mongoDb);
        const prefs = createNotificationPrefStore(db);
        const now = new Date();
        for (let i = 0; i < 40; i++)
          await prefs.set(
            `member${i}`,
            'epsilon',
            // Half team-wide; the rest keep to their own runs (quiet hours make such rows common).
            { scope: i % 2 === 0 ? 'team' : 'own', kinds: { run_failed: i % 4 !== 2 } },
            now,
          );
        finds.length = 0;
        const recipients = await userIdsOf(prefs.listRecipientPrefs('epsilon', 'member1', 'run_failed'));
        assert.deepEqual(
          recipients.sort(),
          ['member1', ...Array.from({ length: 10 }, (_, k) => `member${4 * k}`)].sort(),
        );
        assert.ok(finds.length >= 1 && finds.length <= 2, `${finds.length} finds`);
        // Each read narrowed by an index to the rows it asks for: the team-wide ones (teamId and scope), or one row
        // by its key. A read by teamId alone, its other terms checked after, scans every member's row.
        for (const find of finds) {
          const explain = await db
            .collection('notification_prefs')
            .find(find.filter)
            .explain('executionStats');
          if (!('filterPushdown' in explain)) {
            // MongoDB (MONGO_URL): no row examined that the read does not answer.
            const stats = explain.executionStats as { totalDocsExamined: number; nReturned: number };
            assert.ok(stats.totalDocsExamined <= stats.nReturned, JSON.stringify(stats));
            continue;
          }
          const plan = JSON.stringify((explain.queryPlanner as { Plan?: string[] } | undefined)?.Plan ?? []);
          assert.ok(
            /_team_scope \(<expr>=\? AND <expr>=\? AND <expr>=\? AND <expr>=\?\)|__id_ \(<expr>=\?\)/.test(
              plan,
            ),
            `${JSON.stringify(find.filter)}: ${plan}`,
          );
        }
      } finally {
        await monitored.close();
      }
    });
  });

  describe('quiet hours, do-not-disturb and breakThrough', () => {
    const PREFS = '/api/v1/notifications/prefs';

    it('are set, answered and cleared (null); a bad zone, time, day, kind or a far do-not-disturb is 400', async () => {
      const ria = anonymous.as('ria', 'acme');
      const quietHours = { start: '22:00', end: '07:00', timeZone: 'Europe/Berlin', days: ['mon', 'fri'] };
      const dnd = new Date(Date.now() + 3600_000).toISOString();
      const put = await ria.put(PREFS, {
        scope: 'own',
        quietHours,
        doNotDisturbUntil: dnd,
        breakThrough: [],
      });
      assert.equal(put.status, 200, put.text);
      const got = (await ria.get(PREFS)).body;
      assert.deepEqual(got.quietHours, quietHours);
      assert.equal(got.doNotDisturbUntil, dnd);
      assert.deepEqual(got.breakThrough, []);
      // Absent keeps; the scope alone changes nothing else.
      await ria.put(PREFS, { scope: 'team' });
      assert.deepEqual((await ria.get(PREFS)).body.quietHours, quietHours);

      const refusals: [object, RegExp][] = [
        [{ quietHours: { ...quietHours, timeZone: 'Mars/Olympus' } }, /IANA time zone: Mars\/Olympus/],
        [{ quietHours: { ...quietHours, start: '24:00' } }, /quietHours.start must be HH:MM/],
        [{ quietHours: { ...quietHours, end: '7:00' } }, /quietHours.end must be HH:MM/],
        [{ quietHours: { ...quietHours, days: ['funday'] } }, /quietHours.days .*funday/],
        [{ quietHours: { ...quietHours, days: ['mon', 'mon'] } }, /quietHours.days must name each day once/],
        [
          { quietHours: { ...quietHours, days: Array.from({ length: 100_000 }, () => 'mon') } },
          /quietHours.days must name each day once/,
        ],
        [{ quietHours: { start: '22:00' } }, /^quietHours must be/],
        // An unbounded field is refused as a whole, never echoed back.
        [{ quietHours: { ...quietHours, start: '2'.repeat(1000) } }, /^quietHours must be/],
        [{ quietHours: { ...quietHours, timeZone: 'Z'.repeat(1000) } }, /^quietHours must be/],
        [{ quietHours: { ...quietHours, extra: 1 } }, /^quietHours must be/],
        [{ doNotDisturbUntil: new Date(Date.now() + 8 * 24 * 3600_000).toISOString() }, /at most 7 days/],
        [{ doNotDisturbUntil: 'tomorrow' }, /^doNotDisturbUntil must be an ISO time/],
        [{ doNotDisturbUntil: '2026-12-01T08:00:00' }, /^doNotDisturbUntil must be an ISO time/],
        // Days and times that do not exist are refused, not moved (Date.parse reads Feb 30 as March 2).
        [{ doNotDisturbUntil: '2026-02-30T08:00Z' }, /^doNotDisturbUntil must be an ISO time/],
        [{ doNotDisturbUntil: '2026-02-29T08:00:00Z' }, /^doNotDisturbUntil must be an ISO time/],
        [{ doNotDisturbUntil: '2026-12-31T24:00:00Z' }, /^doNotDisturbUntil must be an ISO time/],
        [{ doNotDisturbUntil: '2026-12-31T08:60:00+01:00' }, /^doNotDisturbUntil must be an ISO time/],
        [{ breakThrough: ['run_paused'] }, /^breakThrough must list kinds/],
        [{ breakThrough: ['digest'] }, /^breakThrough must list kinds/],
      ];
      for (const [body, message] of refusals) {
        const bad = await ria.put(PREFS, { scope: 'team', ...body });
        assert.equal(bad.status, 400, JSON.stringify(body));
        assert.match(bad.body.error, message, JSON.stringify(body));
      }
      assert.deepEqual((await ria.get(PREFS)).body.quietHours, quietHours, 'a refused PUT changes nothing');

      // A zone in any letter case is stored by its canonical name.
      const spelled = await ria.put(PREFS, {
        scope: 'own',
        quietHours: { ...quietHours, timeZone: 'eUROPE/bERLIN' },
      });
      assert.equal(spelled.status, 200, spelled.text);
      assert.equal((await ria.get(PREFS)).body.quietHours.timeZone, 'Europe/Berlin');

      // null clears; back at the default (own, every kind, the default breakThrough) the row goes.
      const cleared = await ria.put(PREFS, {
        scope: 'own',
        quietHours: null,
        doNotDisturbUntil: null,
        breakThrough: ['human_input_requested'],
      });
      assert.equal(cleared.status, 200);
      assert.equal(cleared.body.quietHours, undefined);
      assert.equal(cleared.body.doNotDisturbUntil, undefined);
      assert.equal(
        await mongo.db.collection('notification_prefs').countDocuments({ userId: 'ria', teamId: 'acme' }),
        0,
      );
    });

    it('a do-not-disturb already past is no do-not-disturb', async () => {
      const sol = anonymous.as('sol', 'acme');
      const put = await sol.put(PREFS, { scope: 'own', doNotDisturbUntil: '2020-01-01T00:00:00Z' });
      assert.equal(put.status, 200);
      assert.equal((await sol.get(PREFS)).body.doNotDisturbUntil, undefined);
    });

    it('do-not-disturb holds a push for the digest; clearing it sends the digest then (its workflow re-timed)', async () => {
      const tess = anonymous.as('tess', 'delta');
      const phone = await subscribe(tess, 'tess-phone');
      const until = new Date(Date.now() + 6 * 24 * 3600_000).toISOString();
      assert.equal((await tess.put(PREFS, { scope: 'own', doNotDisturbUntil: until })).status, 200);
      const res = await tess.post('/api/v1/runs', { title: 'Quiet run' });
      const runId = res.body.id as string;
      assert.equal((await tess.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
      const result = await episodeResult(`${runId}:end`);
      assert.equal(result.push, 'delivered', 'held counts as settled');
      assert.equal(push.received(phone).length, 0, 'nothing sent during do-not-disturb');
      const hold = await mongo.db.collection('push_holds').findOne({ _id: `${runId}:end|tess` as never });
      assert.equal(hold?.reason, 'quiet');

      assert.equal((await tess.put(PREFS, { scope: 'own', doNotDisturbUntil: null })).status, 200);
      const [digest] = await push.waitFor(1, phone, 30_000);
      const payload = digest.payload as PushPayload;
      assert.equal(payload.kind, 'digest');
      assert.equal(payload.tag, 'digest|delta|tess');
      assert.match(payload.body, /1 finished/);
      assert.match(payload.body, /Quiet run finished/);
      assert.equal(payload.url, `${config.studioUrl}/`);
      await client.workflow.getHandle('digest|delta|tess').result();
      const marked = await mongo.db.collection('push_holds').findOne({ _id: `${runId}:end|tess` as never });
      assert.equal(marked?.digestId, payload.episodeId);
    });

    /** A person in delta with a device, in do-not-disturb for six days, whose run ended: its push held. */
    async function heldForSixDays(userId: string, title: string) {
      const person = anonymous.as(userId, 'delta');
      const phone = await subscribe(person, `${userId}-phone`);
      const until = new Date(Date.now() + 6 * 24 * 3600_000).toISOString();
      assert.equal((await person.put(PREFS, { scope: 'own', doNotDisturbUntil: until })).status, 200);
      const runId = (await person.post('/api/v1/runs', { title })).body.id as string;
      assert.equal((await person.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
      await episodeResult(`${runId}:end`);
      return { person, phone };
    }

    /** The sweep's pass, offering people's owed holds to their digests as the worker's does. */
    const sweepOfferingHolds = () =>
      sweepActivitiesOf(stack, {
        offerToDigest: (teamId, userId, entry) =>
          addToDigest(client, config.temporalTaskQueue, teamId, userId, entry),
      });

    it('held while no digest runs (its start was lost): clearing do-not-disturb has the next sweep pass send it', async () => {
      const { person: una, phone } = await heldForSixDays('una', 'Lost digest run');
      // Its digest never ran (the hold's signal-with-start lost in a Temporal outage): the row alone is owed.
      await client.workflow.getHandle('digest|delta|una').terminate('its start was lost');
      assert.equal((await una.put(PREFS, { scope: 'own', doNotDisturbUntil: null })).status, 200);
      await sweepOfferingHolds().sweepOnce();
      const [digest] = await push.waitFor(1, phone, 30_000);
      assert.equal((digest.payload as PushPayload).kind, 'digest');
      assert.match((digest.payload as PushPayload).body, /Lost digest run finished/);
    });

    it('a digest waiting when the prefs signal was lost (Temporal away) reads the prefs when the sweep offers its holds', async () => {
      const { phone } = await heldForSixDays('val', 'Untold run');
      // Do-not-disturb cleared while Temporal was away: the prefs are saved, the digest (waiting six days) is not
      // told, and the route has the person's holds offered by the next pass (what it does when its signal fails).
      const now = new Date();
      await stores.notificationPrefs.set('val', 'delta', { scope: 'own', doNotDisturbUntil: null }, now);
      await stores.pushHolds.owedNow('delta', 'val', now);
      await sweepOfferingHolds().sweepOnce();
      const [digest] = await push.waitFor(1, phone, 30_000);
      assert.match((digest.payload as PushPayload).body, /Untold run finished/);
      await client.workflow.getHandle('digest|delta|val').result();
      recordFixture(config, 'digest|delta|val', 'digest-history-offer-rereads-prefs.json');
    });
  });

  describe('a question held for the digest', () => {
    const PREFS = '/api/v1/notifications/prefs';

    it('answered meanwhile, the digest tells it no longer needs the person, not that it does', async () => {
      const wen = anonymous.as('wen', 'epsilon');
      const phone = await subscribe(wen, 'wen-phone');
      const until = new Date(Date.now() + 6 * 24 * 3600_000).toISOString();
      // Questions do not break through for her: held, like the rest.
      const quiet = { scope: 'own', doNotDisturbUntil: until, breakThrough: [] };
      assert.equal((await wen.put(PREFS, quiet)).status, 200);
      const asked = await wen.post('/api/v1/runs', { title: 'Ship review' });
      const runId = asked.body.id as string;
      const paused = await wen.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
      assert.equal(paused.status, 200, paused.text);
      const interactionId = paused.body.interactionId as string;
      const holdId = `${runId}:input:${interactionId}|wen`;
      await waitUntil('the question held', () =>
        mongo.db.collection('push_holds').findOne({ _id: holdId as never }),
      );
      const answer = { answer: 'yes' };
      const answered = await wen.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, answer);
      assert.equal(answered.status, 200, answered.text);

      assert.equal((await wen.put(PREFS, { scope: 'own', doNotDisturbUntil: null })).status, 200);
      const [digest] = await push.waitFor(1, phone, 30_000);
      const payload = digest.payload as PushPayload;
      assert.equal(payload.kind, 'digest');
      assert.equal(payload.body, '1 no longer waiting · Ship review no longer needs your input');
    });

    it('pushed again by its rungs meanwhile, the digest counts and lists it once', async () => {
      const xan = anonymous.as('xan', 'eta');
      const phone = await subscribe(xan, 'xan-phone');
      const until = new Date(Date.now() + 6 * 24 * 3600_000).toISOString();
      assert.equal(
        (await xan.put(PREFS, { scope: 'own', doNotDisturbUntil: until, breakThrough: [] })).status,
        200,
      );
      const rungs = [1, 2].map((afterSeconds) => ({ afterSeconds, to: 'owner', via: 'push' }));
      const asked = await xan.post('/api/v1/runs', { title: 'Laddered', escalation: { rungs } });
      assert.equal(asked.status, 201, asked.text);
      const runId = asked.body.id as string;
      const paused = await xan.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
      assert.equal(paused.status, 200, paused.text);
      // The question and both its rungs held for her digest.
      await waitUntil(
        'three holds',
        async () => (await mongo.db.collection('push_holds').countDocuments({ runId, userId: 'xan' })) === 3,
      );
      assert.equal((await xan.put(PREFS, { scope: 'own', doNotDisturbUntil: null })).status, 200);
      const [digest] = await push.waitFor(1, phone, 30_000);
      const payload = digest.payload as PushPayload;
      assert.equal(payload.title, '1 run update while you were away');
      assert.equal(payload.body, '1 waiting for input · Laddered needs your input');
    });

    it('parked, then resumed meanwhile, the digest tells it is no longer parked', async () => {
      const yul = anonymous.as('yul', 'theta');
      const phone = await subscribe(yul, 'yul-phone');
      const until = new Date(Date.now() + 6 * 24 * 3600_000).toISOString();
      assert.equal((await yul.put(PREFS, { scope: 'own', doNotDisturbUntil: until })).status, 200);
      const created = await yul.post('/api/v1/runs', { title: 'Capped' });
      const runId = created.body.id as string;
      assert.equal((await yul.post(`/api/v1/runs/${runId}/park`, { wall: 'tokens' })).status, 200);
      await waitUntil('the park held', async () =>
        mongo.db.collection('push_holds').findOne({ runId, userId: 'yul', kind: 'usage_parked' }),
      );
      assert.equal((await yul.post(`/api/v1/runs/${runId}/resume`, {})).status, 200);
      assert.equal((await yul.put(PREFS, { scope: 'own', doNotDisturbUntil: null })).status, 200);
      const [digest] = await push.waitFor(1, phone, 30_000);
      const payload = digest.payload as PushPayload;
      assert.equal(payload.body, '1 no longer waiting · Capped is no longer parked');
    });
  });

  describe('a push held for the digest, opted out of since', () => {
    const PREFS = '/api/v1/notifications/prefs';
    const dnd = () => new Date(Date.now() + 6 * 24 * 3600_000).toISOString();

    /** A run of this owner ended (`complete` or `fail`), its episode settled. */
    async function ended(owner: ApiClient, title: string, end: 'complete' | 'fail'): Promise<string> {
      const res = await owner.post('/api/v1/runs', { title });
      assert.equal(res.status, 201, res.text);
      const id = res.body.id as string;
      const body = end === 'complete' ? { finalAnswer: 'done' } : { error: { code: 'x', message: 'broke' } };
      assert.ok((await owner.post(`/api/v1/runs/${id}/${end}`, body)).status < 300);
      await episodeResult(`${id}:end`);
      return id;
    }

    it('a kind turned off meanwhile is not told; its hold shows it was opted out of', async () => {
      const ula = anonymous.as('ula', 'iota');
      const phone = await subscribe(ula, 'ula-phone');
      assert.equal((await ula.put(PREFS, { scope: 'own', doNotDisturbUntil: dnd() })).status, 200);
      const finished = await ended(ula, 'Nightly build', 'complete');
      await ended(ula, 'Migration', 'fail');
      assert.equal(await mongo.db.collection('push_holds').countDocuments({ userId: 'ula' }), 2);

      const off = { scope: 'own', kinds: { run_finished: false }, doNotDisturbUntil: null };
      assert.equal((await ula.put(PREFS, off)).status, 200);
      const [digest] = await push.waitFor(1, phone, 30_000);
      const payload = digest.payload as PushPayload;
      assert.equal(payload.title, '1 run update while you were away');
      assert.equal(payload.body, '1 failed · Migration failed');
      await client.workflow.getHandle('digest|iota|ula').result();
      const episodes = await ula.get(`/api/v1/runs/${finished}/episodes`);
      const [held] = episodes.body.episodes[0].pushHeld as Record<string, unknown>[];
      assert.equal(typeof held.optedOutAt, 'string', JSON.stringify(held));
      assert.equal(held.digestId, undefined, 'no digest carried it');
    });

    it("an episode's view shows the first 500 people held, however many were", async () => {
      const xan = anonymous.as('xan', 'lambda');
      const id = await ended(xan, 'Company-wide report', 'complete');
      const at = new Date(Date.now() - 3600_000);
      await mongo.db.collection<PushHoldRow>('push_holds').insertMany(
        Array.from({ length: 600 }, (_, i) => ({
          _id: `${id}:end|member${i}`,
          episodeId: `${id}:end`,
          runId: id,
          teamId: 'lambda',
          userId: `member${i}`,
          kind: 'run_finished',
          title: 'Company-wide report',
          reason: 'quiet' as const,
          viaTeam: true as const,
          at,
          releaseAt: at,
          digestId: 'digest|lambda|x',
          digestSentAt: at,
        })),
      );
      const episodes = await xan.get(`/api/v1/runs/${id}/episodes`);
      assert.equal(episodes.status, 200, episodes.text);
      assert.equal(episodes.body.episodes[0].pushHeld.length, 500);
    });

    it('switched to own runs meanwhile, a teammate’s run is not told; their own is', async () => {
      const vic = anonymous.as('vic', 'kappa');
      const wes = anonymous.as('wes', 'kappa');
      const phone = await subscribe(vic, 'vic-phone');
      assert.equal((await vic.put(PREFS, { scope: 'team', doNotDisturbUntil: dnd() })).status, 200);
      await ended(wes, 'Teammate’s deploy', 'complete');
      await ended(vic, 'Own report', 'complete');
      assert.equal(await mongo.db.collection('push_holds').countDocuments({ userId: 'vic' }), 2);

      assert.equal((await vic.put(PREFS, { scope: 'own', doNotDisturbUntil: null })).status, 200);
      const [digest] = await push.waitFor(1, phone, 30_000);
      const payload = digest.payload as PushPayload;
      assert.equal(payload.body, '1 finished · Own report finished');
    });
  });

  describe('devices', () => {
    const CHROME_LINUX =
      'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36';

    it('lists the caller’s own devices with host, label, created and last success, never the endpoint or keys', async () => {
      const uma = anonymous.as('uma', 'zeta');
      const laptop = await subscribe(uma, 'uma-laptop', { 'user-agent': CHROME_LINUX });
      const phone = await subscribe(uma, 'uma-phone', { 'user-agent': 'x'.repeat(3000) });
      await subscribe(anonymous.as('vic', 'zeta'), 'vic-laptop');
      const before = await uma.get('/api/v1/notifications/push/subscriptions');
      assert.equal(before.status, 200, before.text);
      const list = before.body.subscriptions as Record<string, unknown>[];
      assert.equal(list.length, 2);
      const host = new URL(laptop.endpoint).host;
      // Newest first (two subscribes may share a millisecond: then by id, so compare the set).
      const times = list.map((d) => Date.parse(String(d.createdAt)));
      assert.deepEqual(
        times,
        [...times].sort((a, b) => b - a),
      );
      assert.deepEqual(list.map((d) => [d.host, d.label, d.lastSuccessAt]).sort(), [
        [host, 'Chrome on Linux', null],
        [host, `${'x'.repeat(79)}…`, null],
      ]);
      for (const device of list) {
        assert.deepEqual(Object.keys(device).sort(), ['createdAt', 'host', 'id', 'label', 'lastSuccessAt']);
        assert.match(String(device.id), /^[0-9a-f]{64}$/);
        assert.ok(!Number.isNaN(Date.parse(String(device.createdAt))));
      }
      for (const secret of [
        laptop.endpoint,
        new URL(phone.endpoint).pathname,
        laptop.keys.auth,
        laptop.keys.p256dh,
      ])
        assert.ok(!before.text.includes(secret), `no ${secret} in the list`);

      const [runId] = await finishAndFail(uma);
      assert.ok(runId);
      const after = (await uma.get('/api/v1/notifications/push/subscriptions')).body.subscriptions as {
        lastSuccessAt: string | null;
      }[];
      for (const device of after) assert.ok(device.lastSuccessAt && Date.parse(device.lastSuccessAt) > 0);
    });

    it('the device list pages newest first by cursor; ties in createdAt neither skip nor repeat a device', async () => {
      const yan = anonymous.as('yan', 'zeta');
      const base = Date.now() - 3_600_000;
      const ids: { id: string; at: number }[] = [];
      for (const [n, i] of [0, 0, 0, 1, 2, 2].entries()) {
        const subscription = push.endpoint(`yan-device-${n}`);
        await stores.pushSubscriptions.upsert(
          { userId: 'yan', teamId: 'zeta' },
          subscription,
          new Date(base + i),
        );
        ids.push({ id: subscriptionId(subscription.endpoint), at: base + i });
      }
      await subscribe(anonymous.as('zed', 'zeta'), 'zed-laptop'); // another user's device stays out
      const expected = ids.sort((a, b) => b.at - a.at || (a.id < b.id ? 1 : -1)).map((d) => d.id);
      for (const limit of [1, 2, 4, 6]) {
        const seen: string[] = [];
        let before: string | undefined;
        do {
          const res = await yan.get(
            `/api/v1/notifications/push/subscriptions?limit=${limit}` +
              (before ? `&before=${encodeURIComponent(before)}` : ''),
          );
          assert.equal(res.status, 200, res.text);
          seen.push(...(res.body.subscriptions as { id: string }[]).map((d) => d.id));
          before = res.body.nextBefore;
        } while (before);
        assert.deepEqual(seen, expected, `limit ${limit}`);
      }
      for (const query of ['limit=0', 'limit=201', 'before=nope', 'page=2']) {
        const res = await yan.get(`/api/v1/notifications/push/subscriptions?${query}`);
        assert.equal(res.status, 400, query);
        assert.match(res.body.error, /^invalid request: /);
      }
    });

    it('DELETE by id removes one of the caller’s own; another user’s id or a made-up one is 404', async () => {
      const wes = anonymous.as('wes', 'zeta');
      const xia = anonymous.as('xia', 'zeta');
      const wesSub = await subscribe(wes, 'wes-old-laptop');
      await subscribe(xia, 'xia-laptop');
      const [xiaDevice] = (await xia.get('/api/v1/notifications/push/subscriptions')).body.subscriptions;
      const [wesDevice] = (await wes.get('/api/v1/notifications/push/subscriptions')).body.subscriptions;
      const path = (id: string) => `/api/v1/notifications/push/subscriptions/${id}`;
      for (const id of [xiaDevice.id, 'f'.repeat(64), 'not-an-id']) {
        const res = await wes.delete(path(id));
        assert.equal(res.status, 404, id);
        assert.equal(res.body.error, 'no such device');
      }
      assert.equal((await xia.get('/api/v1/notifications/push/subscriptions')).body.subscriptions.length, 1);
      assert.equal((await wes.delete(path(wesDevice.id))).status, 204);
      assert.deepEqual((await wes.get('/api/v1/notifications/push/subscriptions')).body, {
        subscriptions: [],
      });
      const runs = await finishAndFail(wes);
      assert.deepEqual(kindsReceived(wesSub, runs), [], 'a removed device gets no push');
      assert.equal((await anonymous.delete(path(xiaDevice.id))).status, 401);
    });
  });
});
