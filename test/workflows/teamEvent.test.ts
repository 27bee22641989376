// A team event on time-skipping Temporal, its activities stand-ins. One raised from outside a workflow (an answer's
// or a rung's announcement, the sweep) is recorded by its workflow first: the record fails as it does while the
// store is away, past its quick retries, then comes back, and the event is still recorded and delivered, once. Its
// first attempts carry their claims and when they were taken, so one late in a backed-up queue is checked.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities, CallbackAttempt, EndpointSend } from '../../contract/activities';
import type { RecordedTeamEvent } from '../../contract/workflows';
import { endpointDeliveryKey, interactionTeamEvent } from '../../domain/teamEvents';
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

  it("each first attempt carries its claim and when it was taken: one found another holder's ends claimed elsewhere", async () => {
    const taskQueue = 'ts-team-event-first-claims';
    const asked: EndpointSend[] = [];
    let askedAtMs = 0;
    const activities = {
      recordTeamEvent: async (): Promise<RecordedTeamEvent> => ({
        sequence: 1,
        endpointIds: ['ep_1', 'ep_2'],
        retrySeconds: [60],
        retryJitter: 0,
        attemptSeconds: 30,
      }),
      tryMarkEach: async (keys: string[]) => keys.map(() => true),
      markDelivered: async () => true,
      renewClaim: async () => true,
      unmark: async () => undefined,
      // ep_2's claim went stale while the batch waited in the queue, and a recover took it over.
      sendEndpointEventToEach: async (
        _eventId: string,
        sends: EndpointSend[],
      ): Promise<CallbackAttempt[]> => {
        asked.push(...sends);
        askedAtMs = await env.currentTimeMs();
        return sends.map(({ endpointId }) =>
          endpointId === 'ep_2'
            ? { result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true }
            : { result: 'delivered', status: 204 },
        );
      },
    } as unknown as Partial<Activities>;
    const event = interactionTeamEvent(
      'interaction.answered',
      { id: 'run_2', teamId: 'acme', status: 'running', title: 'Raised' },
      { id: 'int_2' },
      { answeredBy: 'ada', answeredAt: '2026-12-06T10:00:00.000Z' },
      '2026-12-06T10:00:00.000Z',
    );
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const before = await env.currentTimeMs();
    const result = await worker.runUntil(
      env.client.workflow.execute(teamEventWorkflow, {
        taskQueue,
        workflowId: `team-event|${event.id}`,
        args: [event],
      }),
    );
    assert.deepEqual(result.deliveries, { ep_1: 'delivered', ep_2: 'claimed_elsewhere' });
    assert.equal(asked.length, 2);
    for (const { endpointId, place } of asked) {
      assert.equal(place.claim?.key, endpointDeliveryKey(event.id, endpointId));
      const heldSince = place.claim?.heldSince ?? 0;
      assert.ok(
        heldSince >= before - 1000 && heldSince <= askedAtMs,
        'when it was taken, on the workflow clock',
      );
    }
  });
});
