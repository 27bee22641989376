// The operator family and run health on the real servers: failed-run and router alerts exactly once, stalls,
// budgets, reaping, a worker restart, and a replay of a recorded health history.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import type { ApiHandle } from '../api/server';
import { createOutcomeEmitter, startEpisode, episodeOptions } from '../client/emitter';
import type { Config } from '../config';
import type { OperatorAlert } from '../domain/ops';
import { buildRunOutcome } from '../domain/outcome';
import { createRunsService, type Caller } from '../runs/service';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import type { EpisodeResult } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import {
  ApiClient,
  openStores,
  saveHistory,
  startTestApi,
  startTestWorker,
  temporalClient,
  type RunningWorker,
} from './support/harness';
import { testConfig } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { workflowBundle } from './support/workflowBundle';

// One per version: alerts dispatched inline; each alert its own workflow (OPS_ALERT_WORKFLOW_PATCH); settings
// from the worker and a quiet paused budget (HEALTH_SETTINGS_PATCH). RECORD_HEALTH_HISTORY=1 records the last.
const FIXTURES = [
  'fixtures/run-health-history.json',
  'fixtures/run-health-history-ops-workflow.json',
  'fixtures/run-health-history-settings.json',
].map((f) => path.resolve(__dirname, f));
const FIXTURE = FIXTURES[FIXTURES.length - 1];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('operator family and run health', function () {
  let webhook: CallbackReceiver;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let worker: RunningWorker;
  let api: ApiHandle;
  let alice: ApiClient;
  let client: Client;
  let closeClient: () => Promise<void>;
  const caller: Caller = { userId: 'alice', teamId: 'acme' };

  before(async () => {
    webhook = await CallbackReceiver.start();
    config = testConfig({
      OPS_ALERT_WEBHOOK_URL: webhook.url,
      STALL_AFTER_SECONDS: '2',
      HEALTH_REAP_SECONDS: '3',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ mongo, stores } = await openStores(config));
    worker = await startTestWorker(config, stores);
    const started = await startTestApi(config);
    api = started.api;
    alice = started.client.as('alice', 'acme');
    ({ client, close: closeClient } = await temporalClient(config));
  });
  after(async () => {
    await api?.close();
    await worker?.stop();
    await closeClient?.();
    await mongo?.client.close();
    await webhook?.close();
  });
  beforeEach(() => {
    webhook.received.length = 0;
  });

  const alerts = (runId?: string): OperatorAlert[] =>
    webhook.received
      .map((r) => JSON.parse(r.body) as OperatorAlert)
      .filter((a) => !runId || a.runId === runId);
  const alertsOf = (runId: string, kind: string) => alerts(runId).filter((a) => a.kind === kind);
  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  describe('failed runs and router decisions', () => {
    it('a failed run alerts the operator once, with the classified code; replays and duplicate emits add nothing', async () => {
      const created = await alice.post('/api/v1/runs', { title: 'Billing sync' });
      const id = created.body.id as string;
      await alice.post(`/api/v1/runs/${id}/fail`, {
        error: { code: 'database', message: 'connection reset' },
      });
      assert.equal((await episodeResult(`${id}:end`)).ops, 'delivered');
      const [alert] = alertsOf(id, 'run_failed');
      assert.deepEqual(
        { ...alert, at: undefined },
        {
          version: '1',
          kind: 'run_failed',
          severity: 'critical',
          runId: id,
          teamId: 'acme',
          episodeKey: `${id}:end`,
          summary: `Run ${id} (Billing sync) failed: database`,
          detail: { code: 'database', message: 'connection reset', ownerId: 'alice' },
          at: undefined,
        },
      );
      assert.ok(!Number.isNaN(Date.parse(alert.at)));

      const emitter = createOutcomeEmitter({
        client,
        taskQueue: config.temporalTaskQueue,
        runs: stores.runs,
        options: episodeOptions(config),
      });
      await Promise.all([emitter.emitRunOutcome(id), emitter.emitRunOutcome(id)]);
      const run = (await stores.runs.getById(id))!;
      await startEpisode(
        client,
        config.temporalTaskQueue,
        buildRunOutcome(run)!,
        { callbackRetrySeconds: [1] },
        'ALLOW_DUPLICATE',
      );
      assert.equal((await episodeResult(`${id}:end`)).ops, 'claimed_elsewhere');
      assert.equal(alertsOf(id, 'run_failed').length, 1);
      assert.deepEqual(
        run.opsAlerted,
        [`${id}:end`],
        'the transition marker, stamped off the confirmed claim',
      );
    });

    it('a run that is no longer failed when the alert is built owes nothing', async () => {
      const silent = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
      const run = await silent.create(caller, { title: 'flaky' });
      await silent.fail(caller, run._id, { code: 'oom', message: 'killed' });
      const outcome = buildRunOutcome((await stores.runs.getById(run._id))!)!;
      // Between the publish and the load, the run's record moved on (e.g. an operator marked it finished).
      await mongo.db
        .collection('runs')
        .updateOne({ _id: run._id as never }, { $set: { status: 'finished' } });
      await startEpisode(client, config.temporalTaskQueue, outcome, { callbackRetrySeconds: [1] });
      assert.equal((await episodeResult(`${run._id}:end`)).ops, 'not_owed');
      assert.equal(alerts(run._id).length, 0);
      assert.equal(await stores.claims.state(`ops|${run._id}:end`), 'absent');
    });

    it('a router decision error alerts once however often it is reported', async () => {
      const created = await alice.post('/api/v1/runs', { title: 'Routing' });
      const id = created.body.id as string;
      const report = { decisionId: 'dec_42', error: { code: 'no_route', message: 'no model matched' } };
      const answers = await Promise.all(
        [1, 2, 3].map(() => alice.post(`/api/v1/runs/${id}/route-decision-errors`, report)),
      );
      for (const a of answers) {
        assert.equal(a.status, 202);
        assert.equal(a.body.episodeKey, `route:${id}:dec_42`);
      }
      await client.workflow.getHandle(`ops|route:${id}:dec_42`).result();
      await alice.post(`/api/v1/runs/${id}/route-decision-errors`, report);
      await client.workflow.getHandle(`ops|route:${id}:dec_42`).result();
      assert.equal(alertsOf(id, 'route_decision_error').length, 1);
      assert.equal(alertsOf(id, 'route_decision_error')[0].detail.code, 'no_route');
      const other = await alice.post(`/api/v1/runs/${id}/route-decision-errors`, {
        ...report,
        decisionId: 'dec_43',
      });
      await client.workflow.getHandle(`ops|${other.body.episodeKey}`).result();
      assert.equal(alertsOf(id, 'route_decision_error').length, 2, 'another decision is another alert');
    });

    it("an error's message of any length reaches the operator cut to 1,000 characters: each retry's input carries it", async () => {
      const long = `${'界'.repeat(9_999)}!`;
      const created = await alice.post('/api/v1/runs', { title: 'Verbose' });
      const id = created.body.id as string;
      await alice.post(`/api/v1/runs/${id}/fail`, { error: { code: 'oom', message: long } });
      assert.equal((await episodeResult(`${id}:end`)).ops, 'delivered');
      const report = { decisionId: 'dec_long', error: { code: 'no_route', message: long } };
      assert.equal((await alice.post(`/api/v1/runs/${id}/route-decision-errors`, report)).status, 202);
      await client.workflow.getHandle(`ops|route:${id}:dec_long`).result();
      for (const alert of [...alertsOf(id, 'run_failed'), ...alertsOf(id, 'route_decision_error')]) {
        assert.equal(alert.detail.message, '界'.repeat(1_000), alert.kind);
        assert.equal(alert.detail.messageTruncated, true, alert.kind);
      }
    });

    it('a webhook that fails keeps the claim pending and retries until it recovers: the alert arrives once', async () => {
      webhook.answerAlways({ status: 503 });
      try {
        const created = await alice.post('/api/v1/runs', { title: 'Down webhook' });
        const id = created.body.id as string;
        await alice.post(`/api/v1/runs/${id}/fail`, { error: { code: 'oom', message: 'x' } });
        await waitUntil('a first attempt', () => alertsOf(id, 'run_failed').length >= 1, { seen: alerts });
        await sleep(3000);
        assert.equal(await stores.claims.state(`ops|${id}:end`), 'pending', 'in hand while it retries');
        webhook.answerAlways({ status: 204 });
        webhook.received.length = 0;
        assert.equal((await episodeResult(`${id}:end`)).ops, 'delivered');
        assert.equal(alertsOf(id, 'run_failed').length, 1);
        assert.equal(await stores.claims.state(`ops|${id}:end`), 'delivered');
      } finally {
        webhook.answerAlways({ status: 204 });
      }
    }).timeout(60_000);
  });

  describe('run health', function () {
    // An alert crosses three workflows (health, its alert, the webhook's retries): on a loaded machine that can take
    // longer than a plain wait's 15 s, so alert waits get 40 s and each test room for two of them.
    this.timeout(100_000);
    const alertWait = { timeoutMs: 40_000, seen: alerts };
    async function newRun(body: Record<string, unknown> = {}): Promise<string> {
      const created = await alice.post('/api/v1/runs', { title: 'Health', ...body });
      assert.equal(created.status, 201);
      return created.body.id as string;
    }
    const event = (id: string, body: Record<string, unknown>) =>
      alice.post(`/api/v1/runs/${id}/events`, body);

    it('a silent run stalls once; the next event clears it with stall_recovered', async () => {
      const id = await newRun();
      await event(id, { type: 'node_started', node: 'plan' });
      await waitUntil('stall', () => alertsOf(id, 'stall').length === 1, alertWait);
      await sleep(2500);
      assert.equal(alertsOf(id, 'stall').length, 1, 'once per stall episode');
      assert.equal(alertsOf(id, 'stall')[0].detail.currentNode, 'plan');
      const health = await alice.get(`/api/v1/runs/${id}/health`);
      assert.equal(health.body.phase, 'stalled');
      await event(id, { type: 'node_started', node: 'write' });
      await waitUntil('stall_recovered', () => alertsOf(id, 'stall_recovered').length === 1, alertWait);
      const twin = (await alice.get(`/api/v1/runs/${id}/health`)).body as {
        phase: string;
        currentNode: string;
        stallSeq: number;
      };
      assert.equal(twin.currentNode, 'write');
      // Active again, unless the run stalled anew since (2 s without progress is short on a loaded machine).
      if (twin.phase !== 'active') assert.deepEqual([twin.phase, twin.stallSeq], ['stalled', 2]);
    });

    it('a paused run never stalls', async () => {
      const id = await newRun();
      await alice.post(`/api/v1/runs/${id}/pause`, { prompt: 'wait for me' });
      await sleep(4500);
      assert.equal(alerts(id).length, 0);
      assert.equal((await alice.get(`/api/v1/runs/${id}/health`)).body.phase, 'paused');
    });

    it('workspace checkpoints and run_health events do not count as progress', async () => {
      const id = await newRun();
      // They keep coming, far more often than the stall time (2 s), until the stall fires: were they progress,
      // it never would.
      await waitUntil(
        'a stall while only checkpoints and run_health come',
        async () => {
          if (alertsOf(id, 'stall').length) return true;
          await event(id, { type: 'run_workspace_checkpoint' });
          await event(id, { type: 'run_health' });
          return false;
        },
        { timeoutMs: 60_000, intervalMs: 300, seen: alerts },
      );
      assert.equal(alertsOf(id, 'stall').length, 1);
    });

    it('a blocking human wait found in flight cancels a stall about to fire', async () => {
      const id = await newRun();
      // The pause reaches the store but not the health workflow (a lost signal).
      const deaf = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
      await deaf.pause(caller, id, 'Are you there?');
      // The stall timer is what finds the pause (its check reads the run first): wait for that, not for a time.
      await waitUntil(
        'the health workflow found the pause at its stall check',
        async () => (await alice.get(`/api/v1/runs/${id}/health`)).body.phase === 'paused',
        { timeoutMs: 60_000, intervalMs: 300, seen: alerts },
      );
      assert.equal(alertsOf(id, 'stall').length, 0);
    });

    it('budget: a warning at 80 % and an exceeded alert at 100 %, each once', async () => {
      const id = await newRun({ budget: { limit: 10 } });
      for (const spent of [5, 8, 9, 12, 15]) await event(id, { type: 'usage', spent });
      // Each alert is its own workflow: they arrive in either order.
      await waitUntil(
        'budget alerts',
        () => alertsOf(id, 'budget_exceeded').length === 1 && alertsOf(id, 'budget_warning').length === 1,
        alertWait,
      );
      await sleep(500);
      assert.equal(alertsOf(id, 'budget_warning').length, 1);
      assert.equal(alertsOf(id, 'budget_exceeded').length, 1);
      assert.deepEqual(alertsOf(id, 'budget_warning')[0].detail, { spent: 8, limit: 10 });
      assert.deepEqual(alertsOf(id, 'budget_exceeded')[0].detail, { spent: 12, limit: 10 });
    });

    it('terminal state is reaped after its delay', async () => {
      const id = await newRun();
      await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'ok' });
      let phase: string | undefined;
      await waitUntil(
        'the health state to be terminal',
        async () => (phase = (await alice.get(`/api/v1/runs/${id}/health`)).body?.phase) === 'terminal',
        { seen: () => phase },
      );
      const state = await client.workflow.getHandle(`health:${id}`).result();
      assert.equal(state.phase, 'terminal');
      assert.equal((await alice.get(`/api/v1/runs/${id}/health`)).status, 404, 'reaped');
      assert.equal(alerts(id).length, 0);
    });

    it('the health workflow of a run started while no worker runs fires its stall once one is back, never before the silence', async () => {
      await worker.stop();
      const createdAt = Date.now(); // no later than the run's own start
      const id = await newRun();
      await sleep(1000);
      const restartedAt = Date.now();
      worker = await startTestWorker(config, stores);
      await waitUntil('stall after restart', () => alertsOf(id, 'stall').length === 1, alertWait);
      const stall = webhook.received.find((r) => {
        const alert = JSON.parse(r.body) as OperatorAlert;
        return alert.runId === id && alert.kind === 'stall';
      })!;
      // After the worker came back, and not before the 2 s of silence (a durable timer: a busy machine only makes
      // it later; when, to the second, is test/workflows/healthStall's, on the time-skipping server).
      const firedAt = stall.at.getTime();
      assert.ok(firedAt >= restartedAt, 'the stall came before a worker was back');
      assert.ok(firedAt - createdAt >= 2000, `fired ${firedAt - createdAt} ms after the run started`);
    });

    it('replays recorded health histories (every version) with the current workflow code', async () => {
      if (process.env.RECORD_HEALTH_HISTORY === '1') {
        // Refresh the fixture: a run that stalls, recovers, spends past its budget and finishes.
        const id = await newRun({ budget: { limit: 10 } });
        await event(id, { type: 'node_started', node: 'plan' });
        await waitUntil('stall', () => alertsOf(id, 'stall').length === 1, alertWait);
        await event(id, { type: 'usage', spent: 11 });
        await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });
        await client.workflow.getHandle(`health:${id}`).result();
        // The same export an operator makes: temporal workflow show --output json.
        saveHistory(config, `health:${id}`, FIXTURE);
      }
      for (const fixture of FIXTURES) {
        const history: unknown = JSON.parse(readFileSync(fixture, 'utf8'));
        await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history);
      }
    });
  });
});
