// An operator alert's own workflow retries a failing webhook on durable timers (2 s, doubling, capped at the
// settings' maxWait) until its retry window would be passed, then settles its claim gave_up; a send that goes
// through settles it delivered, and a permanent refusal gives up at once. On Temporal's time-skipping test server,
// so a ten-minute window takes seconds; the activities are stand-ins recording what the workflow asked for.
import assert from 'node:assert/strict';
import { ApplicationFailure } from '@temporalio/common';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../contract/activities';
import type { OperatorAlert } from '../../domain/ops';
import { operatorAlertWorkflow } from '../../workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { recordHistory } from '../support/historyFixture';

/** A ten-minute window, waits capped at 100 s (what CLAIM_GRACE_SECONDS=300 gives). */
const SETTINGS = { retryForMs: 600_000, maxWaitMs: 100_000 };

const alert: OperatorAlert = {
  version: '1',
  kind: 'route_decision_error',
  severity: 'error',
  runId: 'run_ops',
  teamId: 'acme',
  episodeKey: 'route:run_ops:dec-1',
  summary: 'The router failed decision dec-1',
  detail: {},
  at: '2026-12-01T09:00:00.000Z',
};

describe('the operator alert retry on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  /** Runs one alert whose webhook sends answer with `send(attempt)`; returns what the workflow did. */
  async function runAlert(
    send: (attempt: number) => void,
    taskQueue: string,
    store: { renewFailures?: number; fixture?: string } = {},
  ) {
    let renewFailures = store.renewFailures ?? 0;
    let attempts = 0;
    const settled: Array<string | undefined> = [];
    let stamped = 0;
    let renewed = 0;
    const activities = {
      tryMark: async () => true,
      opsAlertSettings: async () => SETTINGS,
      postOperatorAlert: async () => {
        send(++attempts);
        return { status: 200 };
      },
      renewClaim: async () => {
        if (renewFailures > 0 && renewFailures--)
          throw ApplicationFailure.create({ message: 'store unavailable', nextRetryDelay: 1 });
        renewed++;
        return true;
      },
      markDelivered: async (_key: string, _holder: string, result?: string) => {
        settled.push(result);
        return true;
      },
      stampOpsMarker: async () => {
        stamped++;
        return true;
      },
    } as unknown as Partial<Activities>;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const workflowId = `ops|${alert.episodeKey}/${taskQueue}`;
    const handle = await env.client.workflow.start(operatorAlertWorkflow, {
      taskQueue,
      workflowId,
      args: [alert],
    });
    let history: Awaited<ReturnType<typeof handle.fetchHistory>> | undefined;
    const result = await worker.runUntil(async () => {
      try {
        return await handle.result();
      } finally {
        history = await handle.fetchHistory();
        if (store.fixture) recordHistory(history, store.fixture);
      }
    });
    const timers = (history!.events ?? [])
      .map((event) => event.timerStartedEventAttributes?.startToFireTimeout?.seconds)
      .filter((seconds) => seconds != null)
      .map(Number);
    return { result, attempts, settled, stamped, renewed, timers };
  }

  it('a webhook that keeps failing is retried 2 s apart, doubling to the cap, until the window ends; then gave_up', async () => {
    const run = await runAlert(() => {
      throw new Error('webhook 503');
    }, 'ts-ops-down');
    assert.equal(run.result, 'gave_up');
    // Waits 2, 4, … 64, then 100 s: the attempt at 526 s would wait past 600 s, so it is the last.
    assert.deepEqual(run.timers, [2, 4, 8, 16, 32, 64, 100, 100, 100, 100]);
    assert.equal(run.attempts, 11);
    assert.equal(run.renewed, 10, 'the claim is renewed before every wait');
    assert.equal(run.settled.length, 1);
    assert.match(run.settled[0] ?? '', /^gave_up: .*webhook 503/);
    assert.equal(run.stamped, 0, 'no run marker for an alert that never went out');
  });

  it('a webhook that recovers within the window gets the alert once: delivered', async () => {
    const run = await runAlert((attempt) => {
      if (attempt < 3) throw new Error('webhook 503');
    }, 'ts-ops-recovers');
    assert.equal(run.result, 'delivered');
    assert.equal(run.attempts, 3);
    assert.deepEqual(run.timers, [2, 4]);
    assert.deepEqual(run.settled, [undefined], 'settled delivered (no gave_up reason)');
    assert.equal(run.stamped, 1);
  });

  it('a permanent refusal gives up at once, without a wait', async () => {
    const run = await runAlert(() => {
      throw ApplicationFailure.nonRetryable('webhook refused: 410', 'WebhookRefused');
    }, 'ts-ops-refused');
    assert.equal(run.result, 'gave_up');
    assert.equal(run.attempts, 1);
    assert.deepEqual(run.timers, []);
    assert.match(run.settled[0] ?? '', /^gave_up: webhook refused: 410/);
  });

  it('a store away longer than the quick retries (the claim cannot be renewed) holds the alert back, and loses it not', async () => {
    const run = await runAlert(
      (attempt) => {
        if (attempt < 3) throw new Error('webhook 503');
      },
      'ts-ops-store-outage',
      { renewFailures: 25, fixture: 'operator-alert-history-store-outage-outlasted.json' },
    );
    assert.equal(run.result, 'delivered');
    assert.equal(run.attempts, 3);
    // The first renewal outlasted the outage (a minute's wait), then the schedule went on.
    assert.deepEqual(run.timers, [60, 2, 4]);
    assert.deepEqual(run.settled, [undefined]);
  });
});
