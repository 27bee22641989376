// Rotating a run's callback secret, on the real servers: receivers verifying with the npm standardwebhooks
// library, one holding the old secret and one the new, both verify every callback sent during the overlap (a test
// ping, the episode's callback, a redelivery); after it only the new one does, and the header has one signature.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import type { Stores } from '../store';
import type { EpisodeResult } from '../contract/workflows';
import { adminOf } from './support/admin';
import { CallbackReceiver, type ReceivedCallback } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';

/** Long enough for a ping, a run's end and a redelivery on a busy machine; short enough to wait out. */
const OVERLAP_SECONDS = 15;

describe('callback secret rotation', function () {
  this.timeout(120_000);
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_RETRY_SECONDS: '1',
      CALLBACK_SECRET_OVERLAP_SECONDS: String(OVERLAP_SECONDS),
      CALLBACK_ROTATE_RATE_LIMIT: '3',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
  });

  const rotate = (as: ApiClient, runId: string) => as.post(`/api/v1/runs/${runId}/callback/rotate-secret`);
  const redeliver = async (runId: string) => {
    const episodeId = `${runId}:end`;
    const res = await alice.post(
      `/api/v1/runs/${runId}/episodes/${encodeURIComponent(episodeId)}/callback/redeliver`,
    );
    assert.equal(res.status, 202, res.text);
    await client.workflow.getHandle(`cb-redeliver|${episodeId}`).result();
  };
  const signatures = (call: ReceivedCallback) => String(call.headers['webhook-signature']).split(' ');
  const verify = (secret: string, call: ReceivedCallback) =>
    new Webhook(secret).verify(call.body, call.headers as Record<string, string>);

  async function launch(): Promise<{ id: string; secret: string }> {
    const res = await alice.post('/api/v1/runs', {
      title: 'Nightly import',
      callback: { url: receiver.url },
    });
    assert.equal(res.status, 201, res.text);
    return { id: res.body.id, secret: res.body.callback.secret };
  }

  it('for the overlap every callback carries both signatures, each verifying alone; then only the new one', async () => {
    const { id, secret: oldSecret } = await launch();
    const rotated = await rotate(alice, id);
    assert.equal(rotated.status, 200, rotated.text);
    assert.deepEqual(Object.keys(rotated.body), ['secret']);
    const newSecret = rotated.body.secret as string;
    assert.match(newSecret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.notEqual(newSecret, oldSecret);
    const stored = (await stores.runs.getById(id))!.callback!;
    assert.equal(stored.secret, newSecret);
    assert.equal(stored.previousSecret?.secret, oldSecret);
    const overlapEnds = stored.previousSecret!.rotatedAt.getTime() + OVERLAP_SECONDS * 1000;

    // Neither secret is ever shown again.
    for (const path of [`/api/v1/runs/${id}`, '/api/v1/runs', `/api/v1/runs/${id}/episodes`]) {
      const shown = await alice.get(path);
      assert.equal(shown.status, 200, path);
      for (const secret of [oldSecret, newSecret, oldSecret.slice(6), newSecret.slice(6)])
        assert.ok(!shown.text.includes(secret), `${path} shows a secret`);
      assert.ok(!shown.text.includes('previousSecret'), path);
    }

    // During the overlap: a test ping, the run's end, a redelivery of it.
    const ping = await alice.post(`/api/v1/runs/${id}/callback/test`);
    assert.deepEqual(ping.body, { delivered: true, status: 204 });
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'Imported 1,204 rows.' });
    const episode = (await client.workflow.getHandle(`${id}:end`).result()) as EpisodeResult;
    assert.equal(episode.callback, 'delivered');
    await redeliver(id);
    const during = await receiver.waitFor(3);
    assert.deepEqual(
      during.map((call) => JSON.parse(call.body).type),
      ['run.test', 'run.finished', 'run.finished'],
    );
    // Each call is judged by when it was signed (webhook-timestamp, whole seconds), not by when this machine got
    // round to it: signed in the overlap, both signatures; signed after it, the new one only. The ping is signed
    // while the rotation's answer is fresh, so at least that one falls in the overlap.
    const signedAtMs = (call: (typeof during)[number]) => Number(call.headers['webhook-timestamp']) * 1000;
    assert.ok(signedAtMs(during[0]) < overlapEnds - 1000, 'the test ping was signed in the overlap');
    for (const call of during) {
      assert.ok(signatures(call).every((s) => s.startsWith('v1,')));
      assert.deepEqual(verify(newSecret, call), JSON.parse(call.body), 'a receiver holding the new secret');
      if (signedAtMs(call) >= overlapEnds) {
        assert.equal(signatures(call).length, 1, String(call.headers['webhook-signature']));
      } else if (signedAtMs(call) < overlapEnds - 1000) {
        assert.equal(signatures(call).length, 2, String(call.headers['webhook-signature']));
        assert.deepEqual(verify(oldSecret, call), JSON.parse(call.body), 'a receiver holding the old secret');
      }
    }

    // After the overlap: a test ping and another redelivery carry the new secret's signature only.
    while (Date.now() <= overlapEnds)
      await new Promise((resolve) => setTimeout(resolve, overlapEnds - Date.now() + 1));
    receiver.received.length = 0;
    const later = await alice.post(`/api/v1/runs/${id}/callback/test`);
    assert.deepEqual(later.body, { delivered: true, status: 204 });
    await redeliver(id);
    const after = await receiver.waitFor(2);
    for (const call of after) {
      assert.equal(signatures(call).length, 1, String(call.headers['webhook-signature']));
      assert.deepEqual(verify(newSecret, call), JSON.parse(call.body));
      assert.throws(() => verify(oldSecret, call), WebhookVerificationError);
    }
  });

  it("another team's run is 404, a run without a callback 409, past the per-run limit 429: each rotates nothing", async () => {
    const { id, secret: first } = await launch();
    const stranger = await rotate(alice.as('eve', 'other'), id);
    assert.equal(stranger.status, 404);
    const plain = (await alice.post('/api/v1/runs', {})).body.id as string;
    const none = await rotate(alice, plain);
    assert.equal(none.status, 409);
    assert.equal(none.body.error, 'the run has no callback URL');
    assert.equal((await stores.runs.getById(id))!.callback!.secret, first);

    // A second rotation ends the first one's overlap: the secret before it no longer verifies.
    const second = (await rotate(alice, id)).body.secret as string;
    const third = (await rotate(alice, id)).body.secret as string;
    await alice.post(`/api/v1/runs/${id}/callback/test`);
    const [ping] = await receiver.waitFor(1);
    assert.equal(signatures(ping).length, 2);
    verify(third, ping);
    verify(second, ping);
    assert.throws(() => verify(first, ping), WebhookVerificationError);

    // Three rotations per run per window here (CALLBACK_ROTATE_RATE_LIMIT): the fourth is refused.
    assert.equal((await rotate(alice, id)).status, 200);
    const limited = await rotate(alice, id);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal((await stores.runs.getById(id))!.callback!.previousSecret?.secret, third);
  });

  it("only the run's owner or a team admin rotates: a teammate is 403 and learns no secret", async () => {
    const { id, secret } = await launch();
    const teammate = await rotate(alice.as('bob', 'acme'), id);
    assert.equal(teammate.status, 403, teammate.text);
    assert.equal(teammate.body.secret, undefined);
    assert.equal((await stores.runs.getById(id))!.callback!.secret, secret);
    const admin = await rotate(adminOf(stack.anonymous, 'dana', 'acme'), id);
    assert.equal(admin.status, 200, admin.text);
    assert.notEqual((await stores.runs.getById(id))!.callback!.secret, secret);
  });

  it('rotations of one run at the same moment: exactly one wins, and its secret is the one kept', async () => {
    const { id, secret } = await launch();
    const at = new Date();
    const next = Array.from({ length: 20 }, (_, i) => `whsec_race${i}`);
    const won = await Promise.all(next.map((n) => stores.runs.rotateCallbackSecret(id, secret, n, at)));
    const winners = next.filter((_, i) => won[i]);
    assert.equal(winners.length, 1, `winners: ${winners.join(', ')}`);
    const callback = (await stores.runs.getById(id))!.callback!;
    assert.equal(callback.secret, winners[0]);
    assert.equal(callback.previousSecret?.secret, secret);
  });
});
