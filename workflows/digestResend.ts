// A digest that reached some of the person's devices while another's push service failed: the device it missed is
// tried again here, under the same digest id (its sends skip the devices reached, and what it lists is what the
// digest took), 5 minutes later and doubling to an hour, for a day. Its own workflow, so the person's next digest
// never waits behind it.
import { patched, sleep } from '@temporalio/workflow';
import type { DigestResend } from '../contract/workflows';
import { fanOutCalls, localStoreCalls } from './common';

/**
 * Marks executions whose digest tries again (a digest no device took, a device a digest missed) only once the
 * person can be reached: quiet hours or do-not-disturb that began after the first try hold the next one until
 * they end. Before, a retry went out inside them. Only a failed send reaches the check.
 */
export const DIGEST_RETRIES_WAIT_FOR_REACH_PATCH = 'digest-retries-wait-for-quiet-hours';

/**
 * Marks executions in which a read of the person's prefs before a digest's next try that failed past its quick
 * retries (a store outage of about a quarter of an hour) lets the try go ahead: it needs the store too, and a try
 * that fails waits for the next one, within the day. Before, the digest (or its resend) failed there, and its holds
 * waited a day for the sweep. Only a failed read reaches the check.
 */
export const DIGEST_REACH_READ_OUTLASTS_OUTAGES_PATCH = 'digest-reach-read-outlasts-outages';

/** Before a digest's next try: waits while the person's prefs hold digests (re-read when each wait ends). */
export async function untilReachableAgain(teamId: string, userId: string): Promise<void> {
  if (!patched(DIGEST_RETRIES_WAIT_FOR_REACH_PATCH)) return;
  for (;;) {
    let releaseAt: number | undefined;
    try {
      releaseAt = await localStoreCalls.digestReleaseAt(teamId, userId);
    } catch (err) {
      if (!patched(DIGEST_REACH_READ_OUTLASTS_OUTAGES_PATCH)) throw err;
      return;
    }
    if (releaseAt === undefined || releaseAt <= Date.now()) return;
    await sleep(releaseAt - Date.now());
  }
}

/**
 * The waits (seconds) before a digest's sends are tried again, a digest no device took or a device a digest missed:
 * 5 minutes doubling to an hour, each while it still ends within a day of this call.
 */
export function digestRetryWaits(): Generator<number> {
  const giveUpAt = Date.now() + 24 * 3600_000;
  return (function* () {
    for (let wait = 300; Date.now() + wait * 1000 <= giveUpAt; wait = Math.min(wait * 2, 3600)) yield wait;
  })();
}

/** Answers how many devices it reached. */
export async function digestResendWorkflow(digest: DigestResend): Promise<number> {
  let reached = 0;
  for (const wait of digestRetryWaits()) {
    await sleep(wait * 1000);
    await untilReachableAgain(digest.teamId, digest.userId);
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
