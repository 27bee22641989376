// An endpoint's recover on the real servers sends only what the endpoint did not get. The attempt log is written
// best effort (a store restarting as the receiver answers loses the row), so a delivery is known by its settled
// claim as well: one delivered whose row was lost is not sent again.
import assert from 'node:assert/strict';
import { endpointDeliveryKey } from '../domain/teamEvents';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { waitUntil } from './support/waitUntil';

describe('team endpoints: a recover', function () {
  this.timeout(120_000);
  let stack: FamilyStack;
  let receiver: CallbackReceiver;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_RETRY_SECONDS: '1,1',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  it('does not send again an event delivered whose attempt row was lost', async () => {
    const since = new Date();
    const admin = adminOf(stack.anonymous, 'ada', 'acme');
    const created = await admin.post('/api/v1/endpoints', {
      url: receiver.url,
      eventTypes: ['run.finished'],
    });
    assert.equal(created.status, 201, created.text);
    const endpointId = created.body.id as string;
    const alice = stack.anonymous.as('alice', 'acme');
    const run = await alice.post('/api/v1/runs', { title: 'delivered, row lost' });
    assert.equal(run.status, 201, run.text);
    assert.equal(
      (await alice.post(`/api/v1/runs/${run.body.id}/complete`, { finalAnswer: 'ok' })).status,
      200,
    );
    const eventId = `ev:${run.body.id}:end`;
    await waitUntil('delivered', () => receiver.received.length > 0);
    const delivery = await stack.client.workflow.getHandle(`team-event|${eventId}`).result();
    assert.equal(delivery.deliveries[endpointId], 'delivered');
    assert.equal(receiver.received.length, 1);

    const lost = await stack.mongo.db
      .collection('endpoint_attempts')
      .deleteMany({ episodeId: endpointDeliveryKey(eventId, endpointId) });
    assert.equal(lost.deletedCount, 1);
    const recover = await admin.post(`/api/v1/endpoints/${endpointId}/recover`, {
      since: since.toISOString(),
    });
    assert.equal(recover.status, 202, recover.text);
    const result = await stack.client.workflow.getHandle(recover.body.id).result();
    assert.deepEqual(result, { found: 0, delivered: 0, failed: 0 });
    assert.equal(receiver.received.length, 1, 'sent once');
  });
});
