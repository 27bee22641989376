// Replay: recorded episode histories (a failed run whose push, callback and operator branches all delivered)
// must replay with the current workflow code, so a change that breaks running episodes fails here first.
// One fixture per workflow version still in the wild: before and after the quick calls became local activities
// (LOCAL_QUICK_PATCH), and since that choice is made once per execution (QUICK_DECIDED_AT_START_PATCH). RECORD_EPISODE_HISTORY=1 re-records the current one (after an intended, versioned change).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import webpush from 'web-push';
import { pushSenderFor } from '../delivery/push/sender';
import { CallbackReceiver } from './support/callbackReceiver';
import { openStores, saveHistory, startTestApi, startTestWorker, temporalClient } from './support/harness';
import { startPushService } from './support/pushService';
import { testConfig } from './support/stack';
import { workflowBundle } from './support/workflowBundle';

const FIXTURES = {
  'scheduled quick calls (before LOCAL_QUICK_PATCH)': 'fixtures/episode-history.json',
  'local quick calls, episode record written first': 'fixtures/episode-history-local-record-first.json',
  'local quick calls': 'fixtures/episode-history-local.json',
  'operator alert in its own retrying workflow': 'fixtures/episode-history-ops-workflow.json',
  'quick calls chosen once at the start (current)': 'fixtures/episode-history-quick-decided-at-start.json',
};

/** Histories of other paths, each recorded before the patched() change that guards the path. */
const PATH_FIXTURES = {
  'a callback branch that threw, before CALLBACK_RELEASES_ON_THROW':
    'fixtures/episode-history-callback-threw.json',
  'a push released while the callback retried, before RELEASED_PUSH_RETRIED_PATCH':
    'fixtures/episode-history-push-released-callback-retrying.json',
  'a push released while the callback retried, its retries backing off (RELEASED_PUSH_BACKOFF_PATCH)':
    'fixtures/episode-history-push-released-backoff.json',
  // Started by a worker on eb9b063 (quick calls scheduled, no patch) and finished by one that chose per call
  // (LOCAL_QUICK_PATCH): the callback's retry wait spanned the deploy, so the marker and a local activity
  // come after scheduled quick calls in one history.
  'started before LOCAL_QUICK_PATCH and continued after it':
    'fixtures/episode-history-started-before-local-quick.json',
  'a callback that gave up (503 on both attempts), before CALLBACK_EXHAUSTED_ALERT_PATCH':
    'fixtures/episode-history-callback-gave-up.json',
  'a callback that gave up and alerted the operator (CALLBACK_EXHAUSTED_ALERT_PATCH)':
    'fixtures/episode-history-callback-gave-up-alerted.json',
  'a redelivery of a callback that gave up (callbackRedeliverWorkflow)':
    'fixtures/callback-redeliver-history.json',
  'a redelivery that failed again (503), before REDELIVER_ANY_SETTLED_PATCH':
    'fixtures/callback-redeliver-failed-history.json',
  'a failed redelivery of a delivered callback (REDELIVER_ANY_SETTLED_PATCH)':
    'fixtures/callback-redeliver-delivered-claim-history.json',
  // Its options carry callbackRetryJitter: each wait drawn from the workflow's seeded Math.random.
  'a callback on the jittered schedule: 500, 503 with Retry-After, a timeout, given up':
    'fixtures/episode-history-callback-jittered.json',
};
const CURRENT = path.resolve(__dirname, FIXTURES['quick calls chosen once at the start (current)']);

async function recordEpisodeHistory(): Promise<void> {
  const push = await startPushService();
  const receiver = await CallbackReceiver.start();
  const vapid = webpush.generateVAPIDKeys();
  const config = testConfig({
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    PUSH_ALLOW_PRIVATE: '1',
    CALLBACK_ALLOW_PRIVATE: '1',
    OPS_ALERT_WEBHOOK_URL: receiver.url,
  });
  const { mongo, stores } = await openStores(config);
  const worker = await startTestWorker(config, stores, {
    pushSender: pushSenderFor(config, { ca: push.ca }),
  });
  const { api, client: anonymous } = await startTestApi(config);
  const { client, close } = await temporalClient(config);
  try {
    const alice = anonymous.as('alice', 'acme');
    await alice.post('/api/v1/notifications/push/subscriptions', push.endpoint('alice'));
    const run = await alice.post('/api/v1/runs', { title: 'Recorded', callback: { url: receiver.url } });
    await alice.post(`/api/v1/runs/${run.body.id}/fail`, { error: { code: 'oom', message: 'killed' } });
    const episodeId = `${run.body.id}:end`;
    const result = await client.workflow.getHandle(episodeId).result();
    assert.deepEqual(
      { push: result.push, callback: result.callback, ops: result.ops },
      { push: 'delivered', callback: 'delivered', ops: 'delivered' },
    );
    saveHistory(config, episodeId, CURRENT);
  } finally {
    await api.close();
    await worker.stop();
    await close();
    await mongo.client.close();
    await push.close();
    await receiver.close();
  }
}

describe('workflow replay', () => {
  before(async function () {
    if (process.env.RECORD_EPISODE_HISTORY !== '1') return;
    this.timeout(120_000);
    await recordEpisodeHistory();
  });

  for (const [version, fixture] of Object.entries(FIXTURES)) {
    it(`a recorded episode history (all three families delivered, ${version}) replays with the current code`, async () => {
      const history: unknown = JSON.parse(readFileSync(path.resolve(__dirname, fixture), 'utf8'));
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history);
    });
  }
  for (const [name, fixture] of Object.entries(PATH_FIXTURES)) {
    it(`a recorded episode history (${name}) replays with the current code`, async () => {
      const history: unknown = JSON.parse(readFileSync(path.resolve(__dirname, fixture), 'utf8'));
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history);
    });
  }
});
