// Answered once, closed everywhere: once a question is answered (a notification's action, the studio's answer
// route), every device its push reached gets one replacing push of kind `answered`, with the question's tag and
// Topic, saying who answered; a lost signal is replayed by the sweep. Real API, worker, Temporal, FerretDB, and
// the loopback push service that verifies VAPID and decrypts what it receives.
import assert from 'node:assert/strict';
import { healthWorkflowId, interactionWorkflowId } from '../contract/workflows';
import { interactionClaimKeys } from '../domain/interaction';
import { inputEpisodeId } from '../domain/outcome';
import { FAN_OUT_ATTEMPTS, type PushPayload } from '../domain/push';
import { createRunsService } from '../runs/service';
import type { Interaction } from '../store/interactions';
import type { ApiClient } from './support/harness';
import type { PushService, SubscriptionJSON } from './support/pushService';
import { sweepActivitiesOf } from './support/familyStack';
import { startPushStack, subscribeTeam, type PushStack } from './support/pushStack';
import { waitUntil } from './support/waitUntil';

describe('answered once, closed everywhere', function () {
  let push: PushService;
  let stack: PushStack;
  let alice: ApiClient; // owner of the runs, two devices
  let devices: SubscriptionJSON[]; // alice's two, then bob's (same team, team-wide scope)

  before(async () => {
    // Backoff a tenth as long: a close whose push service is down spends its attempts in seconds.
    stack = await startPushStack({ fastRetries: true });
    ({ push } = stack);
    const team = await subscribeTeam(stack);
    ({ alice } = team);
    devices = [...team.devices.alice, ...team.devices.bob];
  });

  after(() => stack?.stop());

  beforeEach(() => push.reset());

  /** A run paused on a question, once every device has its push. */
  async function paused(choices?: { id: string; label: string }[]) {
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    const res = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Ship it?',
      ...(choices ? { choices } : {}),
    });
    assert.equal(res.status, 200, res.text);
    const interactionId = res.body.interactionId as string;
    // This run's question on every device (an earlier test's push may land after the reset), and its episode
    // done: an attempt of its push still to come (one retried on a loaded machine) would find the question answered
    // and close it itself.
    for (const device of devices)
      await waitUntil("the run's question on each device", () => pushesOf(device, runId).length > 0);
    await stack.client.workflow.getHandle(inputEpisodeId(runId, interactionId)).result();
    return { runId, interactionId };
  }

  function pushesOf(device: SubscriptionJSON, runId: string) {
    return push.received(device).filter((r) => (r.payload as PushPayload).runId === runId);
  }

  /** Every device holds the question and then its close, and the close's claim is settled. */
  async function closedEverywhere(runId: string, interactionId: string) {
    await waitUntil('the close settled', () =>
      stack.stores.claims.wasDelivered(interactionClaimKeys.answered(interactionId)),
    );
    const closes = devices.map((device) => {
      const [question, close, ...more] = pushesOf(device, runId);
      assert.equal(more.length, 0, `one close on ${device.endpoint}`);
      assert.ok(close, `a close on ${device.endpoint}`);
      const asked = question.payload as PushPayload;
      const closed = close.payload as PushPayload;
      assert.equal(asked.kind, 'human_input_requested');
      assert.equal(closed.kind, 'answered');
      assert.equal(closed.tag, asked.tag, 'the same tag: it replaces the question');
      assert.equal(
        close.headers.topic,
        question.headers.topic,
        'the same Topic: a queued question is replaced',
      );
      assert.equal(closed.actions, undefined);
      return closed;
    });
    return closes[0];
  }

  it('an answer from a notification action closes the question on every device it reached, once', async () => {
    const { runId, interactionId } = await paused([
      { id: 'approve', label: 'Approve' },
      { id: 'reject', label: 'Reject' },
    ]);
    const bobs = pushesOf(devices[2], runId)[0].payload as PushPayload;
    const token = bobs.actions?.find((a) => a.action === 'approve')?.token;
    assert.ok(token);
    const res = await stack.anonymous.post('/api/v1/interactions/actions', { token });
    assert.equal(res.status, 200, res.text);
    const closed = await closedEverywhere(runId, interactionId);
    assert.match(closed.body, /bob answered: Approve/);
    assert.match(closed.title, /Deploy was answered/);
  });

  it('an answer from the studio closes it the same way; the repeated answer sends no second close', async () => {
    const { runId, interactionId } = await paused();
    const answer = () =>
      alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'yes' });
    assert.equal((await answer()).status, 200);
    const closed = await closedEverywhere(runId, interactionId);
    assert.match(closed.body, /alice answered\./);
    // The client's retry signals again: the claim holds, nothing more is sent.
    assert.equal((await answer()).status, 200);
    const workflow = stack.client.workflow.getHandle(`interaction|${interactionId}`);
    await workflow.result();
    await closedEverywhere(runId, interactionId);
  });

  it('repeats of an answer after its close settled cost nothing on Temporal: no new execution, no health signal', async () => {
    const { runId, interactionId } = await paused();
    const answer = () =>
      alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'yes' });
    assert.equal((await answer()).status, 200);
    await closedEverywhere(runId, interactionId);
    const workflow = stack.client.workflow.getHandle(interactionWorkflowId(interactionId));
    await workflow.result();
    const closedRun = (await workflow.describe()).runId;
    const health = stack.client.workflow.getHandle(healthWorkflowId(runId));
    const signals = async () =>
      ((await health.fetchHistory()).events ?? []).filter((e) => e.workflowExecutionSignaledEventAttributes)
        .length;
    const before = await signals();
    for (let i = 0; i < 3; i++) assert.equal((await answer()).status, 200);
    assert.equal((await workflow.describe()).runId, closedRun, 'a repeat started the question anew');
    assert.equal(await signals(), before, 'a repeat told health again');
  });

  it('a question without choices offers a snooze: its token snoozes once (202), then 409; after the answer, 409', async () => {
    const { runId, interactionId } = await paused();
    const snoozeTokenOf = (device: SubscriptionJSON) => {
      const actions = (pushesOf(device, runId)[0].payload as PushPayload).actions;
      assert.deepEqual(
        actions?.map((a) => a.action),
        ['snooze'],
      );
      return actions![0].token;
    };
    const act = (token: string) => stack.anonymous.post('/api/v1/interactions/actions', { token });
    const snoozed = await act(snoozeTokenOf(devices[0]));
    assert.equal(snoozed.status, 202, snoozed.text);
    const inMs = Date.parse(snoozed.body.snoozedUntil) - Date.now();
    assert.ok(inMs > 3500_000 && inMs <= 3600_000, `snoozed for ${inMs} ms`);
    assert.equal((await act(snoozeTokenOf(devices[0]))).status, 409, 'a used token');
    assert.equal(
      (await alice.get(`/api/v1/runs/${runId}`)).body.status,
      'paused',
      'a snooze answers nothing',
    );
    const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'y',
    });
    assert.equal(answered.status, 200);
    const late = await act(snoozeTokenOf(devices[2]));
    assert.equal(late.status, 409, 'nothing to snooze once answered');
    assert.match(late.body.error, /already answered/);
    await closedEverywhere(runId, interactionId);
  });

  it('a snooze of a question whose run moved on without an answer (cancelled) is a 409 that says so', async () => {
    const { runId } = await paused();
    const token = (pushesOf(devices[0], runId)[0].payload as PushPayload).actions![0].token;
    assert.equal((await alice.post(`/api/v1/runs/${runId}/cancel`, {})).status, 200);
    const refused = await stack.anonymous.post('/api/v1/interactions/actions', { token });
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.body.error, /no longer waits/);
  });

  const sweepActivities = () => sweepActivitiesOf(stack);

  /** Alice answers through a runs service whose signal to the question's workflow is lost. */
  async function answerUnheard(runId: string, interactionId: string): Promise<void> {
    const deaf = createRunsService({
      ...stack.stores,
      emitter: { emitRunOutcome: async () => undefined },
      interactionSignals: {
        answered: () => Promise.reject(new Error('Temporal unreachable')),
        snoozed: () => Promise.reject(new Error('Temporal unreachable')),
      },
      onEmitError: () => undefined,
    });
    await deaf.answer({ userId: 'alice', teamId: 'acme' }, runId, interactionId, 'yes');
  }

  it('a question whose opened note was lost: the sweep finds its workflow running and notes it', async () => {
    const { interactionId } = await paused();
    const opened = interactionClaimKeys.opened(interactionId);
    assert.ok(await stack.stores.claims.wasDelivered(opened), 'noted by the pause');
    await stack.mongo.db.collection('sent_notifications').deleteOne({ _id: opened as never });
    const pass = await sweepActivities().sweepOnce();
    assert.equal(pass.interactionsStarted ?? 0, 0, 'its workflow runs: none started');
    assert.ok(await stack.stores.claims.wasDelivered(opened), 'noted by the sweep');
  });

  it('an answer whose signal was lost is closed by the next sweep', async () => {
    const { runId, interactionId } = await paused();
    await answerUnheard(runId, interactionId);
    assert.equal(pushesOf(devices[0], runId).length, 1, 'no close yet');
    const sweep = sweepActivities();
    const pass = await sweep.sweepOnce();
    assert.ok((pass.closesReplayed ?? 0) >= 1, JSON.stringify(pass));
    await closedEverywhere(runId, interactionId);
    const again = await sweep.sweepOnce();
    assert.equal(again.closesReplayed, 0, 'a settled close is not replayed');
  });
  it('an answer stored whose request died before its run resumed: the next sweep resumes the run once, then closes it', async () => {
    const { runId, interactionId } = await paused();
    // The answer's request stored it, then its process died: no transition, no signal, no retry.
    assert.ok(await stack.stores.interactions.recordAnswer(interactionId, 'yes', new Date(), 'bob'));
    assert.equal((await alice.get(`/api/v1/runs/${runId}`)).body.status, 'paused');
    const sweep = sweepActivities();
    const pass = await sweep.sweepOnce();
    assert.equal(pass.closesReplayed, 1, JSON.stringify(pass));
    assert.equal((await alice.get(`/api/v1/runs/${runId}`)).body.status, 'running');
    const events = await stack.stores.events.listForRun(runId);
    assert.equal(events.filter((e) => e.type === 'run_resumed').length, 1);
    const closed = await closedEverywhere(runId, interactionId);
    assert.match(closed.body, /bob answered\./);
    await sweep.sweepOnce();
    assert.equal(
      (await stack.stores.events.listForRun(runId)).length,
      events.length,
      'nothing written twice',
    );
  });
  it('an answer whose signal was lost is closed by the next sweep, behind a thousand answers closed already', async () => {
    // Earlier answers in the window, each closed (its close claim settled): the sweep must look past them.
    const earlier = new Date(Date.now() - 600_000);
    const closed = Array.from({ length: 1000 }, (_, i) => ({
      _id: `int_closed_${i}_${Date.now()}`,
      runId: 'run_closed',
      teamId: 'acme',
      prompt: 'Earlier',
      status: 'answered' as const,
      answer: 'yes',
      answeredBy: 'alice',
      createdAt: earlier,
      answeredAt: earlier,
    }));
    await stack.mongo.db.collection<Interaction>('interactions').insertMany(closed);
    for (let i = 0; i < closed.length; i += 100)
      await Promise.all(
        closed
          .slice(i, i + 100)
          .map((row) =>
            stack.stores.claims.noteOnce(interactionClaimKeys.answered(row._id), 'test', 'delivered'),
          ),
      );
    const { runId, interactionId } = await paused();
    await answerUnheard(runId, interactionId);
    const pass = await sweepActivities().sweepOnce();
    assert.equal(pass.closesReplayed, 1, JSON.stringify(pass));
    await closedEverywhere(runId, interactionId);
  });
  /**
   * A paused question answered while one of its two devices' push service answers 503 through every attempt of the
   * close: answers once the close's workflow is over (the close released for that device), the service back.
   */
  async function answeredWhileADeviceIsDown() {
    const { runId, interactionId } = await paused();
    const [reachable, down] = devices;
    push.failAlways(down, 503);
    try {
      const res = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'yes',
      });
      assert.equal(res.status, 200, res.text);
      await push.waitFor(2, reachable);
      await waitUntil(
        'every attempt of the close failed for the device that is down',
        () => push.attempts(down).filter((a) => a.status === 503).length >= FAN_OUT_ATTEMPTS,
        { timeoutMs: 120_000 },
      );
      await waitUntil(
        'the close settled or released',
        async () => {
          const { events } = await stack.client.workflow
            .getHandle(interactionWorkflowId(interactionId))
            .fetchHistory();
          return events!.some((e) => e.workflowExecutionCompletedEventAttributes);
        },
        { timeoutMs: 120_000 },
      );
    } finally {
      push.recover(down);
    }
    return { runId, interactionId, down };
  }

  it("a device whose push service was down through the close's attempts is closed by a sweep once it is back", async () => {
    const { runId, interactionId, down } = await answeredWhileADeviceIsDown();
    assert.equal(pushesOf(down, runId).length, 1, 'the question only, so far');
    const pass = await sweepActivities().sweepOnce();
    assert.equal(pass.closesReplayed, 1, JSON.stringify(pass));
    await closedEverywhere(runId, interactionId);
  });
  it("a close released again and again rests between the sweep's replays, longer the longer it has failed", async () => {
    const { runId, interactionId } = await answeredWhileADeviceIsDown();
    const notes = stack.mongo.db.collection('sent_notifications');
    const note = `released|${interactionClaimKeys.answered(interactionId)}`;
    assert.ok(await notes.findOne({ _id: note as never }), "its release is noted, as an episode's");
    const ago = (minutes: number) => new Date(Date.now() - minutes * 60_000);
    // Released for 39 minutes, the last time a minute ago: it rests.
    await notes.updateOne({ _id: note as never }, { $set: { first_released_at: ago(40), sent_at: ago(1) } });
    const resting = await sweepActivities().sweepOnce();
    assert.equal(resting.closesReplayed ?? 0, 0, JSON.stringify(resting));
    // Released for 10 minutes, the last time 30 minutes ago: its rest is over.
    await notes.updateOne({ _id: note as never }, { $set: { first_released_at: ago(40), sent_at: ago(30) } });
    const rested = await sweepActivities().sweepOnce();
    assert.equal(rested.closesReplayed, 1, JSON.stringify(rested));
    await closedEverywhere(runId, interactionId);
  });
});
