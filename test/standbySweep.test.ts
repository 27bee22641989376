// The standby veto and the sweep, on the real servers: a pause vetoed by an active assistant watch costs the sweep
// nothing (no episode workflow per pass), and is pushed exactly once when the watch ends while the run is still
// paused (the seed: the veto leaves the episode replayable).
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { SweepReport } from '../contract/workflows';
import type { Config } from '../config';
import type { PushPayload } from '../domain/push';
import { ensureAllIndexes, type Stores } from '../store';
import type { Mongo } from '../store/mongo';
import type { EpisodeResult } from '../contract/workflows';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { startTestApi, type ApiClient } from './support/harness';
import { startPushService, type PushService, type SubscriptionJSON } from './support/pushService';
import { sweepWorkflow } from '../workflows/sweep';

const WATCHED_RUNS = 50;
const PASSES = 5;

describe('standby veto and the sweep', function () {
  this.timeout(300_000);
  let push: PushService;
  let stack: FamilyStack;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let alice: ApiClient;
  let subscription: SubscriptionJSON;

  before(async () => {
    push = await startPushService();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { push },
    );
    ({ config, mongo, stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
    subscription = push.endpoint('alice');
    const res = await alice.post('/api/v1/notifications/push/subscriptions', subscription);
    assert.equal(res.status, 201, res.text);
  });
  after(async () => {
    await stack?.stop();
    await push?.close();
  });

  const handle = (episodeId: string) => client.workflow.getHandle(episodeId);
  const sweep = () =>
    client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `standby-sweep-${Date.now()}-${Math.random()}`,
    }) as Promise<SweepReport>;
  const pushesFor = (episodeId: string) =>
    push.received(subscription).filter((r) => (r.payload as PushPayload).episodeId === episodeId);

  it(`${WATCHED_RUNS} watched paused runs cost ${PASSES} sweep passes no workflow; ending a watch pushes the pause once`, async () => {
    const episodes: { runId: string; episodeId: string }[] = [];
    for (let i = 0; i < WATCHED_RUNS; i++) {
      const run = await alice.post('/api/v1/runs', { title: `Watched ${i}` });
      assert.equal(run.status, 201, run.text);
      const runId: string = run.body.id;
      assert.equal((await alice.put(`/api/v1/assistants/asst_1/watches/${runId}`)).status, 200);
      const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: `Proceed with ${i}?` });
      assert.equal(paused.status, 200, paused.text);
      episodes.push({ runId, episodeId: `${runId}:input:${paused.body.interactionId}` });
    }
    const executions = new Map<string, string>();
    for (const { episodeId } of episodes) {
      assert.equal(((await handle(episodeId).result()) as EpisodeResult).push, 'vetoed');
      executions.set(episodeId, (await handle(episodeId).describe()).runId);
    }

    let started = 0;
    for (let pass = 0; pass < PASSES; pass++) {
      const report = await sweep();
      assert.ok(report.scanned >= WATCHED_RUNS, JSON.stringify(report));
      started += report.started;
    }
    let restarted = 0;
    for (const [episodeId, runId] of executions) {
      if ((await handle(episodeId).describe()).runId !== runId) restarted++;
    }
    assert.deepEqual(
      { started, restarted },
      { started: 0, restarted: 0 },
      `${PASSES} passes over ${WATCHED_RUNS} vetoed pauses`,
    );
    assert.equal(push.received().length, 0, 'a vetoed pause is not pushed');

    // The watch ends while the run is still paused: the pause is pushed, once, and later passes add nothing.
    const [ended] = episodes;
    assert.equal((await alice.delete(`/api/v1/assistants/asst_1/watches/${ended.runId}`)).status, 204);
    await push.waitFor(1, subscription, 30_000);
    for (let pass = 0; pass < 2; pass++) await sweep();
    await handle(ended.episodeId).result();
    assert.equal(pushesFor(ended.episodeId).length, 1, 'the pause whose watch ended is pushed exactly once');
    assert.equal(push.received().length, 1, 'no other pause is pushed');
    assert.equal(await stores.claims.state(ended.episodeId), 'delivered');

    // The same end of a watch whose replay start was lost (the API died right after removing the watch), on a
    // pause older than the sweep's window: the touched run is back in the window, and one pass pushes it once.
    const lost = episodes[1];
    const twoDaysAgo = new Date(Date.now() - 2 * 24 * 3600 * 1000);
    await mongo.db
      .collection('runs')
      .updateOne({ _id: lost.runId as never }, { $set: { updatedAt: twoDaysAgo } });
    assert.equal(await stores.runs.removeWatcher('acme', lost.runId, 'asst_1', new Date()), true);
    assert.equal(await stores.watches.remove('acme', 'asst_1', lost.runId), true);
    const replayed = await sweep();
    assert.equal(replayed.started, 1, JSON.stringify(replayed));
    await handle(lost.episodeId).result();
    const after = await sweep();
    assert.equal(after.started, 0, JSON.stringify(after));
    assert.equal(
      pushesFor(lost.episodeId).length,
      1,
      'the pause whose replay start was lost is pushed by the sweep, once',
    );
    assert.equal(push.received().length, 2);
  });

  describe('a watch made and ended at once: its run lists the assistant only while the watch is there', () => {
    /** A second API on the same stores whose `hold` store call waits, once reached, until `release()`. */
    async function apiHeldAt(hold: (stores: Stores, at: () => Promise<void>) => Stores) {
      let reached!: () => void;
      let release!: () => void;
      const isReached = new Promise<void>((resolve) => (reached = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      const at = async () => {
        reached();
        await released;
      };
      const { api, client: anonymous } = await startTestApi(config, { stores: (s) => hold(s, at) });
      return { api, held: anonymous.as('alice', 'acme'), isReached, release };
    }

    async function agreed(runId: string, assistantId: string): Promise<void> {
      const watched = await stores.watches.exists('acme', assistantId, runId);
      const listed = ((await stores.runs.getForTeam('acme', runId))?.assistantWatchers ?? []).includes(
        assistantId,
      );
      assert.equal(listed, watched, `the run lists the assistant: ${listed}; its watch is there: ${watched}`);
    }

    const newRun = async () =>
      (await alice.post('/api/v1/runs', { title: 'Watched, briefly' })).body.id as string;

    it('a watch ended between its row and its run: the run does not list it', async () => {
      const runId = await newRun();
      const second = await apiHeldAt((s, at) => ({
        ...s,
        runs: { ...s.runs, addWatcher: async (...args) => (await at(), s.runs.addWatcher(...args)) },
      }));
      try {
        const made = second.held.put(`/api/v1/assistants/asst_race1/watches/${runId}`);
        await second.isReached;
        assert.equal((await alice.delete(`/api/v1/assistants/asst_race1/watches/${runId}`)).status, 204);
        second.release();
        assert.equal((await made).status, 200);
        await agreed(runId, 'asst_race1');
      } finally {
        await second.api.close();
      }
    });

    it('a watch made again while its end was between the run and the row: the run does not list it', async () => {
      const runId = await newRun();
      assert.equal((await alice.put(`/api/v1/assistants/asst_race2/watches/${runId}`)).status, 200);
      const second = await apiHeldAt((s, at) => ({
        ...s,
        watches: { ...s.watches, remove: async (...args) => (await at(), s.watches.remove(...args)) },
      }));
      try {
        const ended = second.held.delete(`/api/v1/assistants/asst_race2/watches/${runId}`);
        await second.isReached;
        assert.equal((await alice.put(`/api/v1/assistants/asst_race2/watches/${runId}`)).status, 200);
        second.release();
        assert.equal((await ended).status, 204);
        await agreed(runId, 'asst_race2');
      } finally {
        await second.api.close();
      }
    });
  });

  it('a watch made before runs carried their watchers is copied onto its run at start-up, once', async () => {
    const run = await alice.post('/api/v1/runs', { title: 'Watched the old way' });
    assert.equal(run.status, 201, run.text);
    const runId: string = run.body.id;
    // The old shape: the watch row alone, no copy on the run.
    await mongo.db.collection('assistant_run_watches').insertOne({
      _id: `asst_old|${runId}`,
      assistantId: 'asst_old',
      runId,
      teamId: 'acme',
      active: true,
      updatedAt: new Date(),
    } as never);
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Proceed?' });
    assert.equal(paused.status, 200, paused.text);
    const episodeId = `${runId}:input:${paused.body.interactionId}`;
    assert.equal(((await handle(episodeId).result()) as EpisodeResult).push, 'vetoed');
    const execution = (await handle(episodeId).describe()).runId;

    await ensureAllIndexes(mongo.db);
    await ensureAllIndexes(mongo.db); // start-up again: nothing more to do
    assert.deepEqual((await stores.runs.getById(runId))?.assistantWatchers, ['asst_old']);
    const report = await sweep();
    assert.equal(
      (await handle(episodeId).describe()).runId,
      execution,
      'the sweep left the vetoed pause alone',
    );
    assert.equal(report.started, 0, JSON.stringify(report));
    assert.equal(pushesFor(episodeId).length, 0);
  });
  it('a watch made and ended on a question pushed long ago (its claims and records expired) pushes nothing again', async () => {
    const run = await alice.post('/api/v1/runs', { title: 'Asked a month ago' });
    assert.equal(run.status, 201, run.text);
    const runId: string = run.body.id;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Still there?' });
    assert.equal(paused.status, 200, paused.text);
    const interactionId: string = paused.body.interactionId;
    const episodeId = `${runId}:input:${interactionId}`;
    assert.equal(((await handle(episodeId).result()) as EpisodeResult).push, 'delivered');
    assert.equal(pushesFor(episodeId).length, 1);
    const execution = (await handle(episodeId).describe()).runId;
    // Thirty days on, the question's claims and its delivery records expire (their TTL), the run still paused and
    // long out of the sweep's window.
    await mongo.db.collection('sent_notifications').deleteMany({ _id: { $regex: interactionId } as never });
    await mongo.db.collection('push_deliveries').deleteMany({ episodeId });
    const monthAgo = new Date(Date.now() - 31 * 24 * 3600 * 1000);
    await mongo.db.collection('runs').updateOne({ _id: runId as never }, { $set: { updatedAt: monthAgo } });

    assert.equal((await alice.put(`/api/v1/assistants/asst_late/watches/${runId}`)).status, 200);
    assert.equal((await alice.delete(`/api/v1/assistants/asst_late/watches/${runId}`)).status, 204);
    const report = await sweep();
    const replayed = (await handle(episodeId).describe()).runId !== execution;
    if (replayed) await handle(episodeId).result();
    assert.deepEqual(
      { replayed, started: report.started, pushes: pushesFor(episodeId).length },
      { replayed: false, started: 0, pushes: 1 },
      'a watch that never held the question back owes it no replay',
    );
  });
  it('a question whose push failed, then a watch made and ended on it, is pushed by the watch’s end', async () => {
    push.failAlways(subscription, 503);
    const run = await alice.post('/api/v1/runs', { title: 'Asked while the push service was down' });
    assert.equal(run.status, 201, run.text);
    const runId: string = run.body.id;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Anyone there?' });
    assert.equal(paused.status, 200, paused.text);
    const interactionId: string = paused.body.interactionId;
    const episodeId = `${runId}:input:${interactionId}`;
    assert.equal(((await handle(episodeId).result()) as EpisodeResult).push, 'released');
    push.recover(subscription);
    // Long out of the sweep's window, its release note expired: only the watch's end can bring it back.
    await mongo.db.collection('sent_notifications').deleteMany({ _id: { $regex: interactionId } as never });
    const monthAgo = new Date(Date.now() - 31 * 24 * 3600 * 1000);
    await mongo.db.collection('runs').updateOne({ _id: runId as never }, { $set: { updatedAt: monthAgo } });

    assert.equal((await alice.put(`/api/v1/assistants/asst_late/watches/${runId}`)).status, 200);
    assert.equal((await alice.delete(`/api/v1/assistants/asst_late/watches/${runId}`)).status, 204);
    await push.waitFor(1, subscription, 30_000);
    await handle(episodeId).result();
    assert.equal(pushesFor(episodeId).length, 1, 'the question nobody got is pushed, once');
  });
});
