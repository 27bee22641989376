// Replay: a recorded episode history (a failed run whose push, callback and operator branches all delivered)
// must replay with the current workflow code, so a change that breaks running episodes fails here first.
// RECORD_EPISODE_HISTORY=1 re-records the fixture (after an intended, versioned change).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import webpush from 'web-push';
import { pushSenderFor } from '../net/pushSender';
import { WORKFLOWS_PATH } from '../worker';
import { CallbackReceiver } from './support/callbackReceiver';
import { openStores, saveHistory, startTestApi, startTestWorker, temporalClient } from './support/harness';
import { startPushService } from './support/pushService';
import { testConfig } from './support/stack';

const FIXTURE = path.resolve(__dirname, 'fixtures/episode-history.json');

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
    saveHistory(config, episodeId, FIXTURE);
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
  it('a recorded episode history (all three families delivered) replays with the current code', async () => {
    if (process.env.RECORD_EPISODE_HISTORY === '1') await recordEpisodeHistory();
    const history: unknown = JSON.parse(readFileSync(FIXTURE, 'utf8'));
    await Worker.runReplayHistory({ workflowsPath: WORKFLOWS_PATH }, history);
  });
});
