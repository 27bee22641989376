// An endpoint's recover: every event of a window it subscribes to and did not get (its last attempt did not
// deliver, or it was disabled then) is sent again, one at a time, with the same webhook-id (receivers dedupe on
// it). Held attempts (its rate, its breaker: a recover never goes past an open one) wait and go again.
import { continueAsNew, patched, proxyActivities, sleep, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../contract/activities';
import type { EndpointRecoverInput, EndpointRecoverResult } from '../contract/workflows';
import { heldWaitSeconds } from '../domain/callback';
import { callbackAttemptCalls, localStoreCalls, outlastingStoreOutages } from './common';

// The listing reads the whole window a page at a time (a busy team's may hold millions of events), heartbeating
// each page. Timeouts are not compared on replay.
const listing = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '2 seconds', maximumAttempts: 5 },
});

/** Holds one send waits out before it counts as failed. */
const MAX_HOLDS = 10;

/**
 * Sends per execution before it continues as new: a send is about six history events, a held one a dozen more,
 * and a recover may send CALLBACK_RECOVER_MAX (10,000) events, past Temporal's limit of 51,200 per execution.
 */
export const ENDPOINT_RECOVER_SENDS_PER_EXECUTION = 500;

/** Marks executions that continue as new every `sendsPerExecution` sends (or when Temporal suggests it). */
export const ENDPOINT_RECOVER_CONTINUES_PATCH = 'endpoint-recover-continues-as-new';

/**
 * Marks executions whose listing or send, failed past its retries (a store outage longer than about a quarter of a
 * minute), is made again after a wait, one minute doubling to an hour, for a day (outlastingStoreOutages). Before,
 * the recover failed there and the events it had not sent yet were never sent. Only a failed call reaches the check.
 */
export const ENDPOINT_RECOVER_OUTLASTS_OUTAGES_PATCH = 'endpoint-recover-outlasts-store-outages';

/**
 * Marks executions that settle a send's claim delivered when its own settle failed (the store away as the
 * receiver answered). Before, the claim was left pending: gone stale, the sweep raised the event and sent it again.
 * Only a send that reports its claim unsettled reaches it.
 */
export const ENDPOINT_RECOVER_SETTLES_SENDS_PATCH = 'endpoint-recover-settles-unsettled-sends';

/**
 * Marks executions that bring up to date the claim of a delivery that had given up, which their send delivered
 * but could not resettle (the store away or stalled past the record's deadline): resettled delivered by the
 * workflow, made again after a wait for a day. Before, the claim still said given up, and with its attempt row
 * lost too, a later recover over the same time sent it again. Only such a send reaches the check.
 */
export const ENDPOINT_RECOVER_RESETTLES_SENDS_PATCH = 'endpoint-recover-resettles-given-up-sends';

const outlasting = <T>(call: () => Promise<T>): Promise<T> =>
  outlastingStoreOutages(call, () => patched(ENDPOINT_RECOVER_OUTLASTS_OUTAGES_PATCH));

export async function endpointRecoverWorkflow(input: EndpointRecoverInput): Promise<EndpointRecoverResult> {
  const missed = input.remaining ?? (await outlasting(() => listing.endpointMissedEvents(input)));
  const attempts = callbackAttemptCalls(input.attemptSeconds);
  const recoverId = workflowInfo().workflowId;
  const found = input.progress?.found ?? missed.length;
  let delivered = input.progress?.delivered ?? 0;
  const perExecution = input.sendsPerExecution ?? ENDPOINT_RECOVER_SENDS_PER_EXECUTION;
  for (const [sent, eventId] of missed.entries()) {
    // Only an execution this long reaches the patch check: shorter histories replay unchanged.
    const due = sent > 0 && (sent % perExecution === 0 || workflowInfo().continueAsNewSuggested);
    if (due && patched(ENDPOINT_RECOVER_CONTINUES_PATCH))
      await continueAsNew<typeof endpointRecoverWorkflow>({
        ...input,
        remaining: missed.slice(sent),
        progress: { found, delivered },
      });
    for (let held = 0; ; held++) {
      const result = await outlasting(() =>
        attempts.sendEndpointEvent(eventId, input.endpointId, {
          attempt: 1,
          trigger: 'redeliver',
          recoverId,
        }),
      );
      if (result.result === 'retry' && result.held && held < MAX_HOLDS) {
        await sleep(heldWaitSeconds(result.retryAfterSeconds, held) * 1000);
        continue;
      }
      if (result.result === 'delivered') {
        const { unsettledClaim, unresettledClaim } = result;
        if (unsettledClaim && patched(ENDPOINT_RECOVER_SETTLES_SENDS_PATCH))
          await outlasting(() => localStoreCalls.markDelivered(unsettledClaim, recoverId));
        if (unresettledClaim && patched(ENDPOINT_RECOVER_RESETTLES_SENDS_PATCH))
          await outlasting(() => localStoreCalls.resettleClaim(unresettledClaim, 'delivered'));
        delivered++;
      }
      break;
    }
  }
  return { found, delivered, failed: found - delivered };
}
