// A digest that reached some of the person's devices while another's push service failed: the device it missed is
// tried again here, under the same digest id (its sends skip the devices reached, and what it lists is what the
// digest took), 5 minutes later and doubling to an hour, for a day. Its own workflow, so the person's next digest
// never waits behind it.
import { sleep } from '@temporalio/workflow';
import type { DigestResend } from '../contract/workflows';
import { fanOutCalls } from './common';

/** A digest's sends tried again (a digest no device took, a device a digest missed): 5 min doubling to 1 h, a day. */
export const RETRY_FIRST_SECONDS = 300;
export const RETRY_MAX_SECONDS = 3600;
export const RETRY_FOR_MS = 24 * 3600_000;

/** Answers how many devices it reached. */
export async function digestResendWorkflow(digest: DigestResend): Promise<number> {
  const giveUpAt = Date.now() + RETRY_FOR_MS;
  let reached = 0;
  for (
    let wait = RETRY_FIRST_SECONDS;
    Date.now() + wait * 1000 <= giveUpAt;
    wait = Math.min(wait * 2, RETRY_MAX_SECONDS)
  ) {
    await sleep(wait * 1000);
    try {
      const answer = await fanOutCalls.sendDigest(digest);
      if (!answer.addressable) return reached; // nothing left to send it to
      reached += answer.delivered;
      if (answer.retryable === 0) return reached;
    } catch {
      // Every attempt of the fan-out failed: the next wait.
    }
  }
  return reached;
}
