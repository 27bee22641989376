// An interaction's workflow on time-skipping Temporal: the escalation ladder over 7 days on durable timers, each
// rung once, at its time. Answers and snoozes cancel timers, which this server (1.x, Java) at times fails ("invalid
// history builder state for action") and then hangs on: those races run on the dev server
// (test/interactionRaces.test.ts). The real stack's sends: test/escalation.test.ts.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { InteractionRef } from '../../contract/workflows';
import { interactionWorkflow } from '../../workflows';
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
});
