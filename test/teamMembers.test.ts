// Removing a member from a team (DELETE /api/v1/teams/current/members/:userId, team admins): identity comes from
// tokens, and what a person wrote under a team (a team-wide opt-in, a device registered there, pushes held for a
// digest) outlives their membership; the removal ends each, and the action tokens they were pushed before it stop
// answering. Real API, worker, Temporal, FerretDB and the loopback push service.
import assert from 'node:assert/strict';
import type { PushPayload } from '../domain/push';
import { hashActionToken } from '../store/actionTokens';
import { adminOf } from './support/admin';
import type { ApiClient } from './support/harness';
import type { PushService, SubscriptionJSON } from './support/pushService';
import { startPushStack, subscribeDevices, subscribeTeam, type PushStack } from './support/pushStack';
import { waitUntil } from './support/waitUntil';

describe('removing a team member', function () {
  this.timeout(120_000);
  let push: PushService;
  let stack: PushStack;
  let alice: ApiClient;
  let bob: ApiClient;
  let admin: ApiClient;
  let devices: Record<string, SubscriptionJSON[]>;

  before(async () => {
    stack = await startPushStack();
    push = stack.push;
    ({ alice, bob, devices } = await subscribeTeam(stack));
    admin = adminOf(stack.anonymous, 'dana', 'acme');
  });
  after(() => stack?.stop());

  async function paused(): Promise<{ runId: string; interactionId: string }> {
    const runId = (await alice.post('/api/v1/runs', { title: 'Deploy' })).body.id as string;
    const res = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Deploy?',
      choices: [{ id: 'approve', label: 'Approve' }],
    });
    assert.equal(res.status, 200, res.text);
    return { runId, interactionId: res.body.interactionId as string };
  }
  const approveToken = (device: SubscriptionJSON, runId: string): string => {
    const payload = push
      .received(device)
      .map((r) => r.payload as PushPayload)
      .find((p) => p.runId === runId);
    const token = payload?.actions?.find((a) => a.action === 'approve')?.token;
    assert.ok(token, `an approve token for ${runId}`);
    return token;
  };

  it('only a team admin removes; the removed person is pushed nothing of the team and their earlier tokens answer nothing', async () => {
    const before = await paused();
    await push.waitFor(1, devices.bob[0]);
    const bobsToken = approveToken(devices.bob[0], before.runId);

    assert.equal((await alice.delete('/api/v1/teams/current/members/bob')).status, 403);
    const removed = await admin.delete('/api/v1/teams/current/members/bob');
    assert.equal(removed.status, 200, removed.text);
    assert.deepEqual(removed.body, { userId: 'bob', teamWide: true, devices: 1, held: 0 });

    // A token pushed to him while he was a member answers nothing now.
    const refused = await stack.anonymous.post('/api/v1/interactions/actions', { token: bobsToken });
    assert.equal(refused.status, 403, refused.text);
    assert.equal((await alice.get(`/api/v1/runs/${before.runId}`)).body.status, 'paused');

    // The team's next question reaches its owner, and nobody else.
    push.reset();
    const after = await paused();
    for (const device of devices.alice) await push.waitFor(1, device);
    const episode = (await alice.get(`/api/v1/runs/${after.runId}/episodes`)).body.episodes[0];
    assert.deepEqual(
      [...new Set(episode.pushDevices.map((d: { userId: string }) => d.userId))],
      ['alice'],
      'pushed to alice only',
    );
    assert.deepEqual(push.received(devices.bob[0]), []);
    // Removing him again changes nothing, and says so.
    const again = await admin.delete('/api/v1/teams/current/members/bob');
    assert.deepEqual(again.body, { userId: 'bob', teamWide: false, devices: 0, held: 0 });
    assert.ok(bob);
  });

  it('an answer taken from a notification before the removal, its request cut short, is still finished by its token', async () => {
    await stack.anonymous
      .as('erin', 'acme')
      .put('/api/v1/notifications/prefs', { scope: 'team' })
      .then((res) => assert.equal(res.status, 200, res.text));
    const erinDevices = await subscribeDevices(stack, { erin: 1 });
    const { runId } = await paused();
    await push.waitFor(1, erinDevices.erin[0]);
    const token = approveToken(erinDevices.erin[0], runId);
    // The request took the token and died before storing the answer (the token left taken, untold).
    const taken = await stack.mongo.db
      .collection('action_tokens')
      .updateOne({ _id: hashActionToken(token) as never }, { $set: { usedAt: new Date(), untold: true } });
    assert.equal(taken.modifiedCount, 1);
    assert.equal((await admin.delete('/api/v1/teams/current/members/erin')).status, 200);
    const finished = await stack.anonymous.post('/api/v1/interactions/actions', { token });
    assert.equal(finished.status, 200, finished.text);
    assert.equal((await alice.get(`/api/v1/runs/${runId}`)).body.status, 'running');
  });

  it('what was held for their digest in the team is settled, never sent', async () => {
    const carolDevices = await subscribeDevices(stack, { carol: 1 });
    const carol = stack.anonymous.as('carol', 'acme');
    const until = new Date(Date.now() + 3600_000).toISOString();
    const prefs = await carol.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: until });
    assert.equal(prefs.status, 200, prefs.text);
    const runId = (await alice.post('/api/v1/runs', { title: 'Nightly' })).body.id as string;
    assert.equal((await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'done' })).status, 200);
    await waitUntil('the end held for carol', async () =>
      (await stack.stores.pushHolds.listForRun(runId)).some((row) => row.userId === 'carol'),
    );

    const removed = await admin.delete('/api/v1/teams/current/members/carol');
    assert.deepEqual(removed.body, { userId: 'carol', teamWide: true, devices: 1, held: 1 });
    const [row] = (await stack.stores.pushHolds.listForRun(runId)).filter((r) => r.userId === 'carol');
    assert.ok(row.optedOutAt && row.owedAt === undefined, JSON.stringify(row));
    assert.deepEqual(push.received(carolDevices.carol[0]), []);
  });
});
