// A fan-out that reached the owner but not a teammate (the teammate's push service down through every attempt of
// the fan-out): the episode is confirmed on the first success, as the seed says, and the teammate is still owed
// the push. The episode tries the teammate again on a durable timer once its push service is back.
// Found by the week drill (test/drill/week.ts): an end push missing for two teammates after an outage.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import { FAN_OUT_ATTEMPTS } from '../domain/push';
import type { EpisodeResult } from '../contract/workflows';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { saveHistory } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { waitUntil } from './support/waitUntil';

describe('a push that missed some of its recipients', function () {
  this.timeout(240_000);
  let push: PushService;
  let stack: FamilyStack;

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        // The retry of the missed recipients comes one sweep interval after the fan-out.
        SWEEP_INTERVAL_SECONDS: '2',
      },
      { push },
    );
  });

  after(async () => {
    await stack?.stop();
    await push?.close();
  });

  it("reaches the teammate whose push service was down through the fan-out, once it is back; the owner's push is not sent again", async () => {
    const { anonymous, client, config, stores } = stack;
    const ana = anonymous.as('ana', 'partial');
    const ben = anonymous.as('ben', 'partial');
    const anaPhone = push.endpoint('ana-phone');
    const benPhone = push.endpoint('ben-phone');
    assert.equal((await ana.post('/api/v1/notifications/push/subscriptions', anaPhone)).status, 201);
    assert.equal((await ben.post('/api/v1/notifications/push/subscriptions', benPhone)).status, 201);
    assert.equal((await ben.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    push.failAlways(benPhone, 503);

    const runId = (await ana.post('/api/v1/runs', { title: 'Partial' })).body.id as string;
    assert.equal((await ana.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
    const episodeId = `${runId}:end`;
    await push.waitFor(1, anaPhone, 60_000);
    // Every attempt of the fan-out failed for ben; the episode is confirmed on ana's push.
    const confirmed = async () =>
      push.attempts(benPhone).length >= FAN_OUT_ATTEMPTS &&
      (await stores.claims.state(episodeId)) === 'delivered';
    await waitUntil('every attempt failed for ben and the episode confirmed on ana', confirmed, {
      timeoutMs: 180_000,
    });

    push.recover(benPhone);
    const result = (await client.workflow.getHandle(episodeId).result()) as EpisodeResult;
    if (process.env.RECORD_PARTIAL_HISTORY)
      saveHistory(config, episodeId, process.env.RECORD_PARTIAL_HISTORY);
    assert.equal(result.push, 'delivered');
    assert.equal(push.received(benPhone).length, 1, 'ben got the push once his push service was back');
    assert.equal(push.received(anaPhone).length, 1, 'ana got it once');
    assert.deepEqual(push.rejections(), []);
  });
  it('a teammate reached on one device is never held for a digest by a later try, whatever their prefs became', async () => {
    const { anonymous, client, stores } = stack;
    const ana = anonymous.as('ana', 'partial-dnd');
    const ben = anonymous.as('ben', 'partial-dnd');
    const anaPhone = push.endpoint('dnd-ana-phone');
    const benLaptop = push.endpoint('dnd-ben-laptop');
    const benPhone = push.endpoint('dnd-ben-phone');
    for (const [who, device] of [
      [ana, anaPhone],
      [ben, benLaptop],
      [ben, benPhone],
    ] as const)
      assert.equal((await who.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    assert.equal((await ben.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    push.failAlways(benPhone, 503);

    const runId = (await ana.post('/api/v1/runs', { title: 'Partial DND' })).body.id as string;
    assert.equal((await ana.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
    const episodeId = `${runId}:end`;
    await push.waitFor(1, benLaptop, 60_000);
    // Ben has it on his laptop; then he turns do-not-disturb on, while the fan-out still tries his phone.
    const dnd = new Date(Date.now() + 3600_000).toISOString();
    assert.equal(
      (await ben.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: dnd })).status,
      200,
    );
    await waitUntil(
      'the episode confirmed',
      async () => (await stores.claims.state(episodeId)) === 'delivered',
      {
        timeoutMs: 180_000,
      },
    );
    assert.ok(push.attempts(benPhone).length > 0, "ben's phone was tried");
    push.recover(benPhone);
    const result = (await client.workflow.getHandle(episodeId).result()) as EpisodeResult;
    assert.equal(result.push, 'delivered');
    assert.deepEqual(
      [...(await stores.pushHolds.heldOf(episodeId, ['ben'])).keys()],
      [],
      'no digest entry for ben',
    );
    assert.equal(push.received(benLaptop).length, 1);
    assert.equal(
      push.received(benPhone).length,
      0,
      'not pushed during his do-not-disturb: he has it already',
    );
    assert.equal(push.received(anaPhone).length, 1);
  });
});
