// The run-health workflow's stall timer, on Temporal's time-skipping test server: a run that reports nothing for
// STALL_AFTER_SECONDS (15 minutes here, the default) raises one stall alert, and its next event one recovery alert;
// the clock jumps, so minutes of silence take seconds. The activities are stand-ins recording what the workflow
// asked for; each alert goes through its real operator-alert workflow, whose webhook send is a stand-in too.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../contract/activities';
import type { HealthState } from '../../domain/health';
import type { OperatorAlert } from '../../domain/ops';
import { runHealthWorkflow } from '../../workflows';
import { observeSignal, type HealthOptions } from '../../contract/workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { waitUntil } from '../support/waitUntil';

const STALL_AFTER_SECONDS = 900;
const OPTIONS: HealthOptions = {
  stallAfterSeconds: STALL_AFTER_SECONDS,
  reapAfterSeconds: 1800,
  opsAlerts: true,
};

describe('the run-health stall on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  it('a run silent past the stall threshold raises one stall alert; its next event one recovery alert', async () => {
    const taskQueue = 'ts-health-stall';
    const runId = 'run_stall';
    const posted: OperatorAlert[] = [];
    const saved: HealthState[] = [];
    let reaped = 0;
    const activities = {
      // The run's own health workflow.
      healthSettings: async () => ({ options: OPTIONS }),
      persistedRunStatus: async () => 'running',
      saveHealth: async (state: HealthState) => void saved.push(state),
      reapHealth: async () => void reaped++,
      // Each alert's operator-alert workflow: claimed, sent on the first attempt, settled.
      tryMark: async () => true,
      opsAlertSettings: async () => ({ retryForMs: 3_600_000, maxWaitMs: 100_000 }),
      postOperatorAlert: async (alert: OperatorAlert) => {
        posted.push(alert);
        return { status: 200 };
      },
      markDelivered: async () => true,
      stampOpsMarker: async () => true,
      renewClaim: async () => true,
      // The team has no endpoints: its events are recorded and go no further.
      recordTeamEvent: async () => ({
        sequence: 1,
        endpointIds: [],
        retrySeconds: [],
        retryJitter: 0,
        attemptSeconds: 10,
      }),
    } as unknown as Partial<Activities>;
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
});
