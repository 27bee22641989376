// A digest held for days in a busy team: every held push is a signal to the person's digest workflow, and its
// history must never reach Temporal's limit (the execution would be terminated, and what it held never sent).
// On a Temporal dev server of its own with the limit lowered to 600 events (it suggests continue-as-new at 300),
// 700 holds (more signals than the limit has events) go to one digest while the person is in do-not-disturb; then do-not-disturb ends and one digest of all
// 700 reaches the device, decrypted by the push service stand-in.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import { addToDigest } from '../client/digest';
import { digestWorkflowId, type DigestResult } from '../contract/workflows';
import type { PushPayload } from '../domain/push';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { startPushService, type PushService } from './support/pushService';
import { startServers, type ServerStack } from './support/servers';

const HOLDS = 700;

describe('a digest held for days keeps its history bounded', function () {
  this.timeout(300_000);
  let servers: ServerStack & { temporalAddress: string };
  let push: PushService;
  let stack: FamilyStack;

  before(async () => {
    servers = await startServers('digest-history', {
      temporal: true,
      external: false,
      temporalArgs: [
        '--dynamic-config-value=limit.historyCount.error=600',
        '--dynamic-config-value=limit.historyCount.suggestContinueAsNew=300',
      ],
    });
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        MONGO_URL: servers.mongoUrl,
        TEMPORAL_ADDRESS: servers.temporalAddress,
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { push },
    );
  });

  after(async () => {
    await stack?.stop();
    await push?.close();
    await servers?.stop();
  });

  it(`${HOLDS} holds during do-not-disturb: the digest continues as new while it waits, and sends all ${HOLDS} once reachable`, async () => {
    const { anonymous, client, config } = stack;
    const dee = anonymous.as('dee', 'busy');
    const device = push.endpoint('dee-phone');
    assert.equal((await dee.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    const until = new Date(Date.now() + 3600_000).toISOString();
    const prefs = await dee.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: until });
    assert.equal(prefs.status, 200, prefs.text);

    // What the push activity does for each held push, as a busy team's ends come: ten at a time, each ten once
    // the digest has taken the last (no workflow task pending), so the worker keeps up as it does with episodes.
    const handle = client.workflow.getHandle(digestWorkflowId('busy', 'dee'));
    const caughtUp = async (): Promise<void> => {
      for (;;) {
        const { raw } = await handle.describe();
        if (!raw.pendingWorkflowTask) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    for (let i = 0; i < HOLDS; i++) {
      await addToDigest(client, config.temporalTaskQueue, 'busy', 'dee', {
        episodeId: `run_busy_${i}:end`,
        runId: `run_busy_${i}`,
        kind: 'run_finished',
        title: `Job ${i}`,
        at: new Date().toISOString(),
        releaseAt: until,
        reason: 'quiet',
      });
      if (i % 10 === 9) await caughtUp();
    }
    const waiting = await handle.describe();
    assert.equal(waiting.status.name, 'RUNNING', 'the digest was not terminated');
    assert.notEqual(waiting.runId, waiting.raw.workflowExecutionInfo?.firstRunId, 'it continued as new');
    assert.equal(push.received(device).length, 0, 'nothing is pushed during do-not-disturb');

    // Do-not-disturb ends: the digest re-reads when it may go out, and sends everything it held.
    const cleared = await dee.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: null });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual((await handle.result()) as DigestResult, { sent: 1 });
    const payloads = push.received(device).map((r) => r.payload as PushPayload);
    assert.equal(payloads.length, 1);
    assert.equal(payloads[0].kind, 'digest');
    assert.equal(payloads[0].title, `${HOLDS} run updates while you were away`);
    assert.deepEqual(push.rejections(), []);
  });
});
