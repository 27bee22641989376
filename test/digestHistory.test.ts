// A digest held for days in a busy team: every held push is a signal to the person's digest workflow, and its
// history must never reach Temporal's limit (the execution would be terminated, and what it held never sent).
// On a Temporal dev server of its own with the limit lowered to 600 events (it suggests continue-as-new at 300),
// 700 holds (more signals than the limit has events) go to one digest while the person is in do-not-disturb; then
// do-not-disturb ends and one digest of all 700 reaches the device, decrypted by the push service stand-in. What
// the digest carries from one execution to the next, and hands its send, stays the same size however many are held.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import { temporal } from '@temporalio/proto';
import { Registry } from 'prom-client';
import { createActivities, type ActivityDeps } from '../activities';
import { pushSenderFor } from '../delivery/push/sender';
import { createMetrics } from '../platform/metrics';
import { explainRun } from '../operator/explain';
import { renderExplanation } from '../operator/render';
import { createClaimReader } from '../store/claims';
import { addToDigest } from '../client/digest';
import { digestWorkflowId, type DigestResult, type SweepReport } from '../contract/workflows';
import type { PushPayload } from '../domain/push';
import { digestEntryOf } from '../store/push/holds';
import { sweepWorkflow } from '../workflows/sweep';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { startPushService, type PushService } from './support/pushService';
import { recordFixture } from './support/harness';
import { startServers, type ServerStack } from './support/servers';
import { waitUntil } from './support/waitUntil';

const HOLDS = 700;

describe('a digest held for days keeps its history bounded', function () {
  this.timeout(300_000);
  let servers: ServerStack & { temporalAddress: string };
  let push: PushService;
  let stack: FamilyStack;

  before(async () => {
    servers = await startServers('digest-history', {
      temporal: true,
      external: false,
      temporalArgs: [
        '--dynamic-config-value=limit.historyCount.error=600',
        '--dynamic-config-value=limit.historyCount.suggestContinueAsNew=300',
      ],
    });
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        MONGO_URL: servers.mongoUrl,
        TEMPORAL_ADDRESS: servers.temporalAddress,
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { push },
    );
  });

  after(async () => {
    await stack?.stop();
    await push?.close();
    await servers?.stop();
  });

  it(`${HOLDS} holds during do-not-disturb: the digest continues as new while it waits, and sends all ${HOLDS} once reachable`, async () => {
    const { anonymous, client, config } = stack;
    const dee = anonymous.as('dee', 'busy');
    const device = push.endpoint('dee-phone');
    assert.equal((await dee.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    const until = new Date(Date.now() + 3600_000).toISOString();
    const prefs = await dee.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: until });
    assert.equal(prefs.status, 200, prefs.text);

    // What the push activity does for each held push, as a busy team's ends come: ten at a time, each ten once
    // the digest has taken the last (no workflow task pending), so the worker keeps up as it does with episodes.
    const handle = client.workflow.getHandle(digestWorkflowId('busy', 'dee'));
    const caughtUp = async (): Promise<void> => {
      for (;;) {
        const { raw } = await handle.describe();
        if (!raw.pendingWorkflowTask) return;
        await new Promise((resolve) => setImmediate(resolve));
      }
    };
    const hold = (i: number) => ({
      episodeId: `run_busy_${i}:end`,
      runId: `run_busy_${i}`,
      teamId: 'busy',
      userId: 'dee',
      kind: i % 4 === 0 ? 'run_failed' : 'run_finished',
      title: `Job ${i}`,
      reason: 'quiet' as const,
      at: new Date(Date.now() - (HOLDS - i) * 1000),
      releaseAt: new Date(until),
    });
    for (let i = 0; i < HOLDS; i++) {
      const row = hold(i);
      await stack.stores.pushHolds.hold([row]);
      await addToDigest(client, config.temporalTaskQueue, 'busy', 'dee', digestEntryOf(row));
      if (i % 10 === 9) await caughtUp();
    }
    const waiting = await handle.describe();
    assert.equal(waiting.status.name, 'RUNNING', 'the digest was not terminated');
    assert.notEqual(waiting.runId, waiting.raw.workflowExecutionInfo?.firstRunId, 'it continued as new');
    assert.equal(push.received(device).length, 0, 'nothing is pushed during do-not-disturb');

    // Do-not-disturb ends: the digest re-reads when it may go out, and sends everything it held.
    const cleared = await dee.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: null });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual((await handle.result()) as DigestResult, { sent: 1 });
    const payloads = push.received(device).map((r) => r.payload as PushPayload);
    assert.equal(payloads.length, 1);
    assert.equal(payloads[0].kind, 'digest');
    assert.equal(payloads[0].title, `${HOLDS} run updates while you were away`);
    assert.match(
      payloads[0].body,
      new RegExp(`^${HOLDS / 4} failed, ${(HOLDS * 3) / 4} finished · Job ${HOLDS - 1} `),
    );
    assert.deepEqual(push.rejections(), []);
    const sentRows = await stack.mongo.db
      .collection('push_holds')
      .countDocuments({ teamId: 'busy', userId: 'dee', digestSentAt: { $exists: true } });
    assert.equal(sentRows, HOLDS, 'every hold is marked sent');

    // What the last execution was handed when it continued as new, and what its send was handed: bytes that do
    // not follow the number of holds (they listed every held episode).
    const history = await handle.fetchHistory();
    const sizes = (history.events ?? []).flatMap((event) => {
      const payloads =
        event.workflowExecutionStartedEventAttributes?.input?.payloads ??
        event.activityTaskScheduledEventAttributes?.input?.payloads ??
        [];
      const kind = temporal.api.enums.v1.EventType[event.eventType ?? 0];
      return payloads.map((p) => ({ kind, bytes: p.data?.length ?? 0 }));
    });
    assert.ok(sizes.length >= 2, JSON.stringify(sizes));
    for (const { kind, bytes } of sizes)
      assert.ok(bytes < 1024, `${kind}: ${bytes} bytes for ${HOLDS} holds`);
  });

  it('held pushes whose digest was lost: the sweep offers them again, and one digest of them reaches the device', async () => {
    const { anonymous, client, config, stores } = stack;
    const orla = anonymous.as('orla', 'busy');
    const device = push.endpoint('orla-phone');
    assert.equal((await orla.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    // Held three hours ago for an hour of do-not-disturb, and no digest runs for them (terminated, never
    // started): only the store knows they are owed.
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3600_000);
    const rows = [1, 2, 3].map((i) => ({
      episodeId: `run_lost_${i}:end`,
      runId: `run_lost_${i}`,
      teamId: 'busy',
      userId: 'orla',
      kind: 'run_failed',
      title: `Lost ${i}`,
      reason: 'quiet' as const,
      at: hoursAgo(3),
      releaseAt: hoursAgo(2),
    }));
    await stores.pushHolds.hold(rows);

    const report = (await client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `sweep-lost-digest-${Date.now()}`,
    })) as SweepReport;
    assert.equal(report.holdsOffered, rows.length, JSON.stringify(report));
    const [received] = await push.waitFor(1, device, 60_000);
    const payload = received.payload as PushPayload;
    assert.equal(payload.kind, 'digest');
    assert.equal(payload.title, '3 run updates while you were away');
    // The digest marks its holds once its push is recorded, just after the push service has it.
    const digest = client.workflow.getHandle(digestWorkflowId('busy', 'orla'));
    assert.deepEqual((await digest.result()) as DigestResult, { sent: 1 });
    const held = (await Promise.all(rows.map((row) => stores.pushHolds.listForRun(row.runId)))).flat();
    assert.deepEqual(
      held.map((row) => Boolean(row.digestSentAt && !row.owedAt)),
      [true, true, true],
      'each marked sent, none owed',
    );

    // Sent: the next pass offers nothing.
    const again = (await client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `sweep-lost-digest-again-${Date.now()}`,
    })) as SweepReport;
    assert.equal(again.holdsOffered ?? 0, 0);
  });

  it("one person's digest that refuses the offer holds back nobody else's: the pass goes on, and offers it again an hour later", async () => {
    const { anonymous, client, config, stores } = stack;
    const omar = anonymous.as('omar', 'busy');
    const device = push.endpoint('omar-phone');
    assert.equal((await omar.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    const hoursAgo = (h: number) => new Date(Date.now() - h * 3600_000);
    const row = (userId: string, i: number, owedHoursAgo: number) => ({
      episodeId: `run_refused_${userId.length}_${i}:end`,
      runId: `run_refused_${userId.length}_${i}`,
      teamId: 'busy',
      userId,
      kind: 'run_failed',
      title: `Refused ${i}`,
      reason: 'quiet' as const,
      at: hoursAgo(owedHoursAgo + 1),
      releaseAt: hoursAgo(owedHoursAgo),
    });
    // Temporal refuses this person's digest every signal (here its id is past the server's length limit; a
    // digest past its signals per execution is refused the same way), and their rows are owed the longest.
    const refused = 'r'.repeat(1000);
    await stores.pushHolds.hold([row(refused, 1, 5), row(refused, 2, 5)]);
    await stores.pushHolds.hold([row('omar', 1, 2), row('omar', 2, 2)]);

    const report = (await client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `sweep-refused-digest-${Date.now()}`,
    })) as SweepReport;
    assert.equal(report.holdsOffered, 4, JSON.stringify(report));
    assert.equal(report.holdsRefused, 2, JSON.stringify(report));
    const [received] = await push.waitFor(1, device, 60_000);
    assert.equal((received.payload as PushPayload).title, '2 run updates while you were away');
    // The refused rows wait an hour before the next offer: the next pass offers nothing.
    const refusedRows = await stores.pushHolds.listForRun(row(refused, 1, 5).runId);
    assert.ok(
      refusedRows.every((r) => r.owedAt && r.owedAt.getTime() > Date.now()),
      JSON.stringify(refusedRows),
    );
    const again = (await client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `sweep-refused-digest-again-${Date.now()}`,
    })) as SweepReport;
    assert.equal(again.holdsOffered ?? 0, 0, JSON.stringify(again));
  });

  it('a digest no device takes gives up visibly: its holds say so in the episodes view and explain, and a metric counts them', async () => {
    const { anonymous, client, config, stores, mongo } = stack;
    const gia = anonymous.as('gia', 'busy');
    const device = push.endpoint('gia-phone');
    assert.equal((await gia.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    const until = new Date(Date.now() + 3600_000).toISOString();
    assert.equal(
      (await gia.put('/api/v1/notifications/prefs', { scope: 'team', doNotDisturbUntil: until })).status,
      200,
    );
    const runId = (await gia.post('/api/v1/runs', { title: 'Nightly' })).body.id as string;
    assert.equal(
      (await gia.post(`/api/v1/runs/${runId}/fail`, { error: { code: 'boom', message: 'it broke' } })).status,
      200,
    );
    await client.workflow.getHandle(`${runId}:end`).result();
    // The digest's day of sends, played by hand: its workflow (time-skipping suite) calls these after a day.
    await client.workflow.getHandle(digestWorkflowId('busy', 'gia')).terminate('the test plays its day');
    push.failAlways(device, 500);
    const registry = new Registry();
    const activities = createActivities({
      config,
      stores,
      client,
      pushSender: pushSenderFor(config, { ca: push.ca }),
      metrics: createMetrics(registry, { processMetrics: false }),
      log: () => undefined,
    });
    const digest = { digestId: 'digest|gia-day.1', teamId: 'busy', userId: 'gia' };
    const send = await activities
      .sendDigest({ ...digest, tag: 'digest|busy|gia' })
      .catch((err: Error) => err);
    assert.ok(send instanceof Error || (send.addressable && send.delivered === 0), JSON.stringify(send));
    await activities.giveUpDigest(digest);

    const view = await gia.get(`/api/v1/runs/${runId}/episodes`);
    assert.equal(view.status, 200, view.text);
    const [held] = (view.body.episodes as { pushHeld: Record<string, unknown>[] }[])[0].pushHeld;
    assert.equal(held.digestId, digest.digestId);
    assert.equal(typeof held.digestGaveUpAt, 'string', JSON.stringify(held));
    assert.equal(held.digestSentAt, undefined);
    const explained = await explainRun(
      {
        ...stores,
        claims: createClaimReader(mongo.db),
        client,
        namespace: 'default',
        temporalUiUrl: 'http://ui',
      },
      runId,
    );
    assert.match(
      renderExplanation(explained!),
      /gia \(quiet\): digest digest\|gia-day\.1 gave up at .*no device took it/,
    );
    const gaveUp = await registry.getSingleMetric('flow_notify_digest_holds_given_up_total')?.get();
    assert.equal(gaveUp?.values[0]?.value, 1);
    // Given up is settled: no sweep offers it again.
    const owed = await stores.pushHolds.owedBefore(new Date(Date.now() + 365 * 24 * 3600_000), 1000);
    assert.deepEqual(
      owed.filter((row) => row.runId === runId),
      [],
    );
  });

  /**
   * One finished run of `user`'s held for their digest (do-not-disturb), the digest's chain terminated and its send
   * played by hand: the push goes out to the device, then the store fails its settle.
   */
  async function digestSentSettleLost(team: string, user: string, deps: Omit<ActivityDeps, 'stores'>) {
    const { anonymous, client, stores } = stack;
    const person = anonymous.as(user, team);
    const device = push.endpoint(`${user}-phone`);
    assert.equal((await person.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    const until = new Date(Date.now() + 3600_000).toISOString();
    assert.equal(
      (await person.put('/api/v1/notifications/prefs', { scope: 'own', doNotDisturbUntil: until })).status,
      200,
    );
    const runId = (await person.post('/api/v1/runs', { title: 'Weekly' })).body.id as string;
    assert.equal((await person.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
    await client.workflow.getHandle(`${runId}:end`).result();
    await client.workflow.getHandle(digestWorkflowId(team, user)).terminate('the test plays its day');
    const settleLost = createActivities({
      ...deps,
      stores: {
        ...stores,
        pushHolds: {
          ...stores.pushHolds,
          markDigestSent: async () => {
            throw new Error('store unavailable');
          },
        },
      },
    });
    const digest = { digestId: `digest|${user}-day.1`, teamId: team, userId: user };
    const tag = `digest|${team}|${user}`;
    const send = await settleLost.sendDigest({ ...digest, tag }).catch((err: Error) => err);
    assert.ok(send instanceof Error, JSON.stringify(send));
    await push.waitFor(1, device, 30_000);
    return { runId, device, digest, tag };
  }

  it('a digest a device took on its last try, its settle lost (the store away), is not given up: its holds say it went out', async () => {
    const { client, config, stores } = stack;
    const registry = new Registry();
    const deps = {
      config,
      client,
      pushSender: pushSenderFor(config, { ca: push.ca }),
      metrics: createMetrics(registry, { processMetrics: false }),
      log: () => undefined,
    };
    // The digest's last try of its day.
    const { runId, digest } = await digestSentSettleLost('busy', 'hal', deps);
    await createActivities({ ...deps, stores }).giveUpDigest(digest);

    const [held] = await stores.pushHolds.listForRun(runId);
    assert.equal(held.digestId, digest.digestId);
    assert.ok(held.digestSentAt, JSON.stringify(held));
    assert.equal(held.digestGaveUpAt, undefined, 'a device took it: nothing gave up');
    const gaveUp = await registry.getSingleMetric('flow_notify_digest_holds_given_up_total')?.get();
    assert.equal(gaveUp?.values[0]?.value ?? 0, 0);
  });

  it('a digest a device took, its settle lost and its chain then lost (terminated), is not sent again by the next digest that finds its rows', async () => {
    const { client, config, stores } = stack;
    const deps = { config, client, pushSender: pushSenderFor(config, { ca: push.ca }), log: () => undefined };
    // Its chain is lost before it tries again (terminated; a Temporal database lost would do the same).
    const { runId, device, digest, tag } = await digestSentSettleLost('lost-chain', 'ivy', deps);
    // A day on, the first digest's hold on its rows has run out; the next digest of the person (a new chain, the
    // sweep's offer or a new hold's) finds them.
    const dayAgo = new Date(Date.now() - 1000);
    await stack.mongo.db.collection('push_holds').updateMany({ runId }, { $set: { takenUntil: dayAgo } });
    const next = { ...digest, digestId: 'digest|ivy-day.2' };
    await createActivities({ ...deps, stores }).sendDigest({ ...next, tag });
    assert.equal(push.received(device).length, 1, 'the device took the first digest: not sent again');
    const [held] = await stores.pushHolds.listForRun(runId);
    assert.equal(held.digestId, digest.digestId);
    assert.ok(held.digestSentAt, JSON.stringify(held));
  });

  it('an entry held later for quiet hours during a send, when the digest then continues as new, is not held by a stale time', async () => {
    const { anonymous, client, config, stores } = stack;
    const eve = anonymous.as('eve', 'quietly');
    const device = push.endpoint('eve-phone');
    assert.equal((await eve.post('/api/v1/notifications/push/subscriptions', device)).status, 201);
    const handle = client.workflow.getHandle(digestWorkflowId('quietly', 'eve'));
    let n = 0;
    const held = async (reason: 'burst' | 'quiet', releaseAt: Date) => {
      const at = new Date();
      const row = {
        episodeId: `run_eve_${++n}:end`,
        runId: `run_eve_${n}`,
        teamId: 'quietly',
        userId: 'eve',
        kind: 'run_finished',
        title: `Job ${n}`,
        reason,
        at,
        releaseAt,
      };
      await stores.pushHolds.hold([row]);
      await addToDigest(client, config.temporalTaskQueue, 'quietly', 'eve', digestEntryOf(row));
    };
    // A first digest goes out at once; its push service takes it and holds the answer, so the send is in flight.
    push.withholdAnswers(device);
    await held('burst', new Date());
    await waitUntil('the first digest on its way', () => push.received(device).length === 1, {
      timeoutMs: 60_000,
    });
    const first = await handle.describe();
    // Meanwhile: held pushes until Temporal suggests continuing as new (past 300 events, well short of the 600
    // that end an execution), and one whose push read quiet hours that have ended since (a stale release time).
    await held('quiet', new Date(Date.now() + 3600_000));
    while (Number((await handle.describe()).raw.workflowExecutionInfo?.historyLength ?? 0) < 320)
      for (let i = 0; i < 10; i++) await held('burst', new Date());
    push.releaseAnswers(device);
    await waitUntil(
      'the digest continued as new after its send',
      async () => (await handle.describe()).runId !== first.runId,
      { timeoutMs: 60_000 },
    );
    recordFixture(
      config,
      digestWorkflowId('quietly', 'eve'),
      'digest-history-quiet-entry-continued.json',
      first.runId,
    );
    // The next digest goes now, with everything held during the send, not an hour later. (On a loaded machine the
    // withheld first send may time out and go again before it: the same digest, the same title.)
    const titles = () => push.received(device).map((r) => (r.payload as PushPayload).title);
    const [firstTitle] = titles();
    const second = await waitUntil('the next digest', () => titles().find((title) => title !== firstTitle), {
      timeoutMs: 60_000,
    });
    assert.equal(second, `${n - 1} run updates while you were away`);
  });
});
