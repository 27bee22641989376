// Run health takes its configuration from the worker's config and the persisted run, whoever signals first,
// and a paused run fires no budget alerts: its spend counts, and the alerts come with the next active event.
// Real servers; the operator webhook is a loopback receiver.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { createHealthSignaler } from '../client/health';
import type { Config } from '../config';
import type { OperatorAlert } from '../domain/ops';
import { createRunsService } from '../runs/service';
import type { Stores } from '../store';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { ApiClient } from './support/harness';
import { waitUntil } from './support/waitUntil';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('run-health configuration', function () {
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;
  const caller = { userId: 'alice', teamId: 'acme' };

  before(async () => {
    webhook = await CallbackReceiver.start();
    stack = await startFamilyStack({
      OPS_ALERT_WEBHOOK_URL: webhook.url,
      STALL_AFTER_SECONDS: '2',
      HEALTH_REAP_SECONDS: '3600',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ config, stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await webhook?.close();
  });

  const alertsOf = (runId: string, kind?: string): OperatorAlert[] =>
    webhook.received
      .map((r) => JSON.parse(r.body) as OperatorAlert)
      .filter((a) => a.runId === runId && (!kind || a.kind === kind));
  /** A run written without telling health (as a runner pod's run would be), then signalled by `signaler`. */
  async function quietRun(body: { budget?: { limit: number } } = {}) {
    const silent = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    return silent.create(caller, { title: 'Runner-first', ...body });
  }

  it('a runner that signals first (no budget in hand) does not cost the run its budget alerts', async () => {
    const run = await quietRun({ budget: { limit: 10 } });
    // The runner CLI's signaler knows only the run and team (emitFromRunner), as it always did.
    const runner = createHealthSignaler({
      client,
      taskQueue: config.temporalTaskQueue,
      options: { stallAfterSeconds: 3600, reapAfterSeconds: 3600, opsAlerts: true },
      batchMs: 0,
      onError: (runId, err) => assert.fail(`${runId}: ${String(err)}`),
    });
    await runner.observe({ _id: run._id, teamId: run.teamId }, [
      { type: 'node_started', data: { node: 'a' } },
    ]);
    await alice.post(`/api/v1/runs/${run._id}/events`, { type: 'usage', spent: 12 });
    // Each alert is its own workflow: they arrive in either order.
    await waitUntil(
      'budget alerts',
      () =>
        alertsOf(run._id, 'budget_exceeded').length === 1 && alertsOf(run._id, 'budget_warning').length === 1,
      {
        seen: () =>
          alertsOf(run._id)
            .map((a) => a.kind)
            .join(', '),
      },
    );
  });

  it("the stall time is the worker's, not the first signaller's", async () => {
    const run = await quietRun();
    const other = createHealthSignaler({
      client,
      taskQueue: config.temporalTaskQueue,
      options: { stallAfterSeconds: 3600, reapAfterSeconds: 3600, opsAlerts: true },
      batchMs: 0,
      onError: (runId, err) => assert.fail(`${runId}: ${String(err)}`),
    });
    await other.observe({ _id: run._id, teamId: run.teamId }, [
      { type: 'node_started', data: { node: 'a' } },
    ]);
    await waitUntil('a stall after the worker’s 2 s', () => alertsOf(run._id, 'stall').length === 1, {
      timeoutMs: 10_000,
    });
  });

  it('a paused run fires no budget alert; its spend counts and the alerts come with the next active event', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Spender', budget: { limit: 10 } });
    const id = created.body.id as string;
    await alice.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 5 });
    assert.equal((await alice.post(`/api/v1/runs/${id}/soft-pause`)).status, 200);
    await alice.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 12 });
    await sleep(2500);
    assert.deepEqual(
      alertsOf(id).map((a) => a.kind),
      [],
      'paused fires nothing',
    );
    const health = await alice.get(`/api/v1/runs/${id}/health`);
    assert.equal(health.body.phase, 'paused');
    assert.equal(health.body.spent, 12, 'the spend still counts');
    assert.equal((await alice.post(`/api/v1/runs/${id}/resume`)).status, 200);
    // Each alert is its own workflow: they arrive in either order.
    await waitUntil(
      'budget alerts on resume',
      () => alertsOf(id, 'budget_exceeded').length === 1 && alertsOf(id, 'budget_warning').length === 1,
    );
    await sleep(500);
    assert.equal(alertsOf(id, 'budget_warning').length, 1);
    assert.equal(alertsOf(id, 'budget_exceeded').length, 1);
    assert.deepEqual(alertsOf(id, 'budget_exceeded')[0].detail, { spent: 12, limit: 10 });
  });
});
