// A team event raised from outside a workflow (an answer's or a rung's announcement, the sweep) on time-skipping
// Temporal: its workflow records it first. The activities are stand-ins; the record fails as it does while the
// store is away, past its quick retries, then comes back: the event is still recorded and delivered, once.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities, CallbackAttempt } from '../../contract/activities';
import type { RecordedTeamEvent } from '../../contract/workflows';
import { interactionTeamEvent } from '../../domain/teamEvents';
import { teamEventWorkflow } from '../../workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { recordHistory } from '../support/historyFixture';

describe('a team event raised from outside a workflow, on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  it('outlasts a store outage at its record: recorded once the store is back, and delivered once', async () => {
    const taskQueue = 'ts-team-event-record';
    let recordFailures = 25;
    let records = 0;
    const sent: string[] = [];
    const activities = {
      recordTeamEvent: async (): Promise<RecordedTeamEvent> => {
        records++;
        if (recordFailures-- > 0)
          throw ApplicationFailure.create({ message: 'the store is away', nextRetryDelay: 1 });
        return { sequence: 1, endpointIds: ['ep_1'], retrySeconds: [60], retryJitter: 0, attemptSeconds: 30 };
      },
      tryMarkEach: async (keys: string[]) => keys.map(() => true),
      markDelivered: async () => true,
      renewClaim: async () => true,
      unmark: async () => undefined,
      sendEndpointEventToEach: async (eventId: string): Promise<CallbackAttempt[]> => {
        sent.push(eventId);
        return [{ result: 'delivered', status: 204 }];
      },
    } as unknown as Partial<Activities>;
    const event = interactionTeamEvent(
      'interaction.answered',
      { id: 'run_1', teamId: 'acme', status: 'running', title: 'Raised' },
      { id: 'int_1' },
      { answeredBy: 'ada', answeredAt: '2026-12-06T10:00:00.000Z' },
      '2026-12-06T10:00:00.000Z',
    );
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const result = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(teamEventWorkflow, {
        taskQueue,
        workflowId: `team-event|${event.id}`,
        args: [event],
      });
      try {
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'team-event-history-record-outage-outlasted.json');
      }
    });
    assert.deepEqual(result.deliveries, { ep_1: 'delivered' });
    assert.equal(records, 26, 'recorded once the store was back');
    assert.deepEqual(sent, [event.id]);
  });
});
