// Escalation on the real stack: the team policy's routes (admins only, bounded), then pauses nobody answers
// escalated exactly once on their rung, pauses answered before their rung escalated never, and a webhook rung
// signed like a callback. ESCALATION_PAUSES sets how many pauses each case launches (the figure is 200;
// npm test runs a few).
import assert from 'node:assert/strict';
import type { WorkflowHandle } from '@temporalio/client';
import type { Db } from 'mongodb';
import { Webhook } from 'standardwebhooks';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { interactionWorkflowId, teamEventWorkflowId } from '../contract/workflows';
import { interactionClaimKeys, type EscalationRung } from '../domain/interaction';
import { inputEpisodeId } from '../domain/outcome';
import type { TeamEventBody } from '../domain/teamEvents';
import type { PushPayload } from '../domain/push';
import { explainRun } from '../operator/explain';
import { renderExplanation } from '../operator/render';
import { createClaimReader } from '../store/claims';
import { createEscalationPolicyStore } from '../store/escalationPolicies';
import { createInteractionActivities } from '../activities/interaction';
import type { PushActivityDeps } from '../activities/push';
import { callbackSendSettings } from '../delivery/callback/send';
import { createOriginPacing } from '../delivery/callback/pacing';
import { pushSenderFor } from '../delivery/push/sender';
import { CallbackReceiver } from './support/callbackReceiver';
import { sweepActivitiesOf } from './support/familyStack';
import { ApiClient, recordFixture } from './support/harness';
import type { PushService, SubscriptionJSON } from './support/pushService';
import { startPushStack, subscribeDevices, type PushStack } from './support/pushStack';
import { TEST_JWT_SECRET } from './support/stack';
import { signToken } from './support/tokens';
import { waitUntil } from './support/waitUntil';
import { adminOf } from './support/admin';

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/** The activity type a local activity's marker records (undefined for other events and patch markers). */
function localActivityType(event: HistoryEvent): string | undefined {
  const marker = event.markerRecordedEventAttributes;
  if (marker?.markerName !== 'core_local_activity') return undefined;
  const data = marker.details?.data?.payloads?.[0]?.data;
  return data
    ? (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }).activity_type
    : undefined;
}

const PAUSES = Number(process.env.ESCALATION_PAUSES ?? 3);
/** How long every pause's rungs or closes may take to settle: longer the more pauses a case launches. */
const SETTLE_MS = 30_000 + PAUSES * 100;
const RUNG_SECONDS = 3;
const BREAKER_FAILURES = 2;

describe('escalation', function () {
  this.timeout(120_000 + PAUSES * 1000);
  let push: PushService;
  let receiver: CallbackReceiver;
  let stack: PushStack;
  let alice: ApiClient; // owner of the runs
  let admin: ApiClient;
  let carol: SubscriptionJSON; // the rung's person

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startPushStack({
      vars: {
        CALLBACK_ALLOW_PRIVATE: '1',
        PUSH_BURST_LIMIT: '1000',
        // Each case launches its own pauses, all within a minute at the size.
        RUN_CREATE_RATE_LIMIT: String(Math.max(120, 5 * PAUSES)),
        CALLBACK_RETRY_SECONDS: '1,1,1,1',
        CALLBACK_BREAKER_FAILURES: String(BREAKER_FAILURES),
        CALLBACK_BREAKER_COOLDOWN_SECONDS: '3600',
      },
    });
    ({ push } = stack);
    alice = stack.anonymous.as('alice', 'acme');
    const exp = Math.floor(Date.now() / 1000) + 3600;
    admin = new ApiClient(
      stack.api.url,
      signToken({ sub: 'ann', team: 'acme', roles: ['admin'], exp }, TEST_JWT_SECRET),
    );
    [carol] = (await subscribeDevices(stack, { carol: 1 })).carol;
  });

  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  beforeEach(() => push.reset());

  it('the policy: anyone in the team reads it, only an admin replaces it, within its bounds', async () => {
    assert.deepEqual((await alice.get('/api/v1/teams/current/escalation')).body, { rungs: [] });
    const policy = { rungs: [{ afterSeconds: 600, to: 'owner', via: 'push' }] };
    assert.equal((await alice.put('/api/v1/teams/current/escalation', policy)).status, 403);
    // Refused as who they are before what they sent is looked at.
    assert.equal((await alice.put('/api/v1/teams/current/escalation', { rungs: 'x' })).status, 403);
    const rung = (afterSeconds: number) => ({ afterSeconds, to: 'team', via: 'push' });
    for (const bad of [
      { rungs: [1, 2, 3, 4, 5, 6].map((n) => rung(n * 60)) },
      { rungs: [rung(7 * 24 * 3600 + 1)] },
      { rungs: [{ afterSeconds: 60, to: 'team', via: 'webhook' }] },
      { rungs: [{ afterSeconds: 60, to: [], via: 'push' }] },
      ...['carol|acme', 'c'.repeat(257), 'tab\tbed'].map((user) => ({
        rungs: [{ afterSeconds: 60, to: [user], via: 'push' }],
      })),
    ]) {
      const res = await admin.put('/api/v1/teams/current/escalation', bad);
      assert.equal(res.status, 400, JSON.stringify(bad));
    }
    // A rung names people by the ids their tokens carry: an email, any script.
    for (const user of ['carol@example.com', '王小明']) {
      const named = { rungs: [{ afterSeconds: 60, to: [user], via: 'push' }] };
      const res = await admin.put('/api/v1/teams/current/escalation', named);
      assert.equal(res.status, 200, res.text);
      assert.deepEqual((await alice.get('/api/v1/teams/current/escalation')).body.rungs, named.rungs);
    }
    const put = await admin.put('/api/v1/teams/current/escalation', {
      ...policy,
      webhookUrl: receiver.url,
    });
    assert.equal(put.status, 200, put.text);
    assert.match(put.body.webhookSecret, /^whsec_/);
    const again = await admin.put('/api/v1/teams/current/escalation', {
      ...policy,
      webhookUrl: receiver.url,
    });
    assert.equal(again.body.webhookSecret, undefined, 'the secret is shown once');
    const read = await alice.get('/api/v1/teams/current/escalation');
    assert.deepEqual(read.body.rungs, policy.rungs);
    assert.equal(read.body.webhookSecret, undefined);
  });

  it("a run's own webhook rung needs its team's webhookUrl, as the team's policy does: 409 without one", async () => {
    const rungs = [{ afterSeconds: 60, to: 'team', via: 'webhook' }];
    const nohook = alice.as('nell', 'nohook');
    const refused = await nohook.post('/api/v1/runs', { title: 'Deploy', escalation: { rungs } });
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.body.error, /webhookUrl/);
    assert.equal((await nohook.get('/api/v1/runs')).body.runs.length, 0, 'no run was made');
    const hooked = adminOf(stack.anonymous, 'hana', 'hooked');
    const put = await hooked.put('/api/v1/teams/current/escalation', { rungs: [], webhookUrl: receiver.url });
    assert.equal(put.status, 200, put.text);
    assert.equal((await hooked.post('/api/v1/runs', { escalation: { rungs } })).status, 201);
  });

  /** Launches `count` runs with this ladder and pauses each on a question. */
  async function pausesOf(count: number, rungs: unknown[]) {
    return Promise.all(
      Array.from({ length: count }, async () => {
        const created = await alice.post('/api/v1/runs', { title: 'Deploy', escalation: { rungs } });
        assert.equal(created.status, 201, created.text);
        const runId = created.body.id as string;
        const res = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
        assert.equal(res.status, 200, res.text);
        return { runId, interactionId: res.body.interactionId as string };
      }),
    );
  }
  const pauses = (rungs: unknown[]) => pausesOf(PAUSES, rungs);

  /** Waits until the claim `keyOf` names is settled for every pause. */
  const everySettled = (what: string, paused: { interactionId: string }[], keyOf: (id: string) => string) =>
    waitUntil(
      what,
      async () =>
        (
          await Promise.all(paused.map((p) => stack.stores.claims.wasDelivered(keyOf(p.interactionId))))
        ).every(Boolean),
      { timeoutMs: SETTLE_MS },
    );

  /** Waits until the interaction's first send reported (a failing one backs off for about 30 s first). */
  const firstSendReported = (interaction: WorkflowHandle, what: string) =>
    waitUntil(
      what,
      async () =>
        (await interaction.fetchHistory()).events!.some((e) => e.activityTaskCompletedEventAttributes),
      { timeoutMs: 120_000 },
    );

  const carolsPushes = (runId: string) =>
    push.received(carol).filter((r) => (r.payload as PushPayload).runId === runId);

  it(`${PAUSES} pauses nobody answers: each escalated to the rung's person exactly once, never before its time`, async () => {
    const paused = await pauses([{ afterSeconds: RUNG_SECONDS, to: ['carol'], via: 'push' }]);
    // A person waits on each: its ladder goes ahead of what only reports, as its pause's episode does.
    const { priority } = await stack.client.workflow
      .getHandle(interactionWorkflowId(paused[0].interactionId))
      .describe();
    assert.deepEqual(priority, { priorityKey: 1, fairnessKey: 'acme', fairnessWeight: 0 });
    await everySettled('every rung sent', paused, (id) => interactionClaimKeys.rung(id, 0));
    for (const { interactionId } of paused) {
      // The pause's start carries the ladder: the workflow arms the rung's timer without reading its plan from
      // the store (however late its first task runs), and the API marks the question opened for the sweep.
      const { events } = await stack.client.workflow
        .getHandle(interactionWorkflowId(interactionId))
        .fetchHistory();
      const calls = events!.flatMap((e) => localActivityType(e) ?? []);
      assert.ok(calls.includes('tryMark'), `${interactionId}: its rung's claim among ${calls.join(', ')}`);
      assert.ok(!calls.includes('interactionPlan'), `${interactionId}: read its plan from the store`);
      assert.ok(await stack.stores.claims.wasDelivered(interactionClaimKeys.opened(interactionId)));
    }
    // How soon after its time is bench:escalation's figure; here, that it is once and not early.
    for (const { runId, interactionId } of paused) {
      const got = carolsPushes(runId);
      assert.equal(got.length, 1, `one rung push for ${runId}`);
      assert.equal((got[0].payload as PushPayload).kind, 'human_input_requested');
      const { createdAt } = (await stack.stores.interactions.get(runId, interactionId))!;
      assert.ok(got[0].at.getTime() >= createdAt.getTime() + RUNG_SECONDS * 1000, `${runId}: rung early`);
    }
  });

  it(`${PAUSES} pauses answered before their rung: no rung, and every device's last push of the run is the close`, async () => {
    const paused = await pauses([{ afterSeconds: RUNG_SECONDS, to: ['carol'], via: 'push' }]);
    await Promise.all(
      paused.map(async ({ runId, interactionId }) => {
        const res = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
          answer: 'y',
        });
        assert.equal(res.status, 200, res.text);
      }),
    );
    // Past every rung's time, and every close settled.
    await everySettled('every close settled', paused, interactionClaimKeys.answered);
    // Each question's workflow (the only sender of its rungs) ended on the answer, its rung cancelled.
    for (const { runId, interactionId } of paused) {
      const result = await stack.client.workflow.getHandle(`interaction|${interactionId}`).result();
      assert.deepEqual(result.rungsSent, [], `no rung for ${runId}`);
      // On a busy machine a rung's time may come before its answer is stored: the send finds the question
      // answered and settles its claim as closed, sending nothing.
      const rung = await stack.stores.claims.describe(interactionClaimKeys.rung(interactionId, 0));
      assert.ok(
        rung.state === 'absent' || rung.result === 'closed',
        `rung of ${runId}: ${JSON.stringify(rung)}`,
      );
      assert.equal(carolsPushes(runId).length, 0);
    }
  });

  it(`${PAUSES} pauses answered between two rungs: the first rung sent once, the second never, the close last`, async () => {
    const paused = await pauses([
      { afterSeconds: 1, to: ['carol'], via: 'push' },
      { afterSeconds: 60, to: ['carol'], via: 'push' },
    ]);
    await everySettled('every first rung sent', paused, (id) => interactionClaimKeys.rung(id, 0));
    for (const { runId, interactionId } of paused) {
      const res = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(res.status, 200, res.text);
    }
    for (const { runId, interactionId } of paused) {
      const result = await stack.client.workflow.getHandle(`interaction|${interactionId}`).result();
      assert.deepEqual(result, { rungsSent: [0], snoozesSent: 0, closed: true });
      const kinds = carolsPushes(runId).map((r) => (r.payload as PushPayload).kind);
      assert.deepEqual(kinds, ['human_input_requested', 'answered'], 'the rung, then its close');
    }
    // Started with its plan by the pause: a rung, a second rung's timer cancelled by the answer, the close.
    recordFixture(
      stack.config,
      `interaction|${paused[0].interactionId}`,
      'interaction-history-plan-at-start.json',
    );
  });

  it(`${PAUSES} pauses answered within ±1 s of their rung: a rung that went is replaced by the close on its device`, async () => {
    const paused = await Promise.all(
      Array.from({ length: PAUSES }, async (_, i) => {
        const [pause] = await pausesOf(1, [{ afterSeconds: RUNG_SECONDS, to: ['carol'], via: 'push' }]);
        const { createdAt } = (await stack.stores.interactions.get(pause.runId, pause.interactionId))!;
        const offsetMs = -1000 + (2000 * i) / Math.max(1, PAUSES - 1);
        const dueMs = createdAt.getTime() + RUNG_SECONDS * 1000 + offsetMs;
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, dueMs - Date.now())));
        const res = await alice.post(
          `/api/v1/runs/${pause.runId}/interactions/${pause.interactionId}/answer`,
          {
            answer: 'y',
          },
        );
        assert.equal(res.status, 200, res.text);
        return pause;
      }),
    );
    for (const { runId, interactionId } of paused) {
      const result = await stack.client.workflow.getHandle(`interaction|${interactionId}`).result();
      assert.equal(result.closed, true);
      const got = carolsPushes(runId);
      const kinds = got.map((r) => (r.payload as PushPayload).kind);
      // The rung either never went, or went once and the close replaced it on carol's device. (A rung whose send
      // read the question open may still be on the wire when the answer's response returns: the close follows it.)
      assert.ok(kinds.length === 0 || (kinds.length === 2 && kinds[1] === 'answered'), `${runId}: ${kinds}`);
    }
  });

  it("a rung whose pushes fail is sent again once carol's push service is back, then closed by the answer", async () => {
    push.failAlways(carol, 503);
    const [{ runId, interactionId }] = await pausesOf(1, [{ afterSeconds: 1, to: ['carol'], via: 'push' }]);
    const workflowId = `interaction|${interactionId}`;
    const interaction = stack.client.workflow.getHandle(workflowId);
    const key = interactionClaimKeys.rung(interactionId, 0);
    try {
      await firstSendReported(interaction, 'the rung failed at the push service');
      push.recover(carol);
      await waitUntil('the rung sent', () => stack.stores.claims.wasDelivered(key));
    } finally {
      push.recover(carol);
      await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'y' });
      await interaction.result();
      recordFixture(stack.config, workflowId, 'interaction-history-rung-failed-retried.json');
    }
    const result = await interaction.result();
    assert.deepEqual(result, { rungsSent: [0], snoozesSent: 0, closed: true });
    const kinds = carolsPushes(runId).map((r) => (r.payload as PushPayload).kind);
    assert.deepEqual(kinds, ['human_input_requested', 'answered'], 'the rung once, then its close');
  });

  it("a rung that reached one of its devices while the other's push service failed reaches that one too once it is back, and the first once", async () => {
    const [phone, laptop] = (await subscribeDevices(stack, { dave: 2 })).dave;
    push.failAlways(laptop, 503);
    const [{ runId, interactionId }] = await pausesOf(1, [{ afterSeconds: 1, to: ['dave'], via: 'push' }]);
    const interaction = stack.client.workflow.getHandle(`interaction|${interactionId}`);
    const rungsOn = (device: SubscriptionJSON) =>
      push.received(device).filter((r) => (r.payload as PushPayload).runId === runId);
    try {
      await firstSendReported(interaction, 'the rung sent, its laptop failing');
      assert.equal(rungsOn(phone).length, 1, 'the phone has the rung');
      push.recover(laptop);
      await waitUntil('the laptop has the rung too', async () => rungsOn(laptop).length === 1, {
        timeoutMs: 60_000,
      });
      await waitUntil('the rung settled', () =>
        stack.stores.claims.wasDelivered(interactionClaimKeys.rung(interactionId, 0)),
      );
      assert.equal(rungsOn(phone).length, 1, 'the phone is not sent it again');
    } finally {
      push.recover(laptop);
      await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'y' });
    }
    assert.deepEqual((await interaction.result()).rungsSent, [0]);
  });

  it('a rung answered while one of its devices is still owed it was sent: settled delivered and announced, not "answered first"', async () => {
    const [phone, laptop] = (await subscribeDevices(stack, { erin: 2 })).erin;
    push.failAlways(laptop, 503);
    const [{ runId, interactionId }] = await pausesOf(1, [{ afterSeconds: 1, to: ['erin'], via: 'push' }]);
    const interaction = stack.client.workflow.getHandle(`interaction|${interactionId}`);
    const key = interactionClaimKeys.rung(interactionId, 0);
    try {
      await firstSendReported(interaction, 'the rung sent, its laptop failing');
      assert.equal(push.received(phone).filter((r) => (r.payload as PushPayload).runId === runId).length, 1);
      await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'y' });
      assert.deepEqual((await interaction.result()).rungsSent, [0]);
    } finally {
      push.recover(laptop);
    }
    assert.equal((await stack.stores.claims.describe(key)).result, 'delivered');
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    const rung = (timeline.body.entries as { kind: string; detail?: string }[]).find(
      (e) => e.kind === 'rung',
    );
    assert.ok(rung && !/answered first/.test(rung.detail ?? ''), JSON.stringify(rung));
  });

  it('a question an assistant stands by on climbs no rung: each settles vetoed, nobody is paged (the standby veto)', async () => {
    const created = await alice.post('/api/v1/runs', {
      title: 'Assisted',
      escalation: { rungs: [{ afterSeconds: 1, to: ['carol'], via: 'push' }] },
    });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    assert.equal((await alice.put(`/api/v1/assistants/asst_1/watches/${runId}`)).status, 200);
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
    assert.equal(paused.status, 200, paused.text);
    const interactionId = paused.body.interactionId as string;
    const key = interactionClaimKeys.rung(interactionId, 0);
    await waitUntil('the rung settled', () => stack.stores.claims.wasDelivered(key), {
      timeoutMs: SETTLE_MS,
    });
    assert.equal((await stack.stores.claims.describe(key)).result, 'vetoed');
    assert.deepEqual(
      push.received(carol).filter((r) => (r.payload as PushPayload).runId === runId),
      [],
      'carol is not paged while the assistant stands by',
    );
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    const rung = (timeline.body.entries as { kind: string; detail?: string }[]).find(
      (e) => e.kind === 'rung',
    );
    assert.equal(rung?.detail, 'to carol: not sent: an assistant stands by');
    const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'y',
    });
    assert.equal(answered.status, 200, answered.text);
  });

  it("a rung naming someone outside the team reaches only the team's people", async () => {
    // mallory's only device is registered in another team: the run's question and its actions are acme's.
    const mallorysPhone = push.endpoint('mallory-elsewhere');
    const subscribed = await stack.anonymous
      .as('mallory', 'elsewhere')
      .post('/api/v1/notifications/push/subscriptions', mallorysPhone);
    assert.equal(subscribed.status, 201, subscribed.text);
    const [{ runId, interactionId }] = await pausesOf(1, [
      { afterSeconds: 1, to: ['mallory', 'carol'], via: 'push' },
    ]);
    await everySettled('the rung sent', [{ interactionId }], (id) => interactionClaimKeys.rung(id, 0));
    assert.equal(carolsPushes(runId).length, 1, 'carol, in the team, has the rung');
    assert.deepEqual(push.received(mallorysPhone), [], "mallory's device in another team has nothing");
    await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'y' });
  });

  it('a question its pause took for failed (its write landed, its answer lost) while the run waits on it: its rung goes, its snooze is taken', async () => {
    const [{ runId, interactionId }] = await pausesOf(1, [
      { afterSeconds: RUNG_SECONDS, to: ['carol'], via: 'push' },
    ]);
    // What the pause leaves when its transition's write landed but the store's answer was lost: the question
    // marked abandoned, the run paused on it all the same (and answerable, as recordAnswer takes it).
    await stack.mongo.db
      .collection('interactions')
      .updateOne({ _id: interactionId as never }, { $set: { status: 'abandoned' } });
    await everySettled('the rung settled', [{ interactionId }], (id) => interactionClaimKeys.rung(id, 0));
    const [rung] = carolsPushes(runId);
    assert.ok(rung, 'the rung reached carol');
    const snooze = (rung.payload as PushPayload).actions?.find((a) => a.action === 'snooze');
    assert.ok(snooze, 'the rung offers a snooze');
    const snoozed = await stack.anonymous.post('/api/v1/interactions/actions', { token: snooze.token });
    assert.equal(snoozed.status, 202, snoozed.text);
    // The run page offers it to answer, as the pushes do.
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    assert.equal(timeline.body.question?.interactionId, interactionId, timeline.text.slice(0, 300));
    const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'y',
    });
    assert.equal(answered.status, 200, answered.text);
  });

  /**
   * A question asked under a team policy of one rung to carol, its rung sent and its execution ended (as it ends once
   * nothing is left to send, ten minutes on, or as a worker's reset leaves it); then the admin changes the policy to
   * someone else first and carol later. `restore` puts the team's policy back.
   */
  async function askedBeforeThePolicyChanged() {
    const before = (await admin.get('/api/v1/teams/current/escalation')).body as { rungs: unknown[] };
    const policy = (rungs: unknown[]) => admin.put('/api/v1/teams/current/escalation', { rungs });
    const restore = async () => void (await policy(before.rungs));
    assert.equal((await policy([{ afterSeconds: RUNG_SECONDS, to: ['carol'], via: 'push' }])).status, 200);
    // Launched without a ladder of its own: the team's.
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    const runId = created.body.id as string;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
    const interactionId = paused.body.interactionId as string;
    await everySettled('the rung settled', [{ interactionId }], (id) => interactionClaimKeys.rung(id, 0));
    const handle = stack.client.workflow.getHandle(interactionWorkflowId(interactionId));
    const first = (await handle.describe()).runId;
    await handle.terminate('ended with nothing left to send');
    const changed = await policy([
      { afterSeconds: RUNG_SECONDS, to: 'owner', via: 'push' },
      { afterSeconds: RUNG_SECONDS + 1, to: ['carol'], via: 'push' },
    ]);
    assert.equal(changed.status, 200, changed.text);
    return { runId, interactionId, handle, first, restore };
  }

  /**
   * Carol snoozes from her rung: a new execution of the question's workflow. Answers once it waits on the snooze's
   * hour, when every rung it found due was decided.
   */
  async function snoozedFromCarolsRung(runId: string, handle: WorkflowHandle): Promise<void> {
    const [rung] = carolsPushes(runId);
    const snooze = (rung.payload as PushPayload).actions!.find((a) => a.action === 'snooze')!;
    const snoozed = await stack.anonymous.post('/api/v1/interactions/actions', { token: snooze.token });
    assert.equal(snoozed.status, 202, snoozed.text);
    await waitUntil('the new execution to wait on the snooze', async () => {
      const { events } = await handle.fetchHistory();
      return events!.some(
        (e) => Number(e.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0) > 600,
      );
    });
  }

  it("a question keeps the ladder it was asked with: a later execution after the team's policy changed sends no rung twice", async () => {
    const { runId, interactionId, handle, restore } = await askedBeforeThePolicyChanged();
    try {
      await snoozedFromCarolsRung(runId, handle);
      assert.equal(carolsPushes(runId).length, 1, 'carol was sent her rung again');
      const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(answered.status, 200, answered.text);
    } finally {
      await restore();
    }
  });

  /**
   * The question asked a month before (its run's pause too), and what deduped its first rung reaped, as 30 days
   * after the rung settled: its claim and its delivery rows.
   */
  async function aMonthOn(runId: string, interactionId: string): Promise<void> {
    const monthAgo = new Date(Date.now() - 31 * 24 * 3600_000);
    const { db } = stack.mongo;
    await db
      .collection('interactions')
      .updateOne({ _id: interactionId as never }, { $set: { createdAt: monthAgo } });
    await db.collection('runs').updateOne({ _id: runId as never }, { $set: { 'pause.at': monthAgo } });
    await db
      .collection('sent_notifications')
      .deleteOne({ _id: interactionClaimKeys.rung(interactionId, 0) as never });
    await db
      .collection('push_deliveries')
      .deleteMany({ episodeId: `${inputEpisodeId(runId, interactionId)}|rung:0` });
  }

  /** A new execution of the question's workflow that waits out its last minutes: every rung of its ladder decided. */
  const nothingLeftToSend = (handle: WorkflowHandle, first: string) =>
    waitUntil('the new execution to have nothing left to send', async () => {
      if ((await handle.describe()).runId === first) return false;
      const { events } = await handle.fetchHistory();
      return events!.some(
        (e) => Number(e.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0) >= 300,
      );
    });

  it('a question still open a month on climbs no rung again once its claims are reaped (a snooze starts a new execution)', async () => {
    const { runId, interactionId, handle, restore } = await askedBeforeThePolicyChanged();
    try {
      await aMonthOn(runId, interactionId);
      await snoozedFromCarolsRung(runId, handle);
      assert.equal(carolsPushes(runId).length, 1, 'carol was paged again a month on');
      recordFixture(
        stack.config,
        interactionWorkflowId(interactionId),
        'interaction-history-rung-lapsed.json',
      );
      const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(answered.status, 200, answered.text);
    } finally {
      await restore();
    }
  });

  it("a question emitted again after the team's policy changed (a replay) keeps its ladder: no rung twice", async () => {
    const { runId, interactionId, handle, first, restore } = await askedBeforeThePolicyChanged();
    try {
      // Its outcome is emitted again, as a replay emits it (the sweep's, or a watch's end on a question the veto
      // held back), and with it the question's workflow, a new execution.
      const emitter = createOutcomeEmitter({
        client: stack.client,
        taskQueue: stack.config.temporalTaskQueue,
        runs: stack.stores.runs,
        options: episodeOptions(stack.config),
      });
      assert.ok(await emitter.emitRunOutcome(runId, undefined, 'acme', 'ALLOW_DUPLICATE'));
      await nothingLeftToSend(handle, first);
      assert.equal(carolsPushes(runId).length, 1, 'carol was sent her rung again');
      assert.equal(
        await stack.stores.claims.describe(interactionClaimKeys.rung(interactionId, 1)).then((c) => c.state),
        'absent',
        "the new policy's second rung is not this question's",
      );
      const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(answered.status, 200, answered.text);
    } finally {
      await restore();
    }
  });

  it('a question emitted again by the API a month on (its ladder read there) climbs no rung again once its claims are reaped', async () => {
    const { runId, interactionId, handle, first, restore } = await askedBeforeThePolicyChanged();
    try {
      await aMonthOn(runId, interactionId);
      // Emitted again as the API's emitter does (a watch's end): the plan goes with the workflow's start.
      const emitter = createOutcomeEmitter({
        client: stack.client,
        taskQueue: stack.config.temporalTaskQueue,
        runs: stack.stores.runs,
        options: episodeOptions(stack.config),
        questions: stack.stores,
      });
      assert.ok(await emitter.emitRunOutcome(runId, undefined, 'acme', 'ALLOW_DUPLICATE'));
      await nothingLeftToSend(handle, first);
      assert.equal(carolsPushes(runId).length, 1, 'carol was paged again a month on');
      const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(answered.status, 200, answered.text);
    } finally {
      await restore();
    }
  });

  it('a rung to the team reaches its people however many devices each holds (up to PUSH_MAX_SUBSCRIPTIONS_PER_USER)', async () => {
    // Twelve people with twenty devices each, the most a person may register by default.
    const rows = Array.from({ length: 12 * 20 }, (_, i) => ({
      _id: `sub_crowd_${i}`,
      teamId: 'crowd',
      userId: `person${String(Math.floor(i / 20)).padStart(2, '0')}`,
    }));
    await stack.mongo.db.collection('push_subscriptions').insertMany(rows as never[]);
    const people = await stack.stores.pushSubscriptions.usersOfTeam('crowd', 10);
    assert.deepEqual(
      people,
      Array.from({ length: 10 }, (_, i) => `person${String(i).padStart(2, '0')}`),
    );
    assert.equal((await stack.stores.pushSubscriptions.usersOfTeam('crowd', 100)).length, 12);
  });

  it("a close every device refused for good is settled, not replayed by the sweep's every pass", async () => {
    const [{ runId, interactionId }] = await pausesOf(1, [{ afterSeconds: 1, to: ['carol'], via: 'push' }]);
    await everySettled('the rung sent', [{ interactionId }], (id) => interactionClaimKeys.rung(id, 0));
    assert.equal(carolsPushes(runId).length, 1);
    // Carol's push service now refuses what we send her (400: the same message will never be taken).
    push.failAlways(carol, 400);
    const before = push.attempts(carol).length;
    const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'y',
    });
    assert.equal(answered.status, 200, answered.text);
    await waitUntil('the close tried', () => push.attempts(carol).length > before);
    const key = interactionClaimKeys.answered(interactionId);
    let state: unknown;
    await waitUntil(
      'the close decided',
      async () => (state = await stack.stores.claims.state(key)) !== 'pending',
      { seen: () => state },
    );
    assert.equal(state, 'delivered', 'settled: nothing left to close');
    const pass = await sweepActivitiesOf(stack).sweepOnce();
    assert.equal(pass.closesReplayed, 0, JSON.stringify(pass));
  });

  it('first PUTs of a webhook at the same moment make one secret: only the PUT that made it is told it', async () => {
    const policy = {
      rungs: [{ afterSeconds: 60, to: 'team' as const, via: 'webhook' as const }],
      webhookUrl: receiver.url,
    };
    let minted = 0;
    const answers = await Promise.all(
      Array.from({ length: 10 }, () =>
        stack.stores.escalationPolicies.put(
          'racers',
          policy,
          'fay',
          new Date(),
          () => `whsec_race${minted++}`,
        ),
      ),
    );
    const told = answers.filter((a) => a.secretCreated).map((a) => a.row.webhookSecret);
    const stored = (await stack.stores.escalationPolicies.get('racers'))!.webhookSecret;
    assert.deepEqual(told, [stored], `told ${JSON.stringify(told)}, stored ${stored}`);
    assert.ok(
      answers.every((a) => a.row.webhookSecret === stored),
      'every answer signs with the stored secret',
    );
  });

  it('a first PUT of a webhook cut part way is told its secret when retried, whichever write was cut', async () => {
    const policy = {
      rungs: [{ afterSeconds: 60, to: 'team' as const, via: 'webhook' as const }],
      webhookUrl: receiver.url,
    };
    for (const cutWrite of ['updateOne', 'findOneAndUpdate'] as const) {
      const teamId = `cut-${cutWrite}`;
      let cut = true;
      // The store on a connection that drops this write once, before it reaches the server.
      const db = stack.mongo.db;
      const flaky = {
        collection: (name: string) =>
          new Proxy(db.collection(name), {
            get(target, prop) {
              const value: unknown = Reflect.get(target, prop);
              if (prop === cutWrite && cut)
                return async () => {
                  cut = false;
                  throw new Error('connection reset');
                };
              return typeof value === 'function' ? value.bind(target) : value;
            },
          }),
      } as unknown as Db;
      const store = createEscalationPolicyStore(flaky);
      let minted = 0;
      const told: string[] = [];
      // The admin's PUT, then its retry after the error.
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          const answer = await store.put(teamId, policy, 'fay', new Date(), () => `whsec_cut${minted++}`);
          if (answer.secretCreated) told.push(answer.row.webhookSecret!);
        } catch {
          assert.equal(attempt, 0, 'only the cut attempt fails');
        }
      }
      const stored = (await stack.stores.escalationPolicies.get(teamId))!.webhookSecret;
      assert.deepEqual(told, [stored], `${cutWrite} cut: told ${JSON.stringify(told)}, stored ${stored}`);
    }
  });

  it('a webhook rung posts one signed interaction.escalated event', async () => {
    const put = await admin.put('/api/v1/teams/current/escalation', {
      rungs: [{ afterSeconds: 1, to: 'team', via: 'webhook' }],
      webhookUrl: receiver.url,
    });
    assert.equal(put.status, 200, put.text);
    // The secret was made by the first test's PUT; a fresh team would get it here.
    const secret = (await stack.stores.escalationPolicies.get('acme'))!.webhookSecret!;
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    const runId = created.body.id as string;
    const res = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
    const interactionId = res.body.interactionId as string;
    const before = receiver.received.length;
    await receiver.waitFor(before + 1);
    const [got] = receiver.received.slice(before);
    const event = new Webhook(secret).verify(got.body, {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    }) as { type: string; data: { interactionId: string } };
    assert.equal(event.type, 'interaction.escalated');
    assert.equal(event.data.interactionId, interactionId);
    assert.equal(got.headers['webhook-id'], interactionClaimKeys.rung(interactionId, 0));
    assert.deepEqual(receiver.schemaMismatches, []);
  });

  it('the webhook secret rotates (admins only): rungs are signed with the new one and, during the overlap, the old', async () => {
    const ROTATE = '/api/v1/teams/current/escalation/rotate-secret';
    assert.equal((await alice.post(ROTATE)).status, 403, 'a member who is not an admin');
    const nohook = adminOf(stack.anonymous, 'nia', 'nohook-rotate');
    const none = await nohook.post(ROTATE);
    assert.equal(none.status, 409, none.text);
    assert.match(none.body.error, /webhookUrl/);
    // A policy whose webhook was taken away keeps its secret, and has nothing to rotate it for.
    const rung = { afterSeconds: 60, to: 'team', via: 'webhook' };
    assert.equal(
      (await nohook.put('/api/v1/teams/current/escalation', { rungs: [rung], webhookUrl: receiver.url }))
        .status,
      200,
    );
    assert.equal((await nohook.put('/api/v1/teams/current/escalation', { rungs: [] })).status, 200);
    assert.equal((await nohook.post(ROTATE)).status, 409);
    const put = await admin.put('/api/v1/teams/current/escalation', {
      rungs: [{ afterSeconds: 1, to: 'team', via: 'webhook' }],
      webhookUrl: receiver.url,
    });
    assert.equal(put.status, 200, put.text);
    const old = (await stack.stores.escalationPolicies.get('acme'))!.webhookSecret!;
    const rotated = await admin.post(ROTATE);
    assert.equal(rotated.status, 200, rotated.text);
    const secret = rotated.body.secret as string;
    assert.match(secret, /^whsec_/);
    assert.notEqual(secret, old);
    assert.equal((await alice.get('/api/v1/teams/current/escalation')).body.webhookSecret, undefined);
    const runId = (await alice.post('/api/v1/runs', { title: 'Deploy' })).body.id as string;
    const res = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
    const interactionId = res.body.interactionId as string;
    const webhookId = interactionClaimKeys.rung(interactionId, 0);
    await waitUntil('the rung posted', () =>
      receiver.received.find((r) => r.headers['webhook-id'] === webhookId),
    );
    const got = receiver.received.find((r) => r.headers['webhook-id'] === webhookId)!;
    const headers = {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    };
    for (const key of [secret, old]) new Webhook(key).verify(got.body, headers);
    await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, { answer: 'y' });
  });

  /**
   * A pause whose one rung (a webhook's unless `rung` says) is an hour off (the worker leaves it), and the rung's
   * activity for the test to run by hand, with `webhook` and `announce` as given.
   */
  async function rungByHand(deps: {
    webhook?: Partial<Parameters<typeof createInteractionActivities>[0]['webhook']>;
    announce: Parameters<typeof createInteractionActivities>[0]['announce'];
    claims?: Parameters<typeof createInteractionActivities>[0]['claims'];
    rung?: EscalationRung;
  }) {
    const rung = deps.rung ?? ({ afterSeconds: 3600, to: 'team', via: 'webhook' } as const);
    const put = await admin.put('/api/v1/teams/current/escalation', {
      rungs: [rung],
      webhookUrl: receiver.url,
    });
    assert.equal(put.status, 200, put.text);
    const [{ runId, interactionId }] = await pausesOf(1, [rung]);
    const { sendRung, followUpSentBefore } = createInteractionActivities({
      push: {
        ...stack.stores,
        sender: pushSenderFor(stack.config, { ca: push.ca }),
        studioUrl: stack.config.studioUrl,
        actionTokenTtlSeconds: stack.config.actionTokenTtlSeconds,
        fanOutWidth: 4,
        log: () => undefined,
        now: () => new Date(),
      } as unknown as PushActivityDeps,
      claims: deps.claims ?? stack.stores.claims,
      escalationPolicies: stack.stores.escalationPolicies,
      webhook: { ...callbackSendSettings(stack.config), now: () => new Date(), ...deps.webhook },
      webhookRetrySeconds: [1],
      announce: deps.announce,
    });
    const webhookId = interactionClaimKeys.rung(interactionId, 0);
    return {
      runId,
      interactionId,
      send: () => sendRung({ runId, teamId: 'acme', interactionId }, 0, rung),
      /** What the workflow asks at the answer of a rung whose try threw. */
      sentBefore: () =>
        followUpSentBefore({ runId, teamId: 'acme', interactionId }, { what: 'rung', index: 0, rung }),
      posts: () => receiver.received.filter((r) => r.headers['webhook-id'] === webhookId).length,
    };
  }

  for (const via of ['push', 'webhook'] as const)
    it(`a ${via} rung that reached its person, tried again after the answer (its announce failed), was sent: delivered and announced, not closed`, async () => {
      let announceDown = true;
      const announced: string[] = [];
      const { runId, interactionId, send, posts } = await rungByHand({
        rung: { afterSeconds: 3600, to: via === 'push' ? ['carol'] : 'team', via },
        announce: async (event) => {
          if (announceDown) throw new Error('Temporal unreachable');
          announced.push(event.type);
        },
      });
      // The question pushed to carol (the answer's close, which replaces it on her device, may come any time after).
      const reached = () =>
        via === 'webhook'
          ? posts()
          : push.received(carol).filter((r) => {
              const payload = r.payload as PushPayload;
              return payload.runId === runId && payload.kind === 'human_input_requested';
            }).length;
      await assert.rejects(send(), /Temporal unreachable/);
      assert.equal(reached(), 1, 'the first try reached its person');
      const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(answered.status, 200, answered.text);
      announceDown = false;
      assert.deepEqual(await send(), { result: 'delivered', delivered: 1 });
      assert.deepEqual(announced, ['interaction.escalated']);
      assert.equal(reached(), 1, 'nothing sent again');
    });

  it('a rung whose try reached its person then threw, asked at the answer while its announce still fails: sent, nothing sent again', async () => {
    const announced: string[] = [];
    let announceDown = true;
    const { runId, interactionId, send, sentBefore } = await rungByHand({
      rung: { afterSeconds: 3600, to: ['carol'], via: 'push' },
      announce: async (event) => {
        if (announceDown) throw new Error('Temporal unreachable');
        announced.push(event.type);
      },
    });
    const questions = () =>
      push.received(carol).filter((r) => {
        const payload = r.payload as PushPayload;
        return payload.runId === runId && payload.kind === 'human_input_requested';
      }).length;
    await assert.rejects(send(), /Temporal unreachable/);
    const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'y',
    });
    assert.equal(answered.status, 200, answered.text);
    assert.deepEqual(await sentBefore(), { result: 'delivered', delivered: 1 });
    assert.deepEqual(announced, [], 'not announced while its announce fails');
    announceDown = false;
    assert.deepEqual(await sentBefore(), { result: 'delivered', delivered: 1 });
    assert.deepEqual(announced, ['interaction.escalated']);
    assert.equal(questions(), 1, 'nothing pushed again');
  });

  it('a webhook rung whose announce failed after its POST is tried again without a second POST', async () => {
    let announceDown = true;
    const announced: string[] = [];
    const { send, posts } = await rungByHand({
      announce: async (event) => {
        if (announceDown) throw new Error('Temporal unreachable');
        announced.push(event.type);
      },
    });
    await assert.rejects(send(), /Temporal unreachable/);
    assert.equal(posts(), 1);
    announceDown = false;
    const retried = await send();
    assert.deepEqual(retried, { result: 'delivered', delivered: 1 });
    assert.equal(posts(), 1, 'the retry does not post the rung again');
    assert.deepEqual(announced, ['interaction.escalated']);
  });

  it('a webhook rung answered 2xx whose note of the POST fails (the store away a moment) is delivered, not posted again', async () => {
    let noteDown = true;
    const { send, posts } = await rungByHand({
      announce: async () => undefined,
      claims: {
        ...stack.stores.claims,
        noteOnce: async (...args) => {
          if (noteDown) {
            noteDown = false;
            throw new Error('the store is away');
          }
          return stack.stores.claims.noteOnce(...args);
        },
      },
    });
    assert.deepEqual(await send(), { result: 'delivered', delivered: 1 });
    assert.equal(posts(), 1);
  });

  it("a webhook rung waiting for its origin's slot when the answer comes posts nothing: it settles closed", async () => {
    // On a pacing whose one slot at the receiver's origin the test holds.
    const pacing = createOriginPacing({
      maxInFlight: 1,
      breakerFailures: 100,
      cooldownMs: 1000,
      maxCooldownMs: 1000,
    });
    let entered = 0;
    const counted: typeof pacing = { ...pacing, enter: (...args) => (entered++, pacing.enter(...args)) };
    const { runId, interactionId, send, posts } = await rungByHand({
      webhook: { pacing: counted },
      announce: async () => undefined,
    });
    const slot = await counted.enter(new URL(receiver.url).origin, { maxWaitMs: 1000 });
    if (slot.held) throw new Error('the test could not take the slot');
    const sent = send();
    await waitUntil('the rung waiting for the slot', () => entered === 2);
    const answered = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
      answer: 'y',
    });
    assert.equal(answered.status, 200, answered.text);
    slot.done('neutral');
    assert.deepEqual(await sent, { result: 'closed', delivered: 0 });
    assert.equal(posts(), 0, 'no rung after the answer');
  });

  it("a webhook rung to a failing receiver: once its origin's breaker opens, the rung's retries are held there", async () => {
    const failing = await CallbackReceiver.start();
    try {
      failing.answerAlways({ status: 503 });
      const put = await admin.put('/api/v1/teams/current/escalation', {
        rungs: [{ afterSeconds: 1, to: 'team', via: 'webhook' }],
        webhookUrl: failing.url,
      });
      assert.equal(put.status, 200, put.text);
      const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
      const runId = created.body.id as string;
      const res = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
      const interaction = stack.client.workflow.getHandle(`interaction|${res.body.interactionId}`);
      const rungSendsDone = async () =>
        (await interaction.fetchHistory()).events!.filter((e) => e.activityTaskCompletedEventAttributes)
          .length;
      await waitUntil(
        'an attempt after the breaker opened',
        async () => (await rungSendsDone()) > BREAKER_FAILURES,
      );
      assert.equal(
        failing.received.length,
        BREAKER_FAILURES,
        'the attempts past the breaker never reached it',
      );
    } finally {
      await failing.close();
    }
  });

  it("a pause's rung and its answer: a team endpoint hears each once, the run's timeline shows the rung", async () => {
    const endpointReceiver = await CallbackReceiver.start();
    try {
      const created = await admin.post('/api/v1/endpoints', {
        url: endpointReceiver.url,
        eventTypes: ['interaction.answered', 'interaction.escalated'],
      });
      assert.equal(created.status, 201, created.text);
      const [{ runId, interactionId }] = await pausesOf(1, [{ afterSeconds: 1, to: ['carol'], via: 'push' }]);
      await waitUntil('the rung sent', () =>
        stack.stores.claims.wasDelivered(interactionClaimKeys.rung(interactionId, 0)),
      );
      const res = await alice.post(`/api/v1/runs/${runId}/interactions/${interactionId}/answer`, {
        answer: 'y',
      });
      assert.equal(res.status, 200, res.text);
      // The interaction workflow ends after its close; each event's own workflow after its delivery.
      await stack.client.workflow.getHandle(`interaction|${interactionId}`).result();
      await endpointReceiver.waitFor(2);
      const events = endpointReceiver.received.map(
        (call) =>
          new Webhook(created.body.secret).verify(
            call.body,
            call.headers as Record<string, string>,
          ) as TeamEventBody,
      );
      for (const event of events)
        await stack.client.workflow.getHandle(teamEventWorkflowId(event.id)).result();
      assert.equal(endpointReceiver.received.length, 2, 'one event each, nothing repeated');
      const byType = new Map(events.map((event) => [event.type, event]));
      assert.deepEqual(byType.get('interaction.escalated')?.data, {
        interactionId,
        rung: 0,
        to: ['carol'],
        via: 'push',
        reached: 1,
      });
      assert.equal(byType.get('interaction.answered')?.data.answeredBy, 'alice');
      for (const event of events) assert.equal(event.run?.id, runId);
      assert.ok(byType.get('interaction.answered')!.sequence > byType.get('interaction.escalated')!.sequence);

      // The run's timeline shows the rung between the pause and its answer.
      const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
      assert.equal(timeline.status, 200, timeline.text);
      const entries = timeline.body.entries as {
        kind: string;
        rung?: number;
        via?: string;
        detail?: string;
      }[];
      const rungs = entries.filter((entry) => entry.kind === 'rung');
      assert.deepEqual(
        rungs.map(({ rung, via, detail }) => ({ rung, via, detail })),
        [{ rung: 1, via: 'push', detail: 'to carol' }],
      );
      const kinds = entries.map((entry) => entry.kind);
      assert.ok(
        kinds.indexOf('paused') < kinds.indexOf('rung') && kinds.indexOf('rung') < kinds.indexOf('answered'),
        `${kinds}`,
      );

      // explain shows the question's follow-ups beside its own pushes: the rung's and the close's.
      const explained = await explainRun(
        {
          ...stack.stores,
          claims: createClaimReader(stack.mongo.db),
          client: stack.client,
          namespace: 'default',
          temporalUiUrl: 'http://ui',
        },
        runId,
      );
      const question = explained!.episodes.find((e) => e.episodeId === inputEpisodeId(runId, interactionId));
      assert.ok(question, JSON.stringify(explained!.episodes.map((e) => e.episodeId)));
      assert.deepEqual(
        question.followUpPushes.map(({ followUp, userId }) => ({ followUp, userId })),
        [
          { followUp: 'rung:0', userId: 'carol' },
          { followUp: 'answered', userId: 'carol' },
        ],
      );
      assert.match(renderExplanation(explained!), /follow-up pushes \(2\):\n.* rung:0 to carol via /);
      // And the episodes view, per device, with what each device reported.
      const view = await alice.get(`/api/v1/runs/${runId}/episodes`);
      assert.equal(view.status, 200, view.text);
      const viewed = (
        view.body.episodes as { episodeId: string; followUpDevices: Record<string, unknown>[] }[]
      ).find((e) => e.episodeId === question.episodeId);
      assert.deepEqual(
        viewed?.followUpDevices.map(({ followUp, userId, receipt }) => ({ followUp, userId, receipt })),
        [
          { followUp: 'rung:0', userId: 'carol', receipt: 'none' },
          { followUp: 'answered', userId: 'carol', receipt: 'none' },
        ],
      );
    } finally {
      await endpointReceiver.close();
    }
  });

  it('do-not-disturb holds a rung only when its kind does not break through (human input does by default)', async () => {
    const carolsPrefs = stack.anonymous.as('carol', 'acme');
    const rungs = [{ afterSeconds: 1, to: ['carol'], via: 'push' }];
    const dnd = new Date(Date.now() + 3600_000).toISOString();
    const rungOf = async ({ interactionId }: { interactionId: string }) => {
      const key = interactionClaimKeys.rung(interactionId, 0);
      await waitUntil('the rung settled', () => stack.stores.claims.wasDelivered(key));
      return stack.stores.claims.describe(key);
    };
    try {
      const held = await carolsPrefs.put('/api/v1/notifications/prefs', {
        scope: 'own',
        doNotDisturbUntil: dnd,
        breakThrough: [],
      });
      assert.equal(held.status, 200, held.text);
      const [quiet] = await pausesOf(1, rungs);
      assert.deepEqual(await rungOf(quiet), { state: 'delivered', result: 'held' });
      assert.equal(carolsPushes(quiet.runId).length, 0, 'held for her digest');

      const through = await carolsPrefs.put('/api/v1/notifications/prefs', {
        scope: 'own',
        breakThrough: ['human_input_requested'],
      });
      assert.equal(through.status, 200, through.text);
      assert.equal(through.body.doNotDisturbUntil, dnd, 'still do-not-disturb');
      const [urgent] = await pausesOf(1, rungs);
      assert.deepEqual(await rungOf(urgent), { state: 'delivered', result: 'delivered' });
      assert.equal(carolsPushes(urgent.runId).length, 1, 'broke through');
    } finally {
      await carolsPrefs.put('/api/v1/notifications/prefs', { scope: 'own', doNotDisturbUntil: null });
    }
  });
});
