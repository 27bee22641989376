// Receipts: every push carries each device its own receipt token, and POST /api/v1/notifications/receipts records what
// the service worker saw (shown, clicked, the action taken) without a session, once each. Real API, worker, Temporal,
// FerretDB, and the loopback push service that decrypts what it receives (so the tokens can be read).
import assert from 'node:assert/strict';
import { Registry } from 'prom-client';
import type { PushDeviceView } from '../api/episodesView';
import type { PushPayload } from '../domain/push';
import { createMetrics, type Metrics } from '../platform/metrics';
import { hashActionToken } from '../store/actionTokens';
import type { PushReceiptRow } from '../store/push/receipts';
import type { ApiClient } from './support/harness';
import type { PushService, SubscriptionJSON } from './support/pushService';
import { startPushStack, subscribeTeam, type PushStack } from './support/pushStack';
import { waitUntil } from './support/waitUntil';

describe('notification receipts', function () {
  let push: PushService;
  let stack: PushStack;
  let metrics: Metrics;
  let anonymous: ApiClient;
  let alice: ApiClient; // owner of the runs, two devices
  let devices: Record<string, SubscriptionJSON[]>; // bob: same team, team-wide scope, one device
  const logged: string[] = [];

  before(async () => {
    metrics = createMetrics(new Registry(), { processMetrics: false });
    stack = await startPushStack({ logged, apiMetrics: metrics });
    ({ push, anonymous } = stack);
    ({ alice, devices } = await subscribeTeam(stack));
  });

  after(() => stack?.stop());

  beforeEach(() => push.reset());

  const receiptRows = () => stack.mongo.db.collection<PushReceiptRow>('push_receipts');
  const report = (body: unknown) => anonymous.post('/api/v1/notifications/receipts', body);

  /** A run paused with a choice, once every device has its push; each device's payload. */
  async function paused(): Promise<{ runId: string; interactionId: string; payloads: PushPayload[] }> {
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    const pause = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Ship it?',
      choices: [{ id: 'approve', label: 'Approve' }],
    });
    assert.equal(pause.status, 200, pause.text);
    // This run's question on each device (an earlier test's close may land after the reset).
    const questionOf = (device: SubscriptionJSON) =>
      push
        .received(device)
        .map((r) => r.payload as PushPayload)
        .find((p) => p.runId === runId && p.kind === 'human_input_requested');
    const payloads: PushPayload[] = [];
    for (const device of [...devices.alice, ...devices.bob])
      payloads.push(await waitUntil("this run's question on the device", () => questionOf(device)));
    return { runId, interactionId: pause.body.interactionId as string, payloads };
  }

  const devicesOf = async (runId: string): Promise<PushDeviceView[]> => {
    const res = await alice.get(`/api/v1/runs/${runId}/episodes`);
    assert.equal(res.status, 200, res.text);
    const input = (res.body.episodes as { episodeId: string; pushDevices: PushDeviceView[] }[]).find((e) =>
      e.episodeId.includes(':input:'),
    );
    assert.ok(input, 'the pause episode');
    return input.pushDevices;
  };

  const histogramCount = async (name: string): Promise<number> => {
    const text = await metrics.registry.metrics();
    const line = text.split('\n').find((l) => l.startsWith(`${name}_count`));
    return Number(line?.split(' ')[1] ?? NaN);
  };

  it('every device gets its own receipt token, stored hashed with its episode, person and device', async () => {
    const { runId, payloads } = await paused();
    const tokens = payloads.map((p) => p.receipt);
    for (const token of tokens) assert.match(token ?? '', /^[A-Za-z0-9_-]{43}$/);
    assert.equal(new Set(tokens).size, 3, 'one token per device, even for one person');
    const rows = await receiptRows().find({ runId }).toArray();
    assert.deepEqual(rows.map((r) => r._id).sort(), tokens.map((t) => hashActionToken(t!)).sort());
    assert.ok(!JSON.stringify(rows).includes(tokens[0]!), 'no token stored as is');
    const bobRow = rows.find((r) => r.userId === 'bob')!;
    assert.equal(bobRow.episodeId, payloads[2].episodeId);
    assert.equal(bobRow.kind, 'human_input_requested');
    assert.ok(bobRow.pausedAt instanceof Date);
    // Nothing reported yet: every device says so, none is guessed shown.
    for (const device of await devicesOf(runId)) {
      assert.equal(device.receipt, 'none');
      assert.equal(device.shownAt, undefined);
    }
  });

  it('shown, clicked and the action are recorded once each (a repeat is a 204 that changes nothing); the views show them per device', async () => {
    const firstShownBefore = await histogramCount('flow_notify_pause_to_first_shown_seconds');
    const answeredBefore = await histogramCount('flow_notify_pause_to_answer_seconds');
    const { runId, payloads } = await paused();
    const [alice0, alice1, bob0] = payloads.map((p) => p.receipt!);

    assert.equal((await report({ token: alice0, event: 'shown' })).status, 204);
    const shown = (await receiptRows().findOne({ _id: hashActionToken(alice0) }))!.shownAt;
    assert.ok(shown);
    assert.equal((await report({ token: alice0, event: 'shown' })).status, 204);
    assert.deepEqual((await receiptRows().findOne({ _id: hashActionToken(alice0) }))!.shownAt, shown);
    assert.equal((await report({ token: alice1, event: 'shown' })).status, 204);
    assert.equal((await report({ token: alice0, event: 'clicked' })).status, 204);
    // Bob answers from his notification: the action's receipt, then the answer itself.
    assert.equal((await report({ token: bob0, event: 'action', action: 'approve' })).status, 204);
    const bobApprove = payloads[2].actions!.find((a) => a.action === 'approve')!.token;
    assert.equal((await anonymous.post('/api/v1/interactions/actions', { token: bobApprove })).status, 200);

    const views = await devicesOf(runId);
    assert.equal(views.length, 3);
    const aliceViews = views.filter((v) => v.userId === 'alice');
    assert.deepEqual(aliceViews.map((v) => v.receipt).sort(), ['reported', 'reported']);
    assert.equal(aliceViews.filter((v) => v.clickedAt).length, 1, 'one of her devices was clicked');
    for (const v of aliceViews) assert.equal(v.answeredAt, undefined, 'alice did not answer');
    const bobView = views.find((v) => v.userId === 'bob')!;
    assert.equal(bobView.receipt, 'reported');
    assert.equal(bobView.shownAt, undefined, 'bob never reported shown: not guessed');
    assert.equal(bobView.action, 'approve');
    assert.ok(bobView.actedAt && bobView.answeredAt && bobView.sentAt);

    // The run's timeline: asked, each device notified (alice's and bob's), the receipts, bob's action and answer.
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    assert.equal(timeline.status, 200, timeline.text);
    assert.equal(timeline.body.truncated, false);
    const entries = timeline.body.entries as {
      kind: string;
      at: string;
      userId?: string;
      receipt?: string;
    }[];
    const kinds = entries.map((e) => e.kind);
    assert.equal(kinds[0], 'paused');
    assert.equal(kinds.filter((k) => k === 'notified').length, 3);
    assert.equal(kinds.filter((k) => k === 'shown').length, 2);
    assert.equal(kinds.filter((k) => k === 'clicked').length, 1);
    assert.deepEqual(
      entries.filter((e) => e.kind === 'action' || e.kind === 'answered').map((e) => [e.kind, e.userId]),
      [
        ['action', 'bob'],
        ['answered', 'bob'],
      ],
    );
    assert.deepEqual(
      entries.filter((e) => e.kind === 'notified').map((e) => e.receipt),
      ['reported', 'reported', 'reported'],
    );
    const times = entries.map((e) => Date.parse(e.at));
    assert.deepEqual(
      times,
      [...times].sort((a, b) => a - b),
      'oldest first',
    );
    // Another team sees no such run.
    assert.equal((await anonymous.as('mallory', 'other').get(`/api/v1/runs/${runId}/timeline`)).status, 404);

    // Pause → first shown observed once for the episode (two devices reported shown); pause → answer once.
    assert.equal(await histogramCount('flow_notify_pause_to_first_shown_seconds'), firstShownBefore + 1);
    assert.equal(await histogramCount('flow_notify_pause_to_answer_seconds'), answeredBefore + 1);
  });

  it("a device's receipt is shown however many receipts the run's later pushes hold (never read as none)", async () => {
    const { runId, payloads } = await paused();
    assert.equal((await report({ token: payloads[0].receipt, event: 'shown' })).status, 204);
    // Later pushes of the same run (other episodes, a big team): more rows than one read of the run took.
    const mine = (await receiptRows().findOne({ _id: hashActionToken(payloads[0].receipt!) }))!;
    const later = new Date(mine.createdAt.getTime() + 60_000);
    const rows: PushReceiptRow[] = Array.from({ length: 2000 }, (_, i) => ({
      ...mine,
      _id: `later-${runId}-${i}`,
      episodeId: `${runId}:later:${Math.floor(i / 50)}`,
      subscriptionId: `sub-${i % 50}`,
      createdAt: later,
      shownAt: undefined,
    }));
    await receiptRows().insertMany(rows);

    const shown = (await devicesOf(runId)).filter((v) => v.receipt === 'reported');
    assert.equal(shown.length, 1, 'the device that reported shown');
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    assert.equal(timeline.status, 200, timeline.text);
    const kinds = (timeline.body.entries as { kind: string }[]).map((e) => e.kind);
    assert.equal(kinds.filter((k) => k === 'shown').length, 1, JSON.stringify(kinds));
  });

  it("a pause refused after writing its question (a concurrent pause won) is not on the run's timeline", async () => {
    const { runId, interactionId } = await paused();
    // What the refused one leaves: its question written, then abandoned when its transition lost.
    const refused = `int_refused_${runId}`;
    const interactions = stack.mongo.db.collection('interactions');
    const real = (await interactions.findOne({ _id: interactionId as never }))!;
    await interactions.insertOne({
      ...real,
      _id: refused as never,
      status: 'abandoned',
      createdAt: new Date(),
    });
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    assert.equal(timeline.status, 200, timeline.text);
    const pauses = (timeline.body.entries as { kind: string; interactionId?: string }[]).filter(
      (e) => e.kind === 'paused',
    );
    assert.deepEqual(
      pauses.map((e) => e.interactionId),
      [interactionId],
    );
  });

  it('an unknown token is a 404, an expired one a 410, bad bodies 400s that never echo the token; none records anything', async () => {
    const { runId, payloads } = await paused();
    const token = payloads[0].receipt!;
    await receiptRows().updateOne(
      { _id: hashActionToken(token) },
      { $set: { expiresAt: new Date(Date.now() - 1000) } },
    );
    assert.equal((await report({ token, event: 'shown' })).status, 410);
    assert.equal((await report({ token: 'A'.repeat(43), event: 'shown' })).status, 404);
    const forged = 'x'.repeat(43);
    for (const body of [
      {},
      { token: forged },
      { token: forged, event: 'seen' },
      { token: forged, event: 'action' },
      { token: forged, event: 'shown', action: 'approve' },
      { token: forged, event: 'action', action: 'no spaces' },
      { token: forged, event: 'shown', more: 1 },
    ]) {
      const res = await report(body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.ok(!res.text.includes(forged), 'a refusal never echoes the token');
    }
    const rows = await receiptRows().find({ runId }).toArray();
    assert.deepEqual(
      rows.filter((r) => r.shownAt || r.clickedAt || r.actedAt),
      [],
    );
  });

  it('no receipt token reaches a log line of the API or the worker', async () => {
    const { payloads } = await paused();
    const tokens = payloads.map((p) => p.receipt!);
    for (const token of tokens) assert.equal((await report({ token, event: 'shown' })).status, 204);
    await waitUntil('the API logged the receipt requests', () =>
      logged.some((line) => line.includes('/api/v1/notifications/receipts')),
    );
    assert.deepEqual(
      logged.filter((line) => tokens.some((token) => line.includes(token))),
      [],
    );
  });

  // Last: it spends this address's receipt budget for the minute.
  it('receipts from one address are bounded: past 600 a minute a 429 with Retry-After', async () => {
    let refused: Awaited<ReturnType<typeof report>> | undefined;
    for (let i = 0; i <= 600 && !refused; i++) {
      const res = await report({ token: `${String(i).padStart(3, '0')}${'C'.repeat(40)}`, event: 'shown' });
      if (res.status === 429) refused = res;
      else assert.equal(res.status, 404, res.text);
    }
    assert.ok(refused, 'no 429 within 601 receipts from one address');
    assert.match(refused.body.error, /receipts from this address/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1);
  });
});
