// An endpoint's recover through a store outage, on Temporal's time-skipping test server: the activities are
// stand-ins that fail as they do while the store is away (past their own retries), then come back. The recover
// waits the outage out and sends every event it found, once each; the clock jumps, so minutes take seconds.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities, CallbackAttempt } from '../../contract/activities';
import { endpointRecoverWorkflow } from '../../workflows';
import type { EndpointRecoverInput } from '../../contract/workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { waitUntil } from '../support/waitUntil';
import { recordHistory } from '../support/historyFixture';

const INPUT: EndpointRecoverInput = {
  teamId: 'acme',
  endpointId: 'ep_1',
  since: '2026-12-06T00:00:00.000Z',
  until: '2026-12-06T01:00:00.000Z',
  maxSends: 100,
};

describe('an endpoint recover on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  it('outlasts a store outage: the listing and a send that fail past their retries are made again, and every event goes once', async () => {
    const taskQueue = 'ts-endpoint-recover';
    let listingFailures = 8;
    let sendFailures = 0;
    const sent: string[] = [];
    const activities = {
      endpointMissedEvents: async () => {
        if (listingFailures-- > 0) throw new Error('store away');
        return ['ev_1', 'ev_2', 'ev_3'];
      },
      sendEndpointEvent: async (eventId: string): Promise<CallbackAttempt> => {
        // The store goes away just before the second event, for longer than a send's three tries.
        if (eventId === 'ev_2' && sent.length === 1 && sendFailures++ < 8) throw new Error('store away');
        sent.push(eventId);
        return { result: 'delivered', status: 204 };
      },
    } as unknown as Partial<Activities>;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });

    const result = await worker.runUntil(async () => {
      const handle = await env.client.workflow.start(endpointRecoverWorkflow, {
        taskQueue,
        workflowId: 'endpoint-recover|ep_1',
        args: [INPUT],
      });
      try {
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'endpoint-recover-history-store-outage-outlasted.json');
      }
    });
    await waitUntil('every send', () => sent.length === 3, { timeoutMs: 1000 });
    assert.deepEqual(sent, ['ev_1', 'ev_2', 'ev_3']);
    assert.deepEqual(result, { found: 3, delivered: 3, failed: 0 });
  });
});
