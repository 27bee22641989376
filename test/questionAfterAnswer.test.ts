// A question's own push never outlives its answer: a device the question reaches after the answer was taken would
// hold a question nobody waits on, whose actions answer 409 / 410, and the answer's close (sent to the devices
// reached when it ran) would never replace it. Two ways there: a teammate whose push service was down when the
// question went out (the episode tries the people it missed again, later), and a send still in flight while the
// close ran. Real API, worker, Temporal, FerretDB, and the loopback push service.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import type { EpisodeResult } from '../contract/workflows';
import { interactionClaimKeys } from '../domain/interaction';
import { inputEpisodeId } from '../domain/outcome';
import { FAN_OUT_ATTEMPTS, type PushPayload } from '../domain/push';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';
import { startPushService, type PushService, type SubscriptionJSON } from './support/pushService';
import { waitUntil } from './support/waitUntil';

describe("a question's push after its answer", function () {
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
        // The people a fan-out missed are tried again one sweep interval later.
        SWEEP_INTERVAL_SECONDS: '2',
      },
      // A withheld answer must not time the send out: the case is a send in flight, not a lost one.
      { push, pushTimeoutMs: 120_000 },
    );
  });

  after(async () => {
    await stack?.stop();
    await push?.close();
  });

  /** An owner and a teammate with team-wide scope in a team of their own, one device each. */
  async function team(name: string) {
    const ana = stack.anonymous.as('ana', name);
    const ben = stack.anonymous.as('ben', name);
    const anaPhone = push.endpoint(`${name}-ana`);
    const benPhone = push.endpoint(`${name}-ben`);
    assert.equal((await ana.post('/api/v1/notifications/push/subscriptions', anaPhone)).status, 201);
    assert.equal((await ben.post('/api/v1/notifications/push/subscriptions', benPhone)).status, 201);
    assert.equal((await ben.put('/api/v1/notifications/prefs', { scope: 'team' })).status, 200);
    return { ana, anaPhone, benPhone };
  }

  async function pause(owner: ApiClient) {
    const runId = (await owner.post('/api/v1/runs', { title: 'Ship' })).body.id as string;
    const paused = await owner.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
    assert.equal(paused.status, 200, paused.text);
    const interactionId = paused.body.interactionId as string;
    return { runId, interactionId, episodeId: inputEpisodeId(runId, interactionId) };
  }

  async function answer(owner: ApiClient, runId: string, interactionId: string) {
    const res = await owner.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'yes',
    });
    assert.equal(res.status, 200, res.text);
    await waitUntil('the close settled', () =>
      stack.stores.claims.wasDelivered(interactionClaimKeys.answered(interactionId)),
    );
  }

  const kinds = (device: SubscriptionJSON, runId: string) =>
    push
      .received(device)
      .map((r) => r.payload as PushPayload)
      .filter((p) => p.runId === runId)
      .map((p) => p.kind);

  it('a teammate whose push service was down when the question went out is not asked once it was answered', async () => {
    const { ana, anaPhone, benPhone } = await team('after-answer-missed');
    push.failAlways(benPhone, 503);
    const { runId, interactionId, episodeId } = await pause(ana);
    await push.waitFor(1, anaPhone, 60_000);
    await waitUntil(
      'every attempt of the fan-out failed for ben, and the episode confirmed on ana',
      async () =>
        push.attempts(benPhone).length >= FAN_OUT_ATTEMPTS &&
        (await stack.stores.claims.state(episodeId)) === 'delivered',
      { timeoutMs: 180_000 },
    );
    await answer(ana, runId, interactionId);
    assert.deepEqual(kinds(anaPhone, runId), ['human_input_requested', 'answered']);

    push.recover(benPhone);
    // The episode's retry of the people it missed comes one sweep interval later; it ends the workflow.
    const result = (await stack.client.workflow.getHandle(episodeId).result()) as EpisodeResult;
    assert.equal(result.push, 'delivered');
    assert.deepEqual(kinds(benPhone, runId), [], 'ben is not asked a question already answered');
    assert.deepEqual(kinds(anaPhone, runId), ['human_input_requested', 'answered']);
  });

  it('a question still on its way while the close ran is closed once it arrives', async () => {
    const { ana, anaPhone, benPhone } = await team('after-answer-in-flight');
    push.withholdAnswers(benPhone);
    const { runId, interactionId, episodeId } = await pause(ana);
    await push.waitFor(1, anaPhone, 60_000);
    await push.waitFor(1, benPhone, 60_000); // taken, its 201 withheld: the send is in flight
    await answer(ana, runId, interactionId);
    assert.deepEqual(
      kinds(benPhone, runId),
      ['human_input_requested'],
      'the close missed ben: not yet reached',
    );

    push.releaseAnswers(benPhone);
    await waitUntil('ben has the close', () => kinds(benPhone, runId).includes('answered'), {
      timeoutMs: 60_000,
    });
    const [question, close, ...more] = push
      .received(benPhone)
      .map((r) => r.payload as PushPayload)
      .filter((p) => p.runId === runId);
    assert.equal(more.length, 0);
    assert.equal(close.kind, 'answered');
    assert.equal(close.tag, question.tag, 'the close replaces the question');
    assert.deepEqual(kinds(anaPhone, runId), ['human_input_requested', 'answered'], 'ana closed once');
    const result = (await stack.client.workflow.getHandle(episodeId).result()) as EpisodeResult;
    assert.equal(result.push, 'delivered');
  });
});
