// A worker killed while a question's rung is on its way (a real process kill): the rung's activity heartbeats, so
// Temporal gives it to the next worker once its heartbeat stops, not after its start-to-close timeout; the rung
// still reaches its receiver. The rung is a webhook POST the receiver holds, so the kill lands mid-send.
import assert from 'node:assert/strict';
import { temporal } from '@temporalio/proto';
import webpush from 'web-push';
import { interactionWorkflowId } from '../contract/workflows';
import { interactionClaimKeys } from '../domain/interaction';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { recordFixture } from './support/harness';
import { processStackVars } from './support/processStack';
import { waitUntil } from './support/waitUntil';
import { startWorkerProcessStack, type WorkerProcessStack } from './support/workerProcessStack';

const { TimeoutType } = temporal.api.enums.v1;

describe('a worker killed mid-rung (a real process kill)', function () {
  this.timeout(240_000);
  let receiver: CallbackReceiver;
  let stack: WorkerProcessStack;

  before(async () => {
    receiver = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startWorkerProcessStack(
      processStackVars(
        { db: 't_rungkill', queue: 'rungkill' },
        {
          VAPID_PUBLIC_KEY: vapid.publicKey,
          VAPID_PRIVATE_KEY: vapid.privateKey,
          VAPID_SUBJECT: 'mailto:ops@flow.test',
          CALLBACK_ALLOW_PRIVATE: '1',
          CALLBACK_TIMEOUT_SECONDS: '30',
          STUDIO_URL: 'https://studio.flow.test',
          SWEEP_INTERVAL_SECONDS: '3600',
          PORT: '0',
        },
      ),
    );
  });

  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  it('the rung is sent again once its heartbeat stops, and settles delivered', async () => {
    const put = await adminOf(stack.anonymous, 'ann', 'acme').put('/api/v1/teams/current/escalation', {
      rungs: [{ afterSeconds: 1, to: 'team', via: 'webhook' }],
      webhookUrl: receiver.url,
    });
    assert.equal(put.status, 200, put.text);
    // The first POST is held past the kill; the next is answered at once.
    receiver.answer({ status: 204, delayMs: 60_000 });
    const alice = stack.anonymous.as('alice', 'acme');
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    assert.equal(created.status, 201, created.text);
    const paused = await alice.post(`/api/v1/runs/${created.body.id}/pause`, { prompt: 'Ship it?' });
    assert.equal(paused.status, 200, paused.text);
    const interactionId = paused.body.interactionId as string;

    await waitUntil('the rung on its way', () => receiver.received.length > 0, { intervalMs: 20 });
    await stack.worker.kill();
    await stack.worker.start();
    const rung = interactionClaimKeys.rung(interactionId, 0);
    await waitUntil('the rung settled', () => stack.stores.claims.wasDelivered(rung), { timeoutMs: 200_000 });
    assert.equal((await stack.stores.claims.describe(rung)).result, 'delivered');
    assert.equal(
      receiver.received.filter((r) => r.status === 204).length,
      2,
      'held at the kill, then sent again',
    );

    // Temporal writes the attempt that completed, with the failure of the one before it: the killed worker's.
    const { events } = await stack.client.workflow
      .getHandle(interactionWorkflowId(interactionId))
      .fetchHistory();
    const retried = (events ?? [])
      .map((e) => e.activityTaskStartedEventAttributes)
      .filter((started) => (started?.attempt ?? 1) > 1);
    assert.deepEqual(
      retried.map((started) => started?.lastFailure?.timeoutFailureInfo?.timeoutType),
      [TimeoutType.TIMEOUT_TYPE_HEARTBEAT],
      "the killed worker's attempt ended on its heartbeat",
    );

    // Answered: the close goes the same way, and the workflow ends. RECORD_FIXTURES=1 saves its history (the sends
    // heartbeating, one retried after the kill) as a replay fixture.
    const answered = await alice.post(
      `/api/v1/runs/${created.body.id}/interactions/${interactionId}/answer`,
      {
        answer: 'y',
      },
    );
    assert.equal(answered.status, 200, answered.text);
    const interaction = stack.client.workflow.getHandle(interactionWorkflowId(interactionId));
    assert.deepEqual(await interaction.result(), { rungsSent: [0], snoozesSent: 0, closed: true });
    recordFixture(
      stack.config,
      interactionWorkflowId(interactionId),
      'interaction-history-sends-heartbeat.json',
    );
  });
});
