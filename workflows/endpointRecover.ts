// An endpoint's recover: every event of a window it subscribes to and did not get (its last attempt did not
// deliver, or it was disabled then) is sent again, one at a time, with the same webhook-id (receivers dedupe on
// it). Held attempts (its rate, its breaker: a recover never goes past an open one) wait and go again.
import { proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../contract/activities';
import type { EndpointRecoverInput, EndpointRecoverResult } from '../contract/workflows';
import { heldWaitSeconds } from '../domain/callback';
import { callbackAttemptCalls } from './common';

const listing = proxyActivities<Activities>({
  startToCloseTimeout: '2 minutes',
  retry: { initialInterval: '2 seconds', maximumAttempts: 5 },
});

/** Holds one send waits out before it counts as failed. */
const MAX_HOLDS = 10;

export async function endpointRecoverWorkflow(input: EndpointRecoverInput): Promise<EndpointRecoverResult> {
  const missed = await listing.endpointMissedEvents(input);
  const attempts = callbackAttemptCalls();
  const recoverId = workflowInfo().workflowId;
  let delivered = 0;
  for (const eventId of missed) {
    for (let held = 0; ; held++) {
      const result = await attempts.sendEndpointEvent(eventId, input.endpointId, {
        attempt: 1,
        trigger: 'redeliver',
        recoverId,
      });
      if (result.result === 'retry' && result.held && held < MAX_HOLDS) {
        await sleep(heldWaitSeconds(result.retryAfterSeconds, held) * 1000);
        continue;
      }
      if (result.result === 'delivered') delivered++;
      break;
    }
  }
  return { found: missed.length, delivered, failed: missed.length - delivered };
}
