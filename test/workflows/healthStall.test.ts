// The run-health workflow's stall timer, on Temporal's time-skipping test server: a run that reports nothing for
// STALL_AFTER_SECONDS (15 minutes here, the default) raises one stall alert, and its next event one recovery alert;
// the clock jumps, so minutes of silence take seconds. The activities are stand-ins recording what the workflow
// asked for; each alert goes through its real operator-alert workflow, whose webhook send is a stand-in too.
import assert from 'node:assert/strict';
import type { WorkflowHandle } from '@temporalio/client';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../contract/activities';
import type { HealthState } from '../../domain/health';
import type { OperatorAlert } from '../../domain/ops';
import { runHealthWorkflow } from '../../workflows';
import {
  observeManySignal,
  observeSignal,
  type HealthInput,
  type HealthOptions,
} from '../../contract/workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { waitUntil } from '../support/waitUntil';
import { recordHistory } from '../support/historyFixture';
import type { TeamEvent } from '../../domain/teamEvents';

const STALL_AFTER_SECONDS = 900;
const OPTIONS: HealthOptions = {
  stallAfterSeconds: STALL_AFTER_SECONDS,
  reapAfterSeconds: 1800,
  opsAlerts: true,
};

/** A team event recorded for a team without endpoints: it goes no further. */
const NO_ENDPOINTS = { sequence: 1, endpointIds: [], retrySeconds: [], retryJitter: 0, attemptSeconds: 10 };

/**
 * Stand-ins for the run's health workflow and each alert's operator-alert workflow (claimed, sent on the first
 * attempt, settled), recording the alerts posted and the states saved; `over` replaces some of them.
 */
function standIns(over: Record<string, unknown> = {}) {
  const posted: OperatorAlert[] = [];
  const saved: HealthState[] = [];
  const activities = {
    healthSettings: async () => ({ options: OPTIONS }),
    persistedRunStatus: async () => 'running',
    // No progress recorded past what health heard: a silent run.
    recordedProgressSince: async () => undefined,
    saveHealth: async (state: HealthState) => void saved.push(state),
    reapHealth: async () => undefined,
    tryMark: async () => true,
    opsAlertSettings: async () => ({ retryForMs: 3_600_000, maxWaitMs: 100_000 }),
    postOperatorAlert: async (alert: OperatorAlert) => {
      posted.push(alert);
      return { status: 200 };
    },
    markDelivered: async () => true,
    stampOpsMarker: async () => true,
    renewClaim: async () => true,
    recordTeamEvent: async () => NO_ENDPOINTS,
    ...over,
  } as unknown as Partial<Activities>;
  return { activities, posted, saved };
}

describe('the run-health stall on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  it('a run silent past the stall threshold raises one stall alert; its next event one recovery alert', async () => {
    const taskQueue = 'ts-health-stall';
    const runId = 'run_stall';
    let reaped = 0;
    const { activities, posted, saved } = standIns({ reapHealth: async () => void reaped++ });
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const kinds = () => posted.map((alert) => alert.kind);

    const final = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(runHealthWorkflow, {
        taskQueue,
        workflowId: `health:${runId}`,
        args: [{ runId, teamId: 'acme', options: OPTIONS }],
      });
      await handle.signal(observeSignal, { type: 'node_started', data: { node: 'plan' } });
      await waitUntil('the node to be saved', () => saved.some((state) => state.currentNode === 'plan'), {
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      // Progress a minute before the threshold starts the count again.
      await env.sleep(`${STALL_AFTER_SECONDS - 60} seconds`);
      await handle.signal(observeSignal, { type: 'node_started', data: { node: 'draft' } });
      await waitUntil(
        'the next node to be saved',
        () => saved.some((state) => state.currentNode === 'draft'),
        { timeoutMs: 30_000, intervalMs: 50 },
      );
      assert.deepEqual(kinds(), [], 'no alert while the run reports');

      // Silence past the threshold: the stall timer fires, once.
      await env.sleep(`${STALL_AFTER_SECONDS + 60} seconds`);
      await waitUntil('the stall alert', () => posted.length >= 1, { timeoutMs: 30_000, intervalMs: 50 });
      const stall = posted[0];
      assert.equal(stall.kind, 'stall');
      assert.equal(stall.episodeKey, `health:${runId}:stall:1`);
      assert.match(stall.summary, new RegExp(`no progress for ${STALL_AFTER_SECONDS}s`));
      assert.equal(stall.detail.currentNode, 'draft');
      assert.equal(saved.at(-1)?.phase, 'stalled');

      // An hour more of silence: the stall stays one alert (no timer runs while stalled).
      await env.sleep('1 hour');
      // Progress again: the recovery alert, under the same stall episode's number.
      await handle.signal(observeSignal, { type: 'node_started', data: { node: 'write' } });
      await waitUntil('the recovery alert', () => posted.length >= 2, { timeoutMs: 30_000, intervalMs: 50 });
      const recovered = posted[1];
      assert.equal(recovered.kind, 'stall_recovered');
      assert.equal(recovered.episodeKey, `health:${runId}:stall_recovered:1`);
      assert.ok(
        Number(recovered.detail.silentForMs) >= (STALL_AFTER_SECONDS + 3600) * 1000,
        `silent for ${String(recovered.detail.silentForMs)} ms`,
      );
      assert.equal(saved.at(-1)?.phase, 'active');

      // The run ends: the workflow reaps its state after reapAfterSeconds and closes.
      await handle.signal(observeSignal, { type: 'run_finished' });
      return handle.result();
    });

    assert.deepEqual(kinds(), ['stall', 'stall_recovered']);
    assert.equal(final.phase, 'terminal');
    assert.equal(final.terminalStatus, 'finished');
    assert.equal(final.stallSeq, 1);
    assert.equal(reaped, 1);
  });

  it('a store away longer than its quick retries: the workflow outlasts it, and its stall alert and team event go out', async () => {
    const taskQueue = 'ts-health-store-outage';
    const runId = 'run_outage';
    const raised: TeamEvent[] = [];
    // The stall's status read fails past the quick calls' 20 attempts; later the recovery's team event's record.
    let statusFailures = 0;
    let recordFailures = 0;
    // Each failure is retried at once: the test waits on its count, not on the quick calls' backoff.
    const outage = (what: string) =>
      ApplicationFailure.create({ message: `the store is away (${what})`, nextRetryDelay: 1 });
    const { activities, posted, saved } = standIns({
      persistedRunStatus: async () => {
        if (statusFailures > 0 && statusFailures--) throw outage('status');
        return 'running';
      },
      recordTeamEvent: async (event: TeamEvent) => {
        if (recordFailures > 0 && recordFailures--) throw outage('team event');
        raised.push(event);
        return { ...NO_ENDPOINTS, sequence: raised.length };
      },
    });
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });

    const final = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(runHealthWorkflow, {
        taskQueue,
        workflowId: `health:${runId}`,
        args: [{ runId, teamId: 'acme', options: OPTIONS }],
      });
      try {
        await handle.signal(observeSignal, { type: 'node_started', data: { node: 'plan' } });
        await waitUntil('the node to be saved', () => saved.some((s) => s.currentNode === 'plan'), {
          timeoutMs: 30_000,
          intervalMs: 50,
        });
        statusFailures = 25;
        // Past the threshold, and past the status read's 20 quick attempts and a wait after them.
        await env.sleep(`${STALL_AFTER_SECONDS + 3600} seconds`);
        await waitUntil('the stall alert', () => posted.some((a) => a.kind === 'stall'), {
          timeoutMs: 30_000,
          intervalMs: 50,
        });
        assert.deepEqual(
          raised.map((e) => e.type),
          ['run.stalled'],
        );

        // The recovery's team event cannot be recorded for a while: it is recorded once the store is back.
        recordFailures = 25;
        await handle.signal(observeSignal, { type: 'node_started', data: { node: 'write' } });
        await env.sleep('10 minutes');
        await waitUntil('the recovery team event', () => raised.length >= 2, {
          timeoutMs: 30_000,
          intervalMs: 50,
        });
        await handle.signal(observeSignal, { type: 'run_finished' });
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'health-history-store-outage-outlasted.json');
      }
    });

    assert.deepEqual(
      posted.map((a) => a.kind),
      ['stall', 'stall_recovered'],
    );
    assert.deepEqual(
      raised.map((e) => e.type),
      ['run.stalled', 'run.recovered'],
    );
    assert.equal(final.phase, 'terminal');
  });
  /**
   * A run's health whose executions resume what the last one saved, with claims taken once (as the store keeps
   * them) and team events recorded unless `recordFails()`; `drive` gets the first execution once its first node was
   * saved, and `resume` starts a fresh one as the signaller does (the run's next event). Answers what went.
   */
  async function resumingHealth(
    name: string,
    recordFails: () => boolean,
    drive: (
      first: WorkflowHandle<typeof runHealthWorkflow>,
      resume: () => Promise<WorkflowHandle<typeof runHealthWorkflow>>,
      went: { posted: OperatorAlert[]; raised: TeamEvent[]; claimed: Set<string> },
    ) => Promise<void>,
  ): Promise<{ posted: OperatorAlert[]; raised: TeamEvent[] }> {
    const taskQueue = `ts-health-${name}`;
    const runId = `run_${name}`;
    const raised: TeamEvent[] = [];
    const claimed = new Set<string>();
    let saved: HealthState[] = [];
    const standing = standIns({
      healthSettings: async (_runId: string, withSaved?: boolean) => ({
        options: OPTIONS,
        ...(withSaved && saved.length ? { saved: saved.at(-1) } : {}),
      }),
      tryMark: async (key: string) => !claimed.has(key) && Boolean(claimed.add(key)),
      recordTeamEvent: async (event: TeamEvent) => {
        // One attempt per try (not twenty): the workflow's waits between its tries are what a test skips.
        if (recordFails()) throw ApplicationFailure.nonRetryable('the store is away');
        raised.push(event);
        return NO_ENDPOINTS;
      },
    });
    ({ saved } = standing);
    const { activities, posted } = standing;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const workflowId = `health:${runId}`;
    const args: [HealthInput] = [{ runId, teamId: 'acme', options: OPTIONS }];
    await worker.runUntil(async () => {
      const first = await env.client.workflow.start(runHealthWorkflow, { taskQueue, workflowId, args });
      await first.signal(observeSignal, { type: 'node_started', data: { node: 'plan' } });
      await waitUntil('the node to be saved', () => saved.some((s) => s.currentNode === 'plan'), {
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      const resume = () =>
        env.client.workflow.signalWithStart(runHealthWorkflow, {
          taskQueue,
          workflowId,
          args,
          signal: observeSignal,
          signalArgs: [{ type: 'node_started', data: { node: 'write' } }],
          workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
        });
      await drive(first, resume, { posted, raised, claimed });
    });
    return { posted, raised };
  }

  /** Until the stall's recovery went, then the run's end; the execution's history saved as `fixture`. */
  async function recoversAndEnds(
    fresh: WorkflowHandle<typeof runHealthWorkflow>,
    posted: OperatorAlert[],
    fixture?: string,
  ): Promise<void> {
    try {
      await waitUntil('the recovery', () => posted.some((a) => a.kind === 'stall_recovered'), {
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      await fresh.signal(observeSignal, { type: 'run_finished' });
      await fresh.result();
    } finally {
      if (fixture) recordHistory(await fresh.fetchHistory(), fixture);
    }
  }

  it('an alert whose team event failed past its day of store retries is handed off again by the next execution, once', async () => {
    let recordFails = false;
    const { posted, raised } = await resumingHealth(
      'hand_off_failed',
      () => recordFails,
      async (first, resume, went) => {
        // The stall's team event cannot be recorded, for longer than the workflow outlasts a store outage (a day
        // of waits between tries): it fails.
        recordFails = true;
        await env.sleep(`${STALL_AFTER_SECONDS + 2 * 86_400} seconds`);
        // Waited on without its result: a result call lets the test server skip time, years with nothing due.
        await waitUntil('the execution failed with its hand-off', async () => {
          const { status } = await first.describe();
          return status.name === 'FAILED';
        });
        assert.deepEqual(
          went.posted.map((a) => a.kind),
          ['stall'],
        );
        assert.deepEqual(went.raised, [], 'the team event was never recorded');
        // The store is back; the run's next event starts a fresh execution.
        recordFails = false;
        await recoversAndEnds(await resume(), went.posted, 'health-history-saved-alerts-handed-off.json');
      },
    );
    assert.deepEqual(
      raised.map((e) => e.type),
      ['run.stalled', 'run.recovered'],
      "the stall's team event was recorded by the next execution",
    );
    assert.deepEqual(
      posted.map((a) => a.kind),
      ['stall', 'stall_recovered'],
      'the stall alert went out once',
    );
  });

  it('alerts handed off long ago, still in the saved state, are not handed off again by a fresh execution', async () => {
    const { posted, raised } = await resumingHealth(
      'old_hand_off',
      () => false,
      async (first, resume, went) => {
        await env.sleep(`${STALL_AFTER_SECONDS + 60} seconds`);
        await waitUntil('the stall handed off', () => went.raised.length === 1, {
          timeoutMs: 30_000,
          intervalMs: 50,
        });
        // A month of silence (the state saved with the stall is the last), then the execution is terminated; the
        // claims of what went are gone with their 30 days.
        await env.sleep('31 days');
        await first.terminate('an operator stops it');
        went.claimed.clear();
        await recoversAndEnds(await resume(), went.posted);
      },
    );
    assert.deepEqual(
      posted.map((a) => a.kind),
      ['stall', 'stall_recovered'],
      'the stall alert went out once',
    );
    assert.deepEqual(
      raised.map((e) => e.type),
      ['run.stalled', 'run.recovered'],
    );
  });

  it('a fresh execution resuming a state saved with alerts in hand-off hands them off once, and no later round again', async () => {
    const taskQueue = 'ts-health-resumed-hand-off';
    const runId = 'run_resumed_hand_off';
    const raised: TeamEvent[] = [];
    const startedAt = await env.currentTimeMs();
    // Saved by an execution that failed handing its stall off (or by an older worker that carried such a state).
    const stall = {
      kind: 'stall' as const,
      episodeKey: `health:${runId}:stall:1`,
      severity: 'warning' as const,
      summary: `no progress for ${STALL_AFTER_SECONDS}s`,
      detail: {},
    };
    const savedState: HealthState = {
      runId,
      teamId: 'acme',
      phase: 'stalled',
      lastLivenessAt: startedAt - (STALL_AFTER_SECONDS + 60) * 1000,
      spent: 0,
      budgetWarned: false,
      budgetExceeded: false,
      stallSeq: 1,
      handingOff: { alerts: [stall], at: startedAt - 60_000 },
    };
    const { activities, posted } = standIns({
      healthSettings: async (_runId: string, withSaved?: boolean) => ({
        options: OPTIONS,
        ...(withSaved ? { saved: savedState } : {}),
      }),
      recordTeamEvent: async (event: TeamEvent) => {
        raised.push(event);
        return NO_ENDPOINTS;
      },
    });
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    await worker.runUntil(async () => {
      const fresh = await env.client.workflow.signalWithStart(runHealthWorkflow, {
        taskQueue,
        workflowId: `health:${runId}`,
        args: [{ runId, teamId: 'acme', options: OPTIONS }],
        signal: observeSignal,
        signalArgs: [{ type: 'run_workspace_checkpoint' }],
      });
      // A round that raises nothing, then the end.
      await fresh.signal(observeSignal, { type: 'run_finished' });
      await fresh.result();
    });
    // The stall handed off once (its end may raise a recovery of its own).
    assert.equal(posted.filter((a) => a.kind === 'stall').length, 1);
    assert.equal(raised.filter((e) => e.type === 'run.stalled').length, 1);
  });

  /**
   * A run's health whose worker settings carry an API batch window (HEALTH_BATCH_MS, 1.5 s): started, told its
   * first node (with its write time when `stampWrite`), saved; then `drive` goes on with it and ends the run.
   * Answers the alerts posted.
   */
  async function withBatchWindow(
    taskQueue: string,
    runId: string,
    stampWrite: boolean,
    drive: (
      handle: WorkflowHandle<typeof runHealthWorkflow>,
      saved: HealthState[],
      posted: OperatorAlert[],
    ) => Promise<void>,
  ): Promise<OperatorAlert[]> {
    const { activities, posted, saved } = standIns({
      healthSettings: async () => ({ options: { ...OPTIONS, batchGraceMs: 1500 } }),
    });
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(runHealthWorkflow, {
        taskQueue,
        workflowId: `health:${runId}`,
        args: [{ runId, teamId: 'acme', options: OPTIONS }],
      });
      const startedAt = await env.currentTimeMs();
      await handle.signal(observeManySignal, [
        {
          type: 'node_started',
          data: { node: 'plan' },
          at: startedAt,
          ...(stampWrite ? { writtenAt: startedAt } : {}),
        },
      ]);
      await waitUntil('the node to be saved', () => saved.some((state) => state.currentNode === 'plan'), {
        timeoutMs: 30_000,
        intervalMs: 50,
      });
      await drive(handle, saved, posted);
      await handle.signal(observeSignal, { type: 'run_finished' });
      await handle.result();
    });
    return posted;
  }

  it('progress an API process still holds in its batch window when the stall is due is no stall: it waits the window', async () => {
    const posted = await withBatchWindow(
      'ts-health-held-batch',
      'run_held_batch',
      true,
      async (handle, saved) => {
        // Progress half a second before the stall is due, observed by an API process that tells it a second
        // after (its batch window): the stall's time comes first.
        const due = (saved.at(-1)?.lastLivenessAt ?? 0) + STALL_AFTER_SECONDS * 1000;
        await env.sleep(due + 1000 - (await env.currentTimeMs()));
        await handle.signal(observeManySignal, [
          { type: 'node_started', data: { node: 'draft' }, at: due - 500, writtenAt: due - 500 },
        ]);
        await waitUntil(
          'the late node to be saved',
          () => saved.some((state) => state.currentNode === 'draft'),
          { timeoutMs: 30_000, intervalMs: 50 },
        );
        recordHistory(await handle.fetchHistory(), 'run-health-history-held-batch-waited.json');
      },
    );
    assert.deepEqual(
      posted.map((alert) => alert.kind),
      [],
      'no stall, and so no recovery, for progress told within its window',
    );
  });
  it('events that are no progress, arriving through the window, do not put a due stall off: it fires after one window', async () => {
    const posted = await withBatchWindow(
      'ts-health-held-batch-ticker',
      'run_held_batch_ticker',
      false,
      async (handle, _saved, posted) => {
        // Hung, its workspace ticker still reporting every half second (no progress) past the stall's due time.
        await env.sleep(STALL_AFTER_SECONDS * 1000 - 1000);
        for (let tick = 0; tick < 12; tick++) {
          await env.sleep(500);
          await handle.signal(observeManySignal, [
            { type: 'run_workspace_checkpoint', at: await env.currentTimeMs() },
          ]);
        }
        await waitUntil('the stall alert', () => posted.length >= 1, { timeoutMs: 30_000, intervalMs: 50 });
      },
    );
    // One stall (the run's end then recovers it), fired within a window of its due time, not once the ticker fell
    // silent.
    assert.deepEqual(
      posted.map((alert) => alert.kind),
      ['stall', 'stall_recovered'],
    );
    const silentFor = Number(/no progress for (\d+)s/.exec(posted[0].summary)?.[1]);
    assert.ok(silentFor <= STALL_AFTER_SECONDS + 3, posted[0].summary);
  });
});
