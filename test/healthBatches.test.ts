// Run health fed in batches: the events one API process observes of a run within HEALTH_BATCH_MS reach the run's
// health workflow as one signal, read off the workflow's history; a pause or an end is not held back; and the
// alerts (budget, stall, recovery) are the same with batching as without (HEALTH_BATCH_MS=0, a second API on the
// same worker). Real servers; the operator webhook is a loopback receiver.
import assert from 'node:assert/strict';
import path from 'node:path';
import { temporal } from '@temporalio/proto';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { createHealthSignaler, healthOptions, type BatchClock } from '../client/health';
import { emitFromRunner } from '../client/runner';
import { healthWorkflowId } from '../contract/workflows';
import { mapBounded } from '../platform/concurrency';
import type { OperatorAlert } from '../domain/ops';
import { createRunsService } from '../runs/service';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, sweepActivitiesOf, type FamilyStack } from './support/familyStack';
import { recordFixture, saveHistory, startTestApi, type ApiClient } from './support/harness';
import { waitUntil } from './support/waitUntil';

/** RECORD_HEALTH_BATCHED_HISTORY=1 records the batched run's history (past its alerts and its end) here. */
const FIXTURE = path.resolve(__dirname, 'fixtures/run-health-history-batched.json');
const SIGNALED = temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED;
const WORKFLOW_TASK_COMPLETED = temporal.api.enums.v1.EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED;

describe('run health fed in batches', function () {
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let batched: ApiClient;
  let unbatched: ApiClient;
  let closeUnbatched: () => Promise<void>;

  before(async () => {
    webhook = await CallbackReceiver.start();
    stack = await startFamilyStack({
      OPS_ALERT_WEBHOOK_URL: webhook.url,
      STALL_AFTER_SECONDS: '3',
      HEALTH_REAP_SECONDS: '3600',
      SWEEP_INTERVAL_SECONDS: '3600',
      HEALTH_BATCH_MS: '500',
    });
    batched = stack.anonymous.as('alice', 'acme');
    const other = await startTestApi({ ...stack.config, healthBatchMs: 0 });
    closeUnbatched = () => other.api.close();
    unbatched = other.client.as('alice', 'acme');
  });
  after(async () => {
    await closeUnbatched?.();
    await stack?.stop();
    await webhook?.close();
  });

  const alertsOf = (runId: string): string[] =>
    webhook.received
      .map((r) => JSON.parse(r.body) as OperatorAlert)
      .filter((a) => a.runId === runId)
      .map((a) => a.kind)
      .sort();
  /** Both budget alerts arrived: each is its own POST, in either order. */
  const bothBudgetAlerts = (runId: string): boolean =>
    ['budget_exceeded', 'budget_warning'].every((kind) => alertsOf(runId).includes(kind));

  async function signalsTo(runId: string): Promise<number> {
    const history = await stack.client.workflow.getHandle(healthWorkflowId(runId)).fetchHistory();
    return (history.events ?? []).filter((e) => e.eventType === SIGNALED).length;
  }

  it('200 events of a run within a window reach its health workflow in a few signals', async () => {
    // A window longer than the 200 requests take, on a machine however loaded: an API of its own (the cap is a
    // quarter of the stall time its config names; the worker's stall time is the stack's).
    const wide = await startTestApi({ ...stack.config, healthBatchMs: 10_000, stallAfterSeconds: 3600 });
    try {
      const api = wide.client.as('alice', 'acme');
      const created = await api.post('/api/v1/runs', { title: 'Chatty' });
      const id = created.body.id as string;
      await mapBounded(
        Array.from({ length: 200 }, (_, i) => i),
        10,
        async (i) =>
          assert.equal((await api.post(`/api/v1/runs/${id}/events`, { type: 'step', i })).status, 201),
      );
      assert.equal((await api.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' })).status, 200);
      // The end went at once, with whatever was still held.
      await waitUntil('the health twin to see the end', async () => {
        const health = await api.get(`/api/v1/runs/${id}/health`);
        return health.body.phase === 'terminal';
      });
      const signals = await signalsTo(id);
      assert.ok(signals <= 3, `${signals} signals for 202 events`);
    } finally {
      await wide.api.close();
    }
  });

  it("a window of events naming long nodes stays one modest signal: the run's budget crossing is alerted", async () => {
    const wide = await startTestApi({ ...stack.config, healthBatchMs: 10_000, stallAfterSeconds: 3600 });
    try {
      const api = wide.client.as('alice', 'acme');
      const created = await api.post('/api/v1/runs', { title: 'Verbose', budget: { limit: 10 } });
      const id = created.body.id as string;
      // Each node's name about 190 KB of UTF-8: twenty of them are past what Temporal takes in one signal.
      for (let i = 0; i < 20; i++) {
        const res = await api.post(`/api/v1/runs/${id}/events`, {
          type: 'node_started',
          node: `${i}${'字'.repeat(63_000)}`,
        });
        assert.equal(res.status, 201, res.text);
      }
      await api.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 50 });
      assert.equal((await api.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' })).status, 200);
      await waitUntil('its budget alerts', () => bothBudgetAlerts(id), { timeoutMs: 30_000 });
    } finally {
      await wide.api.close();
    }
  });

  it('the same alerts with batching as without: budget warning and excess, stall, recovery', async () => {
    const count = (runId: string, kind: string): number => alertsOf(runId).filter((k) => k === kind).length;
    /**
     * Twelve steps that spend past the budget, the stall after the last of them, progress again, then the run's
     * end. Returns the run and how many stalls its twin counted by its end: on a loaded machine a run may also stall
     * between two steps or between the progress and the end (the events reached the twin more than the stall time
     * apart, batched or not), and each such stall must have its own alert and its recovery, as the first one.
     */
    async function scenario(api: ApiClient): Promise<{ id: string; stalls: number }> {
      const created = await api.post('/api/v1/runs', { title: 'Spender', budget: { limit: 10 } });
      const id = created.body.id as string;
      const health = async () =>
        (await api.get(`/api/v1/runs/${id}/health`)).body as {
          phase?: string;
          spent?: number;
          stallSeq?: number;
        };
      for (let spent = 1; spent <= 12; spent++) {
        await api.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: `n${spent}` });
        await api.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent });
      }
      // Stalled with the last step's spend: the stall after the last step, whatever came before it.
      const stalled = await waitUntil(
        'the stall after the last step',
        async () => {
          const twin = await health();
          return twin.phase === 'stalled' && twin.spent === 12 ? twin.stallSeq : undefined;
        },
        { timeoutMs: 60_000 },
      );
      await waitUntil('its stall alert', () => count(id, 'stall') >= stalled);
      await api.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'again' });
      await waitUntil('its recovery', () => count(id, 'stall_recovered') >= stalled);
      // The end: no stall can come after it (one that came before it is recovered by it).
      assert.equal((await api.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' })).status, 200);
      const stalls = await waitUntil('the twin to see the end', async () => {
        const twin = await health();
        return twin.phase === 'terminal' ? twin.stallSeq : undefined;
      });
      await waitUntil(
        'every stall alert and recovery',
        () => count(id, 'stall') >= stalls && count(id, 'stall_recovered') >= stalls,
      );
      return { id, stalls };
    }
    const expected = (stalls: number): string[] =>
      [
        'budget_exceeded',
        'budget_warning',
        ...Array<string>(stalls).fill('stall'),
        ...Array<string>(stalls).fill('stall_recovered'),
      ].sort();
    const [withBatches, without] = await Promise.all([scenario(batched), scenario(unbatched)]);
    // On a quiet machine: budget_exceeded, budget_warning, stall, stall_recovered, once each, in both.
    assert.deepEqual(alertsOf(without.id), expected(without.stalls));
    assert.deepEqual(alertsOf(withBatches.id), expected(withBatches.stalls));
    assert.ok(
      (await signalsTo(withBatches.id)) < (await signalsTo(without.id)),
      'batches took fewer signals',
    );
    if (process.env.RECORD_HEALTH_BATCHED_HISTORY === '1')
      saveHistory(stack.config, healthWorkflowId(withBatches.id), FIXTURE);
  });

  it('an event named constructor is progress: the run stays active and ends only with its real end', async () => {
    const created = await batched.post('/api/v1/runs', { title: 'Prototype names' });
    const id = created.body.id as string;
    assert.equal((await batched.post(`/api/v1/runs/${id}/events`, { type: 'constructor' })).status, 201);
    // A pause flushes what is held at once: the constructor event is in the history once the twin is paused.
    assert.equal((await batched.post(`/api/v1/runs/${id}/soft-pause`, {})).status, 200);
    const paused = await waitUntil('the health twin to take the batch', async () => {
      const health = await batched.get(`/api/v1/runs/${id}/health`);
      const taken = health.status === 200 && health.body.phase !== 'active';
      return taken ? (health.body as { phase: string }) : undefined;
    });
    assert.equal(paused.phase, 'paused', 'the run was taken for ended by an event named constructor');
  });

  it("a transition told to health again after the run stalled is no progress: the recovery is the run's next real event", async function () {
    this.timeout(120_000);
    const created = await batched.post('/api/v1/runs', { title: 'Resumed, its settle lost' });
    const id = created.body.id as string;
    assert.equal(
      (await batched.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'a' })).status,
      201,
    );
    assert.equal((await batched.post(`/api/v1/runs/${id}/soft-pause`, {})).status, 200);
    await waitUntil(
      'health paused',
      async () => (await batched.get(`/api/v1/runs/${id}/health`)).body?.phase === 'paused',
    );
    // The resume reaches health, but its row's settle is lost (a store blip): the sweep tells health again.
    const settleLost = createRunsService({
      ...stack.stores,
      runTransitions: {
        ...stack.stores.runTransitions,
        settle: async () => {
          throw new Error('store blip');
        },
      },
      emitter: { emitRunOutcome: async () => undefined },
      health: signalerOf(stack.client),
    });
    assert.equal((await settleLost.resume({ userId: 'alice', teamId: 'acme' }, id)).status, 'running');
    // Silent past STALL_AFTER_SECONDS after the resume: stalled.
    await waitUntil('its stall alert', () => alertsOf(id).includes('stall'), { timeoutMs: 30_000 });
    const later = sweepActivitiesOf(stack, { now: () => new Date(Date.now() + 10 * 60_000) });
    assert.equal((await later.sweepOnce()).transitionsFinished, 1);
    // The run's real progress, after the resume told again.
    assert.equal(
      (await batched.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'b' })).status,
      201,
    );
    const recovered = () =>
      webhook.received
        .map((r) => JSON.parse(r.body) as OperatorAlert)
        .filter((a) => a.runId === id && a.kind === 'stall_recovered');
    await waitUntil('its recovery', () => recovered().length > 0, { timeoutMs: 30_000 });
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-stalled-retold-passed-over.json');
    assert.equal(
      recovered()[0].detail.event,
      'node_started',
      'the resume told again was taken for progress after the stall',
    );
  });

  it('a budget crossing that reached health while the run was paused is alerted when the run ends paused', async () => {
    const created = await unbatched.post('/api/v1/runs', {
      title: 'Spent, paused, cancelled',
      budget: { limit: 10 },
    });
    const id = created.body.id as string;
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/soft-pause`, {})).status, 200);
    // Spent before the pause, told after it (another process's batch): counted while paused, owed its alerts.
    assert.equal(
      (await unbatched.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 12 })).status,
      201,
    );
    await waitUntil('health counted it', async () => {
      const health = (await unbatched.get(`/api/v1/runs/${id}/health`)).body as {
        phase?: string;
        spent?: number;
      };
      return health.phase === 'paused' && health.spent === 12;
    });
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/cancel`, {})).status, 200);
    await waitUntil('the twin to see the end', async () => {
      const health = await unbatched.get(`/api/v1/runs/${id}/health`);
      return health.body.phase === 'terminal';
    });
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), {
      timeoutMs: 20_000,
    });
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-ended-paused-budget-alerted.json');
    assert.deepEqual(alertsOf(id), ['budget_exceeded', 'budget_warning']);
  });

  /**
   * A runs service of another API process whose health signals wait until `release()` (its signal queued behind a
   * burst, or its batch window): what it writes is in the store at once, what it tells health comes late.
   */
  function lateTeller(clockAheadMs = 0) {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const signaler = signalerOf(stack.client);
    const service = createRunsService({
      ...stack.stores,
      now: () => new Date(Date.now() + clockAheadMs),
      emitter: { emitRunOutcome: async () => undefined },
      health: {
        observe: async (run, events) => {
          await held;
          return signaler.observe(run, events);
        },
        flushAll: () => signaler.flushAll(),
      },
    });
    return { service, release };
  }

  /**
   * Spend written now by a process that tells health late (lateTeller): answers once it is in the store, with
   * `release` (health is told then) and `told` (its request, done once health was told).
   */
  async function spendToldLate(id: string, spent: number, clockAheadMs = 0) {
    const { service, release } = lateTeller(clockAheadMs);
    const told = service.recordEvent({ userId: 'alice', teamId: 'acme' }, id, 'usage', { spent });
    await waitUntil('the spend in the store', async () =>
      (await stack.stores.events.listForRun(id)).some((e) => e.type === 'usage'),
    );
    return { release, told };
  }

  /**
   * A run with a budget of 10 spends 12 through a process that tells health late (clock `clockAheadMs` ahead of
   * the others'), and is cancelled through one that tells at once: health hears the end first, then the spend.
   */
  async function spentThenEnded(title: string, clockAheadMs: number, fixture: string): Promise<void> {
    const created = await unbatched.post('/api/v1/runs', { title, budget: { limit: 10 } });
    const id = created.body.id as string;
    const { release: releaseSpend, told: spent } = await spendToldLate(id, 12, clockAheadMs);
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/cancel`, {})).status, 200);
    await waitUntil('health saw the end', async () => {
      const health = await unbatched.get(`/api/v1/runs/${id}/health`);
      return health.body.phase === 'terminal';
    });
    releaseSpend();
    await spent;
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), { timeoutMs: 20_000 });
    recordFixture(stack.config, healthWorkflowId(id), fixture);
    assert.deepEqual(alertsOf(id), ['budget_exceeded', 'budget_warning']);
    assert.equal((await unbatched.get(`/api/v1/runs/${id}/health`)).body.spent, 12);
  }

  it('spend written before the run ended, told to health after the end (another process), is alerted against its budget', () =>
    spentThenEnded('Spent, then ended at once', 0, 'run-health-history-usage-before-end-counted.json'));

  // Its clock two seconds ahead: the spend's write time reads later than the end's, which came after it.
  it("spend written before the run ended by a process whose clock runs ahead of the end's is alerted against its budget", () =>
    spentThenEnded('Spent on a fast clock', 2000, 'run-health-history-usage-clock-ahead-counted.json'));

  it('spend told to a stalled run after later progress recovers nothing, and is alerted against its budget', async () => {
    const created = await unbatched.post('/api/v1/runs', {
      title: 'Spent, then stalled',
      budget: { limit: 10 },
    });
    const id = created.body.id as string;
    // The spend's process tells health late; progress written after it is told at once, then the run goes silent.
    const { release: releaseSpend, told: spent } = await spendToldLate(id, 12);
    assert.equal(
      (await unbatched.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'n' })).status,
      201,
    );
    await waitUntil('the stall', () => alertsOf(id).includes('stall'), { timeoutMs: 20_000 });
    releaseSpend();
    await spent;
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), { timeoutMs: 20_000 });
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-stalled-spend-counted.json');
    const health = (await unbatched.get(`/api/v1/runs/${id}/health`)).body as {
      spent?: number;
      phase?: string;
    };
    assert.deepEqual([health.spent, health.phase], [12, 'stalled']);
    assert.ok(!alertsOf(id).includes('stall_recovered'));
  });

  it('spend told to health out of order while the run is paused (two processes) never lowers what it counted: the resume alerts it', async () => {
    const created = await unbatched.post('/api/v1/runs', {
      title: 'Spent while paused',
      budget: { limit: 10 },
    });
    const id = created.body.id as string;
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/soft-pause`, {})).status, 200);
    // 7 written first by a process that tells health late; 9 written after it by one that tells at once.
    const { release: releaseSpend, told: earlier } = await spendToldLate(id, 7);
    assert.equal(
      (await unbatched.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 9 })).status,
      201,
    );
    await waitUntil('health counted the later spend', async () => {
      const health = (await unbatched.get(`/api/v1/runs/${id}/health`)).body as { spent?: number };
      return health.spent === 9;
    });
    releaseSpend();
    await earlier; // its signal sent: health takes it before the resume's
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/resume`, {})).status, 200);
    await waitUntil(
      'the warning its spend while paused earned',
      () => alertsOf(id).includes('budget_warning'),
      {
        timeoutMs: 20_000,
      },
    );
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-spend-never-lowers.json');
    assert.deepEqual(alertsOf(id), ['budget_warning']);
    assert.equal((await unbatched.get(`/api/v1/runs/${id}/health`)).body.spent, 9);
  });

  it("spend written before the run's end, told to health after a runner reported that end, is alerted: the runner's end says when it was written", async () => {
    const created = await unbatched.post('/api/v1/runs', {
      title: 'Spent, then ended on a runner',
      budget: { limit: 10 },
    });
    const id = created.body.id as string;
    const caller = { userId: 'alice', teamId: 'acme' };
    const { release: releaseSpend, told: spent } = await spendToldLate(id, 12);
    // The end is written by a process whose signal is late too; the runner pod that ran it reports it first.
    const { service: slowEnder, release: releaseEnd } = lateTeller();
    const ended = slowEnder.cancel(caller, id);
    await waitUntil(
      'the end in the store',
      async () => (await stack.stores.runs.getById(id))?.status === 'cancelled',
    );
    const runnerHealth = signalerOf(stack.client);
    const emitter = createOutcomeEmitter({
      client: stack.client,
      taskQueue: stack.config.temporalTaskQueue,
      runs: stack.stores.runs,
      options: episodeOptions(stack.config),
    });
    const reported = await emitFromRunner(
      emitter,
      { runId: id, teamId: 'acme', disposition: 'cancelled' },
      runnerHealth,
    );
    assert.equal(reported.emitted, true, JSON.stringify(reported));
    await waitUntil('health saw the end', async () => {
      const health = await unbatched.get(`/api/v1/runs/${id}/health`);
      return health.body.phase === 'terminal';
    });
    releaseSpend();
    await spent;
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), {
      timeoutMs: 20_000,
    });
    releaseEnd();
    await ended;
    assert.deepEqual(alertsOf(id), ['budget_exceeded', 'budget_warning']);
  });

  it("a runner whose health signal fails after the outcome's episode started reports it emitted (its end is held for the exit's flush)", async () => {
    const created = await unbatched.post('/api/v1/runs', { title: 'Ended on a runner, Temporal then away' });
    const id = created.body.id as string;
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/cancel`, {})).status, 200);
    const emitter = createOutcomeEmitter({
      client: stack.client,
      taskQueue: stack.config.temporalTaskQueue,
      runs: stack.stores.runs,
      options: episodeOptions(stack.config),
    });
    await stack.client.workflow.getHandle(`${id}:end`).result();
    // The API started its episode already; the runner's emit finds it so and reports the end to health, refused.
    const failingHealth = signalerOf(
      new Proxy(stack.client, {
        get(target, name) {
          if (name === 'workflow')
            return new Proxy(target.workflow, {
              get(workflow, key) {
                if (key === 'signalWithStart') return async () => Promise.reject(new Error('Temporal away'));
                const value = Reflect.get(workflow, key) as unknown;
                return typeof value === 'function' ? value.bind(workflow) : value;
              },
            });
          const value = Reflect.get(target, name) as unknown;
          return typeof value === 'function' ? value.bind(target) : value;
        },
      }),
    );
    const reported = await emitFromRunner(
      emitter,
      { runId: id, teamId: 'acme', disposition: 'cancelled' },
      failingHealth,
    );
    assert.equal(reported.emitted, true, JSON.stringify(reported));
  });

  it('a pause told to health after the resume that followed it (two processes) leaves the run active: it stalls', async function () {
    this.timeout(120_000);
    const created = await unbatched.post('/api/v1/runs', { title: 'Paused, resumed, its pause told late' });
    const id = created.body.id as string;
    assert.equal(
      (await unbatched.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'a' })).status,
      201,
    );
    // The pause's process tells health late (its signal queued behind a burst): the resume, from another
    // process, reaches health first.
    const { service: slowTeller, release: releasePause } = lateTeller();
    const paused = slowTeller.softPause({ userId: 'alice', teamId: 'acme' }, id);
    await waitUntil(
      'the run paused in the store',
      async () => (await stack.stores.runs.getById(id))?.status === 'paused',
    );
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/resume`, {})).status, 200);
    await waitUntil('health saw the resume', async () => {
      const history = await stack.client.workflow.getHandle(healthWorkflowId(id)).fetchHistory();
      return (history.events ?? []).filter((e) => e.eventType === SIGNALED).length >= 3;
    });
    releasePause();
    await paused;
    await waitUntil('health saw the late pause', async () => {
      const history = await stack.client.workflow.getHandle(healthWorkflowId(id)).fetchHistory();
      return (history.events ?? []).filter((e) => e.eventType === SIGNALED).length >= 4;
    });
    // Running and silent past STALL_AFTER_SECONDS: it stalls.
    await waitUntil('its stall alert', () => alertsOf(id).includes('stall'), { timeoutMs: 30_000 });
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-late-pause-passed-over.json');
  });

  it("a resume written by a process whose clock runs behind the pause's is no late resume: the run is active, it stalls", async function () {
    this.timeout(120_000);
    const created = await unbatched.post('/api/v1/runs', { title: 'Paused and resumed across two clocks' });
    const id = created.body.id as string;
    const alice = { userId: 'alice', teamId: 'acme' };
    // Another API replica, its clock five seconds behind this one's.
    const behind = createRunsService({
      ...stack.stores,
      emitter: { emitRunOutcome: async () => undefined },
      health: signalerOf(stack.client),
      now: () => new Date(Date.now() - 5000),
    });
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/soft-pause`, {})).status, 200);
    await behind.resume(alice, id);
    await waitUntil('its stall alert', () => alertsOf(id).includes('stall'), { timeoutMs: 30_000 });
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-resume-by-revision.json');
  });

  it('progress told to health after a pause written later (two processes) leaves the run paused: it never stalls', async function () {
    this.timeout(120_000);
    const created = await unbatched.post('/api/v1/runs', {
      title: 'Progress, then paused, its progress told late',
    });
    const id = created.body.id as string;
    assert.equal(
      (await unbatched.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'a' })).status,
      201,
    );
    await waitUntil('health saw the first node', async () => (await signalsTo(id)) >= 2);
    // The progress's process tells health late (its batch window, or a signal queued behind a burst): the pause,
    // written after it by another process, reaches health first.
    const { service: slowTeller, release: releaseProgress } = lateTeller();
    const progressed = slowTeller.recordEvent({ userId: 'alice', teamId: 'acme' }, id, 'node_started', {
      node: 'b',
    });
    await waitUntil('the progress in the store', async () =>
      (await stack.stores.events.listForRun(id)).some((e) => e.data?.node === 'b'),
    );
    assert.equal((await unbatched.post(`/api/v1/runs/${id}/soft-pause`, {})).status, 200);
    await waitUntil('health saw the pause', async () => (await signalsTo(id)) >= 3);
    releaseProgress();
    await progressed;
    // The late progress handled: a workflow task completed after its signal (the twin is saved within it).
    await waitUntil('health handled the late progress', async () => {
      const history = await stack.client.workflow.getHandle(healthWorkflowId(id)).fetchHistory();
      const events = history.events ?? [];
      const lastSignal = events.map((e) => e.eventType).lastIndexOf(SIGNALED);
      return (
        events.filter((e) => e.eventType === SIGNALED).length >= 4 &&
        events.slice(lastSignal).some((e) => e.eventType === WORKFLOW_TASK_COMPLETED)
      );
    });
    const health = await unbatched.get(`/api/v1/runs/${id}/health`);
    assert.equal(health.body.phase, 'paused');
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-early-progress-passed-over.json');
  });

  /** A health signaler of another process, through `client`, its events told one call at a time (unbatched). */
  const signalerOf = (client: typeof stack.client) =>
    createHealthSignaler({
      client,
      taskQueue: stack.config.temporalTaskQueue,
      options: healthOptions(stack.config),
      batchMs: 0,
      onError: () => undefined,
    });

  /** The next `count` calls answer true. */
  const times = (count: number) => () => count-- > 0;

  /**
   * A runs service whose health signals go through a client that fails each signal `fails()` answers true for
   * (Temporal away), batching at `batchMs` on `clock`; the errors it reports.
   */
  function serviceWithFlakyHealth(fails: () => boolean, batchMs: number, clock?: BatchClock) {
    const errors: string[] = [];
    const workflow = stack.client.workflow;
    const flakyWorkflow = new Proxy(workflow, {
      get(target, name) {
        if (name === 'signalWithStart' && fails()) {
          return async () => {
            throw new Error('Temporal away');
          };
        }
        const value = Reflect.get(target, name) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const client = new Proxy(stack.client, {
      get(target, name) {
        if (name === 'workflow') return flakyWorkflow;
        const value = Reflect.get(target, name) as unknown;
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const service = createRunsService({
      ...stack.stores,
      emitter: { emitRunOutcome: async () => undefined },
      health: createHealthSignaler({
        client,
        taskQueue: stack.config.temporalTaskQueue,
        options: healthOptions(stack.config),
        batchMs,
        onError: (runId, err) => errors.push(`${runId}: ${String(err)}`),
        clock,
      }),
      onEmitError: (runId, err) => errors.push(`${runId}: ${String(err)}`),
    });
    return { service, errors };
  }

  it('a batch whose signal failed (Temporal away a moment) goes again: the budget crossing it held is alerted', async () => {
    const alice = { userId: 'alice', teamId: 'acme' };
    const { service, errors } = serviceWithFlakyHealth(times(1), 200);
    const run = await service.create(alice, {
      title: 'Spent while Temporal was away',
      budget: { limit: 10 },
    });
    const id = run._id;
    await service.recordEvent(alice, id, 'usage', { spent: 12 });
    await waitUntil('its batch failed', () => errors.length > 0);
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), {
      timeoutMs: 20_000,
    });
    assert.deepEqual(alertsOf(id), ['budget_exceeded', 'budget_warning']);
  });

  it("an end whose signal failed goes again with the events held beside it: the run's budget crossing is alerted", async () => {
    const alice = { userId: 'alice', teamId: 'acme' };
    const { service, errors } = serviceWithFlakyHealth(times(1), 5_000);
    const run = await service.create(alice, { title: 'Spent, then ended', budget: { limit: 10 } });
    const id = run._id;
    await service.recordEvent(alice, id, 'usage', { spent: 12 });
    await service.complete(alice, id, 'done');
    assert.ok(errors.length > 0, 'the end and the usage held beside it failed to reach health');
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), {
      timeoutMs: 30_000,
    });
    assert.deepEqual(alertsOf(id), ['budget_exceeded', 'budget_warning']);
  });

  /** Until its health workflow has heard of the run. */
  const healthStarted = (runId: string) =>
    waitUntil('its health workflow', () =>
      stack.client.workflow
        .getHandle(healthWorkflowId(runId))
        .describe()
        .then(
          () => true,
          () => false,
        ),
    );

  it('a new run is told to health at once: a process that dies within its first window leaves it watched (it stalls)', async () => {
    const alice = { userId: 'alice', teamId: 'acme' };
    // A window that never closes: the process died before it did.
    const dying: BatchClock = { now: () => Date.now(), setTimer: () => () => undefined };
    const { service } = serviceWithFlakyHealth(() => false, 60_000, dying);
    const run = await service.create(alice, { title: 'Started, then its API died' });
    await waitUntil('its stall alert', () => alertsOf(run._id).includes('stall'), { timeoutMs: 30_000 });
  });

  it('spend held by a process that died before its window closed is alerted when the run ends through another', async () => {
    const alice = { userId: 'alice', teamId: 'acme' };
    // A window that never closes: the process died holding the spend it wrote.
    const dying: BatchClock = { now: () => Date.now(), setTimer: () => () => undefined };
    const { service } = serviceWithFlakyHealth(() => false, 60_000, dying);
    const run = await service.create(alice, { title: 'Spent, then its API died', budget: { limit: 10 } });
    const id = run._id;
    await healthStarted(id);
    await service.recordEvent(alice, id, 'usage', { spent: 12 });
    const done = await batched.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });
    assert.equal(done.status, 200, done.text);
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), { timeoutMs: 30_000 });
    assert.deepEqual(alertsOf(id), ['budget_exceeded', 'budget_warning']);
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-ended-spend-read.json');
  });

  it('a run that kept reporting progress while Temporal was away is not stalled when its timer fires first', async function () {
    this.timeout(120_000);
    const alice = { userId: 'alice', teamId: 'acme' };
    let away = false;
    const { service, errors } = serviceWithFlakyHealth(() => away, 200);
    const run = await service.create(alice, { title: 'Busy while Temporal was away' });
    const id = run._id;
    await healthStarted(id);
    const handle = stack.client.workflow.getHandle(healthWorkflowId(id));
    /** The local activities the workflow ran so far, by type (their markers name them). */
    const localActivities = async (): Promise<string[]> =>
      ((await handle.fetchHistory()).events ?? []).flatMap((e) => {
        const data = e.markerRecordedEventAttributes?.details?.data?.payloads?.[0]?.data;
        const type = data && /"activity_type":"(\w+)"/.exec(Buffer.from(data).toString())?.[1];
        return type ? [type] : [];
      });
    // Its progress is written and its signals fail, until health's timer has fired, it read the run's status and
    // saved what it made of it.
    away = true;
    let node = 0;
    await waitUntil(
      "the stall check, the run's progress recorded meanwhile",
      async () => {
        await service.recordEvent(alice, id, 'node_started', { node: `n${node++}` });
        const types = await localActivities();
        const checked = types.indexOf('persistedRunStatus');
        return checked >= 0 && types.slice(checked).includes('saveHealth');
      },
      { timeoutMs: 60_000, intervalMs: 300 },
    );
    assert.ok(errors.length > 0, 'its batches failed meanwhile');
    away = false;
    await service.complete(alice, id, 'done');
    await waitUntil(
      'health heard the end',
      async () => (await stack.stores.runHealth.getState(id))?.phase === 'terminal',
    );
    const state = (await stack.stores.runHealth.getState(id))!;
    assert.equal(state.stallSeq, 0, `stalled ${state.stallSeq} time(s): ${alertsOf(id).join(', ')}`);
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-busy-through-outage.json');
  });

  it('a silence past the stall time whose progress was written, not told, as health waited for a held batch is a stall', async function () {
    this.timeout(120_000);
    const alice = { userId: 'alice', teamId: 'acme' };
    let away = false;
    const { service } = serviceWithFlakyHealth(() => away, 200);
    const run = await service.create(alice, { title: 'Silent, back as health checked' });
    const id = run._id;
    await healthStarted(id);
    const handle = stack.client.workflow.getHandle(healthWorkflowId(id));
    // Silent until its stall came due: health waits a window (its own timer) for a batch an API may hold.
    await waitUntil('the stall due, the wait for a held batch begun', async () => {
      const events = (await handle.fetchHistory()).events ?? [];
      return (
        events.filter((e) => e.timerFiredEventAttributes).length >= 1 &&
        events.filter((e) => e.timerStartedEventAttributes).length >= 2
      );
    });
    // Busy again, its progress written but not told: it came after the stall time, so the silence was real.
    away = true;
    let node = 0;
    await waitUntil(
      'its stall alert',
      async () => {
        await service.recordEvent(alice, id, 'node_started', { node: `back-${node++}` });
        return alertsOf(id).includes('stall');
      },
      { timeoutMs: 30_000, intervalMs: 300 },
    );
    away = false;
    await service.recordEvent(alice, id, 'node_started', { node: 'told' });
    await waitUntil('its recovery', () => alertsOf(id).includes('stall_recovered'), { timeoutMs: 30_000 });
  });

  it('spend held through an outage behind a batch of other events is still carried: the budget crossing is alerted', async () => {
    const alice = { userId: 'alice', teamId: 'acme' };
    let away = false;
    const { service, errors } = serviceWithFlakyHealth(() => away, 200);
    const run = await service.create(alice, { title: 'Spent, then ticked', budget: { limit: 10 } });
    const id = run._id;
    await healthStarted(id);
    away = true;
    await service.recordEvent(alice, id, 'usage', { spent: 12 });
    await waitUntil('its batch failed', () => errors.length > 0);
    // More than a batch holds, none of them spend.
    await mapBounded(
      Array.from({ length: 500 }, (_, i) => i),
      10,
      (i) => service.recordEvent(alice, id, 'run_workspace_checkpoint', { i }),
    );
    away = false;
    await service.complete(alice, id, 'done');
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id), { timeoutMs: 30_000 });
  });

  it('spend written before the end, told after a stall check found the run ended, is alerted against its budget', async function () {
    this.timeout(120_000);
    const alice = { userId: 'alice', teamId: 'acme' };
    let away = false;
    const { service } = serviceWithFlakyHealth(() => away, 200);
    const run = await service.create(alice, {
      title: 'Spent and ended while Temporal was away',
      budget: { limit: 10 },
    });
    const id = run._id;
    await healthStarted(id);
    away = true;
    await service.recordEvent(alice, id, 'usage', { spent: 12 });
    await service.complete(alice, id, 'done');
    // Silent past the stall time, its twin reads the run's end from the store before the late batch comes.
    await waitUntil('the twin to find the run ended', async () => {
      const health = await batched.get(`/api/v1/runs/${id}/health`);
      return health.body.phase === 'terminal';
    });
    away = false;
    await waitUntil('the late batch handled', async () => {
      const history = await stack.client.workflow.getHandle(healthWorkflowId(id)).fetchHistory();
      const types = (history.events ?? []).map((e) => e.eventType);
      const lastSignal = types.lastIndexOf(SIGNALED);
      return (
        types.filter((t) => t === SIGNALED).length >= 2 &&
        types.slice(lastSignal).includes(WORKFLOW_TASK_COMPLETED)
      );
    });
    await waitUntil('its budget alerts', () => bothBudgetAlerts(id));
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-ended-found-late-usage.json');
  });

  it("a health workflow that failed is started again by the run's next event, and goes on from its saved state", async function () {
    this.timeout(120_000);
    const created = await batched.post('/api/v1/runs', { title: 'Outlived its health' });
    const id = created.body.id as string;
    const progress = (node: string) =>
      batched.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node });
    assert.equal((await progress('a')).status, 201);
    // Silent past STALL_AFTER_SECONDS: its first stall, alerted.
    await waitUntil('its first stall alert', () => alertsOf(id).includes('stall'), { timeoutMs: 30_000 });
    const handle = stack.client.workflow.getHandle(healthWorkflowId(id));
    const first = await handle.describe();
    // As an execution that failed does (a store away for longer than it waits, a bug): closed, not reaped.
    await handle.terminate('closed as a failure would close it');
    assert.equal((await progress('b')).status, 201);
    const again = await waitUntil('a new execution, running', async () => {
      const now = await handle.describe();
      return now.runId !== first.runId && now.status.name === 'RUNNING' ? now : undefined;
    });
    assert.notEqual(again.runId, first.runId);
    // It goes on from where the first left off: the first stall recovered, and the next one is the second.
    const count = (kind: string) => alertsOf(id).filter((k) => k === kind).length;
    await waitUntil(
      'the recovery and the second stall',
      () => count('stall_recovered') >= 1 && count('stall') >= 2,
      {
        timeoutMs: 30_000,
        seen: () => alertsOf(id),
      },
    );
    assert.equal((await batched.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' })).status, 200);
    await waitUntil('the twin to see the end', async () => {
      const health = await batched.get(`/api/v1/runs/${id}/health`);
      return health.body.phase === 'terminal';
    });
    recordFixture(stack.config, healthWorkflowId(id), 'run-health-history-resumed.json', again.runId);
  });
});
