// An interaction's workflow on time-skipping Temporal: the escalation ladder over 7 days on durable timers, each
// rung once, at its time. Answers and snoozes cancel timers, which this server (1.x, Java) at times fails ("invalid
// history builder state for action") and then hangs on: those races run on the dev server
// (test/interactionRaces.test.ts). The real stack's sends: test/escalation.test.ts.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { InteractionRef } from '../../contract/workflows';
import { interactionWorkflow } from '../../workflows';
import { recordHistory } from '../support/historyFixture';
import { InteractionStandIns, SEVEN_DAY_LADDER } from '../support/interactionStandIns';
import { onTimeSkipping } from '../support/timeSkipping';
import { workflowBundle } from '../support/workflowBundle';

const LADDER = SEVEN_DAY_LADDER;

describe('the interaction workflow on time-skipping Temporal', function () {
  this.timeout(240_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  it('unanswered, every rung of a 7-day ladder goes out once, at its time, in order', async () => {
    const standIns = new InteractionStandIns(() => env.currentTimeMs());
    const askedAtMs = await env.currentTimeMs();
    const question = standIns.ask('int_ladder', askedAtMs, LADDER);
    const taskQueue = 'ts-interaction-ladder';
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: standIns.activities(),
    });
    const ref: InteractionRef = { runId: 'run_ladder', teamId: 'acme', interactionId: 'int_ladder' };
    const result = await worker.runUntil(
      env.client.workflow.execute(interactionWorkflow, {
        workflowId: `interaction|${ref.interactionId}`,
        taskQueue,
        args: [ref],
      }),
    );
    assert.deepEqual(result, { rungsSent: [0, 1, 2, 3, 4], snoozesSent: 0, closed: false });
    assert.deepEqual(
      question.sends.map((s) => s.what),
      LADDER.map((_, i) => `rung ${i}`),
    );
    LADDER.forEach((rung, i) => {
      const lateMs = question.sends[i].atMs - (askedAtMs + rung.afterSeconds * 1000);
      assert.ok(lateMs >= 0 && lateMs < 5000, `rung ${i} ${lateMs} ms after its time`);
    });
    assert.equal(question.closes, 0);
  });

  it('a store away longer than its quick retries holds the ladder back, and loses no rung', async () => {
    const standIns = new InteractionStandIns(() => env.currentTimeMs());
    const askedAtMs = await env.currentTimeMs();
    const ladder = [
      { afterSeconds: 60, to: 'owner' as const, via: 'push' as const },
      { afterSeconds: 7200, to: 'team' as const, via: 'push' as const },
    ];
    const question = standIns.ask('int_outage', askedAtMs, ladder);
    // Rung 0's claim fails past the quick calls' 20 attempts, then the store is back.
    standIns.failClaims(25);
    const taskQueue = 'ts-interaction-store-outage';
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: standIns.activities(),
    });
    const ref: InteractionRef = { runId: 'run_outage', teamId: 'acme', interactionId: 'int_outage' };
    const workflowId = `interaction|${ref.interactionId}`;
    const result = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(interactionWorkflow, {
        workflowId,
        taskQueue,
        args: [ref],
      });
      try {
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'interaction-history-store-outage-outlasted.json');
      }
    });
    assert.deepEqual(result, { rungsSent: [0, 1], snoozesSent: 0, closed: false });
    assert.deepEqual(
      question.sends.map((s) => s.what),
      ['rung 0', 'rung 1'],
    );
  });
});
