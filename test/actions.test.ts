// Answering from the notification: a pause with choices pushes each recipient their own single-use action tokens,
// and POST /api/v1/interactions/actions answers with one, without a session. Real API, worker, Temporal, FerretDB,
// and the loopback push service that verifies VAPID and decrypts what it receives (so the payloads can be read).
import assert from 'node:assert/strict';
import { PUSH_PAYLOAD_MAX_BYTES, type WirePushPayload } from '../domain/declarativePush';
import { interactionSnoozedSignal, interactionWorkflowId } from '../contract/workflows';
import { interactionClaimKeys } from '../domain/interaction';
import type { PushPayload } from '../domain/push';
import { hashActionToken, type ActionTokenRow } from '../store/actionTokens';
import type { ApiClient } from './support/harness';
import type { PushService, SubscriptionJSON } from './support/pushService';
import { startPushStack, subscribeTeam, type PushStack } from './support/pushStack';
import { waitUntil } from './support/waitUntil';

const CHOICES = [
  { id: 'approve', label: 'Approve' },
  { id: 'reject', label: 'Reject' },
];

describe('notification actions', function () {
  let push: PushService;
  let stack: PushStack;
  let anonymous: ApiClient;
  let alice: ApiClient; // owner of the runs, two devices
  let devices: Record<string, SubscriptionJSON[]>; // bob: same team, team-wide scope, one device
  /** Every line the API and the worker logged: no token may be among them. */
  const logged: string[] = [];

  before(async () => {
    stack = await startPushStack({ logged });
    ({ push, anonymous } = stack);
    ({ alice, devices } = await subscribeTeam(stack));
  });

  after(() => stack?.stop());

  beforeEach(() => push.reset());
  // An answer's close goes to every device a moment later: it must not land in the next test's pushes.
  afterEach(async () => {
    const answered = await stack.mongo.db
      .collection<{ _id: string }>('interactions')
      .find({ status: 'answered' }, { projection: { _id: 1 } })
      .toArray();
    await waitUntil('every answer closed on its devices', async () =>
      (
        await Promise.all(
          answered.map(({ _id }) => stack.stores.claims.wasDelivered(interactionClaimKeys.answered(_id))),
        )
      ).every(Boolean),
    );
  });

  const tokenRows = () => stack.mongo.db.collection<ActionTokenRow>('action_tokens');

  /** A run paused with these choices, once every device has its push. */
  async function pausedWithChoices(
    beforePause: (runId: string) => void = () => undefined,
  ): Promise<{ runId: string; interactionId: string }> {
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    beforePause(runId);
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Deploy v2 to production?',
      choices: CHOICES,
    });
    assert.equal(paused.status, 200, paused.text);
    for (const device of [...devices.alice, ...devices.bob]) await push.waitFor(1, device);
    return { runId, interactionId: paused.body.interactionId as string };
  }

  const payloadOf = (device: SubscriptionJSON, runId: string): PushPayload => {
    const payload = push
      .received(device)
      .map((r) => r.payload as PushPayload)
      .find((p) => p.runId === runId);
    assert.ok(payload, `a push for ${runId} on ${device.endpoint}`);
    return payload;
  };
  const tokenOf = (payload: PushPayload, choiceId: string): string => {
    const token = payload.actions?.find((a) => a.action === choiceId)?.token;
    assert.ok(token, `a token for ${choiceId}`);
    return token;
  };
  const act = (token: unknown) => anonymous.post('/api/v1/interactions/actions', { token });
  const statusOf = async (runId: string) => (await alice.get(`/api/v1/runs/${runId}`)).body.status as string;
  const eventTypes = async (runId: string) =>
    (await stack.stores.events.listForRun(runId)).map((e) => e.type);

  it('a pause with choices pushes the choices as actions, with one token set per person, stored hashed', async () => {
    const { runId, interactionId } = await pausedWithChoices();
    const [alice0, alice1] = devices.alice.map((d) => payloadOf(d, runId));
    const bob0 = payloadOf(devices.bob[0], runId);
    for (const payload of [alice0, alice1, bob0]) {
      assert.equal(payload.kind, 'human_input_requested');
      assert.deepEqual(
        payload.actions?.map(({ action, title }) => ({ id: action, label: title })),
        CHOICES,
      );
      for (const action of payload.actions ?? []) assert.match(action.token, /^[A-Za-z0-9_-]{43}$/);
    }
    // One set per person: both of alice's devices carry the same tokens; bob's are his own.
    assert.deepEqual(alice0.actions, alice1.actions);
    assert.notEqual(tokenOf(alice0, 'approve'), tokenOf(bob0, 'approve'));

    const rows = await tokenRows().find({ interactionId }).toArray();
    assert.equal(rows.length, 4, 'two choices for each of two people');
    const tokens = [alice0, bob0].flatMap((p) => p.actions!.map((a) => a.token));
    assert.deepEqual(rows.map((r) => r._id).sort(), tokens.map(hashActionToken).sort());
    const stored = JSON.stringify(rows);
    for (const token of tokens) assert.ok(!stored.includes(token), 'no token stored as is');
    const bobApprove = rows.find((r) => r._id === hashActionToken(tokenOf(bob0, 'approve')))!;
    assert.equal(bobApprove.userId, 'bob');
    assert.equal(bobApprove.runId, runId);
    assert.equal(bobApprove.choiceId, 'approve');
    assert.equal(bobApprove.expiresAt.getTime() - bobApprove.createdAt.getTime(), 86_400_000);
  });

  it('a token answers the run with its choice as its person; the same token again is a 409 and changes nothing', async () => {
    const { runId, interactionId } = await pausedWithChoices();
    const bobApprove = tokenOf(payloadOf(devices.bob[0], runId), 'approve');
    const answered = await act(bobApprove);
    assert.equal(answered.status, 200, answered.text);
    assert.equal(answered.body.status, 'running');
    assert.equal(await statusOf(runId), 'running');
    const interaction = await stack.stores.interactions.get(runId, interactionId);
    assert.equal(interaction?.status, 'answered');
    assert.equal(interaction?.answer, 'approve');
    assert.equal(interaction?.answeredBy, 'bob');
    const events = await eventTypes(runId);
    assert.equal(events.filter((t) => t === 'run_resumed').length, 1);

    const replayed = await act(bobApprove);
    assert.equal(replayed.status, 409, replayed.text);
    // Another person's other choice, after the answer: refused too, and unused.
    const aliceReject = tokenOf(payloadOf(devices.alice[0], runId), 'reject');
    const late = await act(aliceReject);
    assert.equal(late.status, 409, late.text);
    assert.equal(await statusOf(runId), 'running');
    assert.deepEqual(await eventTypes(runId), events);
    assert.deepEqual(await stack.stores.interactions.get(runId, interactionId), interaction);
    const lateRow = await tokenRows().findOne({ _id: hashActionToken(aliceReject) });
    assert.equal(lateRow?.usedAt, undefined);
  });

  it('the same token again finishes an answer whose first request died after storing it: the run resumes once', async () => {
    const { runId, interactionId } = await pausedWithChoices();
    const bobApprove = tokenOf(payloadOf(devices.bob[0], runId), 'approve');
    // The first request took the token and stored the answer, then its process died before the run resumed.
    const at = new Date();
    assert.ok(await stack.stores.actionTokens.take(hashActionToken(bobApprove), at));
    assert.ok(await stack.stores.interactions.recordAnswer(interactionId, 'approve', at, 'bob'));
    assert.equal(await statusOf(runId), 'paused');
    // Another person's token for the same choice never finishes it for them.
    const aliceApprove = tokenOf(payloadOf(devices.alice[0], runId), 'approve');
    assert.equal((await act(aliceApprove)).status, 409);
    assert.equal(await statusOf(runId), 'paused');

    const retried = await act(bobApprove);
    assert.equal(retried.status, 200, retried.text);
    assert.equal(retried.body.status, 'running');
    assert.equal(await statusOf(runId), 'running');
    assert.equal((await eventTypes(runId)).filter((t) => t === 'run_resumed').length, 1);
    // Once the run has resumed, the token is spent like any other.
    assert.equal((await act(bobApprove)).status, 409);
  });

  it('a token whose first request stalled is spent once its retry answered: the first giving it back after does not re-arm it', async () => {
    const { runId } = await pausedWithChoices();
    const bobApprove = tokenOf(payloadOf(devices.bob[0], runId), 'approve');
    const hash = hashActionToken(bobApprove);
    // The first request took the token, then stalled on the store before storing the answer.
    const firstAt = new Date();
    assert.ok(await stack.stores.actionTokens.take(hash, firstAt, { untold: true }));
    // The device's retry finds it taken and untold, and finishes the answer itself.
    const retried = await act(bobApprove);
    assert.equal(retried.status, 200, retried.text);
    assert.equal(await statusOf(runId), 'running');
    // The first request's store write then fails: it gives the token back, as a failure before any answer does.
    await stack.stores.actionTokens.giveBack(hash, firstAt);
    assert.equal((await act(bobApprove)).status, 409, 'the spent token answered again');
  });

  it('a retried fan-out mints a fresh set only for whom it still has to reach; the set sent before still answers', async () => {
    // Bob's device fails the whole first attempt (the sender's three tries): the activity is retried for him.
    const { runId, interactionId } = await pausedWithChoices(() =>
      push.failNext(devices.bob[0], [500, 500, 500]),
    );
    const rows = await tokenRows().find({ interactionId }).toArray();
    const perPerson = (userId: string) => rows.filter((r) => r.userId === userId).length;
    assert.equal(perPerson('alice'), 2, 'alice was reached by the first attempt: one set');
    assert.equal(perPerson('bob'), 4, 'bob: the set of the attempt that failed, and the one delivered');
    assert.equal(push.received(devices.bob[0]).length, 1);
    const answered = await act(tokenOf(payloadOf(devices.alice[1], runId), 'approve'));
    assert.equal(answered.status, 200, answered.text);
    assert.equal(await statusOf(runId), 'running');
  });

  it('the same snooze token again finishes a snooze whose first request died before telling the workflow', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    const runId = created.body.id as string;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Deploy v2?' });
    assert.equal(paused.status, 200, paused.text);
    const interactionId = paused.body.interactionId as string;
    await push.waitFor(1, devices.bob[0]);
    const snooze = tokenOf(payloadOf(devices.bob[0], runId), 'snooze');
    // The first request took the token, then its process died before it signalled the question's workflow.
    assert.ok(await stack.stores.actionTokens.take(hashActionToken(snooze), new Date(), { untold: true }));
    const snoozesOf = async () => {
      const { events } = await stack.client.workflow
        .getHandle(interactionWorkflowId(interactionId))
        .fetchHistory();
      return events!.filter(
        (e) => e.workflowExecutionSignaledEventAttributes?.signalName === interactionSnoozedSignal.name,
      ).length;
    };
    assert.equal(await snoozesOf(), 0);
    const retried = await act(snooze);
    assert.equal(retried.status, 202, retried.text);
    assert.equal(await snoozesOf(), 1, 'the workflow was told of the snooze');
    // Once told, the token is spent like any other.
    assert.equal((await act(snooze)).status, 409);
    assert.equal(await snoozesOf(), 1);
    // A snooze taken before its token noted whether it was told is a replay too, as it always was.
    const [other] = push.received(devices.alice[0]).filter((r) => (r.payload as PushPayload).runId === runId);
    const older = tokenOf(other.payload as PushPayload, 'snooze');
    await tokenRows().updateOne({ _id: hashActionToken(older) }, { $set: { usedAt: new Date() } });
    assert.equal((await act(older)).status, 409);
    assert.equal(await snoozesOf(), 1);
    assert.equal(
      (await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'y' }))
        .status,
      200,
    );
  });

  it('an expired token is a 410, an unknown one a 404, and neither answers', async () => {
    const { runId, interactionId } = await pausedWithChoices();
    const token = tokenOf(payloadOf(devices.alice[0], runId), 'approve');
    await tokenRows().updateOne(
      { _id: hashActionToken(token) },
      { $set: { expiresAt: new Date(Date.now() - 1000) } },
    );
    const expired = await act(token);
    assert.equal(expired.status, 410, expired.text);
    const unknown = await act('A'.repeat(43));
    assert.equal(unknown.status, 404, unknown.text);
    assert.equal(await statusOf(runId), 'paused');
    assert.equal((await stack.stores.interactions.get(runId, interactionId))?.status, 'pending');
    // The other choice of the same person still answers.
    const other = await act(tokenOf(payloadOf(devices.alice[0], runId), 'reject'));
    assert.equal(other.status, 200, other.text);
    assert.equal((await stack.stores.interactions.get(runId, interactionId))?.answer, 'reject');
  });

  it('the largest pause allowed arrives within 3,800 bytes, with its declarative form; the body gave way, no token did', async () => {
    // Every character one JSON escapes into six bytes: the costliest text the API accepts.
    const costly = (n: number) => '\u0001'.repeat(n);
    const created = await alice.post('/api/v1/runs', { title: costly(500) });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    const choices = [1, 2, 3].map((n) => ({ id: `${n}`.repeat(32), label: costly(40) }));
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: costly(10_000), choices });
    assert.equal(paused.status, 200, paused.text);
    for (const device of [...devices.alice, ...devices.bob]) {
      await push.waitFor(1, device);
      const received = push.received(device).find((r) => (r.payload as PushPayload).runId === runId)!;
      assert.ok(
        Buffer.byteLength(received.rawText) <= PUSH_PAYLOAD_MAX_BYTES,
        `${Buffer.byteLength(received.rawText)} bytes decrypted`,
      );
      const wire = received.payload as WirePushPayload;
      assert.equal(wire.web_push, 8030);
      assert.equal(wire.notification.navigate, wire.url);
      assert.equal(wire.notification.body, wire.body);
      assert.ok(wire.body.endsWith('…') && wire.body.length < 180, 'the body was trimmed');
      assert.deepEqual(
        wire.actions?.map((a) => a.action),
        choices.map((c) => c.id),
      );
      for (const action of wire.actions!) assert.match(action.token, /^[A-Za-z0-9_-]{43}$/);
    }
  });

  it('bad choices and bad action bodies are 400s naming what is wrong', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Refused' });
    const runId = created.body.id as string;
    const pause = (choices: unknown) =>
      alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Which?', choices });
    const cases: [unknown, RegExp][] = [
      [[1, 2, 3, 4].map((n) => ({ id: `c${n}`, label: `C${n}` })), /at most 3 choices/],
      [[{ id: 'a', label: 'x'.repeat(41) }], /at most 40 characters/],
      [[{ id: 'a', label: '   ' }], /must not be blank/],
      [
        [
          { id: 'a', label: 'A' },
          { id: 'a', label: 'B' },
        ],
        /must not repeat/,
      ],
      [[{ id: 'a b', label: 'A' }], /choice id/],
      // The notification's own snooze action: a choice by that id could never be told from it.
      [[{ id: 'snooze', label: 'Later' }], /snooze/],
      [[{ id: 'x'.repeat(33), label: 'A' }], /choice id/],
      [[{ id: 'a', label: 'A', extra: 1 }], /invalid request/],
      [[], /at least one/],
    ];
    for (const [choices, message] of cases) {
      const res = await pause(choices);
      assert.equal(res.status, 400, `${JSON.stringify(choices)}: ${res.text}`);
      assert.match(res.body.error, message);
    }
    assert.equal(await statusOf(runId), 'running', 'no refused pause paused the run');

    const forged = 'not a token at all, but long enough to be one: ' + 'x'.repeat(20);
    for (const body of [{}, { token: 42 }, { token: forged }, { token: 'A'.repeat(43), more: 1 }]) {
      const res = await anonymous.post('/api/v1/interactions/actions', body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.ok(!res.text.includes(forged), 'a refusal never echoes the token');
    }
  });

  it('no token reaches a log line of the API or the worker', async () => {
    const { runId } = await pausedWithChoices();
    const payload = payloadOf(devices.alice[0], runId);
    const tokens = payload.actions!.map((a) => a.token);
    assert.equal((await act(tokens[0])).status, 200);
    for (const token of tokens) {
      const refused = await act(token);
      assert.equal(refused.status, 409);
      assert.ok(!refused.text.includes(token), `the refusal never echoes the token: ${refused.text}`);
    }
    // The request lines are written as the answers go: wait for this test's last one.
    await waitUntil('the API logged the action requests', () =>
      logged.some((line) => line.includes('/api/v1/interactions/actions')),
    );
    const leaked = logged.filter((line) => tokens.some((token) => line.includes(token)));
    assert.deepEqual(leaked, []);
  });

  // Last: it spends this address's action budget for the minute.
  it('actions from one address are bounded: past 60 a minute a 429 with Retry-After, before any token is read', async () => {
    let refused: Awaited<ReturnType<typeof act>> | undefined;
    for (let i = 0; i <= 60 && !refused; i++) {
      const res = await act(`${String(i).padStart(2, '0')}${'B'.repeat(41)}`);
      if (res.status === 429) refused = res;
      else assert.equal(res.status, 404, res.text);
    }
    assert.ok(refused, 'no 429 within 61 actions from one address');
    assert.match(refused.body.error, /actions from this address/);
    assert.ok(Number(refused.headers.get('retry-after')) >= 1, 'Retry-After names when to come back');
  });
});
