// The families of one episode apart, on the real servers: every branch's exit settles or releases its own claim
// (the workflow's result, the claim and the episodes view agree), and a released push is tried again within one
// sweep interval whatever the callback is doing.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { Config } from '../config';
import type { Stores } from '../store';
import type { ClaimState } from '../domain/outcome';
import type { Mongo } from '../store/mongo';
import type { BranchResult, EpisodeResult } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { recordFixture, type ApiClient } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { waitUntil } from './support/waitUntil';

/** The claim state each branch result leaves behind: released means absent (the sweep may replay it). */
const CLAIM_AFTER: Partial<Record<BranchResult, ClaimState>> = {
  delivered: 'delivered',
  not_addressable: 'delivered',
  gave_up: 'delivered',
  released: 'absent',
};

describe('family independence', function () {
  this.timeout(120_000);
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack(
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_TIMEOUT_SECONDS: '2',
        CALLBACK_RETRY_SECONDS: '1,1,1,1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      // Fast retries: the callback activity that always throws spends its three attempts in ~1.5 s, not 15.
      { fastRetries: true },
    );
    ({ config, mongo, stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  it('a callback branch that throws releases its own cb| claim: result, claim and episodes view agree', async () => {
    const launched = await alice.post('/api/v1/runs', {
      title: 'Broken secret',
      callback: { url: receiver.url },
    });
    assert.equal(launched.status, 201, launched.text);
    const id: string = launched.body.id;
    // A run document the callback activity cannot render (a createdAt that is not a date): every attempt throws,
    // so the branch itself throws once Temporal's retries are spent.
    await mongo.db.collection('runs').updateOne({ _id: id as never }, { $set: { createdAt: 'not a date' } });
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    const result = await episodeResult(episodeId);
    recordFixture(config, episodeId, 'episode-history-callback-threw.json');
    assert.equal(
      result.callback,
      'released',
      JSON.stringify(await stores.claims.describe(`cb|${episodeId}`)),
    );
    assert.equal(receiver.received.length, 0);
    const claim = await stores.claims.describe(`cb|${episodeId}`);
    assert.equal(
      claim.state,
      CLAIM_AFTER[result.callback],
      `the cb| claim after a ${result.callback} branch`,
    );
    const view = await alice.get(`/api/v1/runs/${id}/episodes`);
    assert.equal(view.status, 200, view.text);
    const [episode] = view.body.episodes as {
      episodeId: string;
      families: Record<string, { state: string }>;
    }[];
    assert.equal(episode.episodeId, episodeId);
    assert.equal(episode.families.callback.state, CLAIM_AFTER[result.callback]);
    assert.equal(episode.families.push.state, CLAIM_AFTER[result.push] ?? 'absent');
  });
});

describe('family independence: a released push does not wait for the callback', function () {
  this.timeout(180_000);
  /**
   * Short settings: a sweep every 5 s, fast fan-out retries (released ~3 s after the run ends), and a callback
   * that keeps retrying for 30 s (a loaded machine has released the push 10 s late). The push must arrive while that callback still retries (a push that waited for
   * the callback to finish would come after it) and within one sweep interval (plus slack) of its release.
   */
  const SWEEP_SECONDS = 5;
  let push: PushService;
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    push = await startPushService();
    receiver = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_TIMEOUT_SECONDS: '2',
        CALLBACK_RETRY_SECONDS: '30',
        SWEEP_INTERVAL_SECONDS: String(SWEEP_SECONDS),
      },
      { push, fastRetries: true },
    );
    ({ config, stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
    await push?.close();
  });

  it('push released while the callback retries: the push arrives again before the callback is done', async () => {
    const subscription = push.endpoint('alice');
    assert.equal((await alice.post('/api/v1/notifications/push/subscriptions', subscription)).status, 201);
    // Every send of the first try fails: 5 fan-out attempts (~3 s of fast backoff), 3 sends each.
    push.failAlways(subscription, 500);
    receiver.answerAlways({ status: 503 });
    const launched = await alice.post('/api/v1/runs', { title: 'Apart', callback: { url: receiver.url } });
    const id: string = launched.body.id;
    const episodeId = `${id}:end`;
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });

    // The release: the last failed attempt, then the claim gone while the callback still retries.
    await waitUntil(
      'the release: 15 attempts, then the claim gone',
      async () =>
        push.attempts(subscription).length >= 15 && (await stores.claims.state(episodeId)) === 'absent',
      { timeoutMs: 90_000, seen: () => `${push.attempts(subscription).length} attempts` },
    );
    push.recover(subscription);
    assert.equal((await client.workflow.getHandle(episodeId).describe()).status.name, 'RUNNING');
    assert.equal(await stores.claims.state(`cb|${episodeId}`), 'pending', 'the callback is still retrying');

    // The order, not the seconds: the push (retried a sweep interval after its release) comes while the callback
    // still waits out its 30 s, so neither family waited for the other. The minute bounds a hang.
    await push.waitFor(1, subscription, 60_000);
    const callbackAtArrival = await stores.claims.state(`cb|${episodeId}`);
    const result = (await client.workflow.getHandle(episodeId).result()) as EpisodeResult;
    recordFixture(config, episodeId, 'episode-history-push-released-backoff.json');
    assert.equal(callbackAtArrival, 'pending', 'the push came while the callback still retried');
    assert.deepEqual(
      { push: result.push, callback: result.callback },
      { push: 'delivered', callback: 'gave_up' },
    );
    assert.equal(push.received(subscription).length, 1);
    assert.equal(await stores.claims.state(episodeId), 'delivered');
  });
});
