// Per-user-in-a-team push preferences (scope and kinds) and the caller's own devices, end to end: real API, real
// worker, real Temporal and FerretDB, and the loopback push service.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import type { PushPayload } from '../domain/push';
import type { EpisodeResult } from '../workflows/episode';
import { pushSenderFor } from '../net/pushSender';
import { ensureAllIndexes, type Stores } from '../store';
import type { Mongo } from '../store/mongo';
import {
  ApiClient,
  openStores,
  startTestApi,
  startTestWorker,
  temporalClient,
  type RunningWorker,
} from './support/harness';
import { startPushService, type PushService, type SubscriptionJSON } from './support/pushService';
import { testConfig } from './support/stack';

describe('push preferences and devices', function () {
  let push: PushService;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let api: ApiHandle;
  let worker: RunningWorker;
  let client: Client;
  let closeClient: () => Promise<void>;
  let anonymous: ApiClient;

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    config = testConfig({
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:ops@flow.test',
      PUSH_ALLOW_PRIVATE: '1',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ mongo, stores } = await openStores(config));
    const sender = () => pushSenderFor(config, { ca: push.ca });
    worker = await startTestWorker(config, stores, { pushSender: sender() });
    const started = await startTestApi(config, { pushSender: sender() });
    api = started.api;
    anonymous = started.client;
    ({ client, close: closeClient } = await temporalClient(config));
  });

  after(async () => {
    await api?.close();
    await worker?.stop();
    await closeClient?.();
    await mongo?.client.close();
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
});
