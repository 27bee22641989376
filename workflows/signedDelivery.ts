// One signed delivery on the callback family's schedule, under its own claim: up to n + 1 attempts with the same
// webhook-id on durable timers; an attempt the worker holds (nothing sent) waits and goes again without spending
// one. A run's completion callback and each (event, endpoint) of a team endpoint are delivered by it.
import { patched, sleep } from '@temporalio/workflow';
import type { BranchResult } from '../contract/workflows';
import type { AttemptPlace, CallbackAttempt } from '../contract/activities';
import {
  callbackScheduleSpanSeconds,
  callbackWaitSeconds,
  heldWaitSeconds,
  jitteredWaitSeconds,
} from '../domain/callback';
import { holder, outlastingStoreOutages, type QuickCalls } from './common';

/** Marks histories whose thrown callback branch releases its cb| claim (older ones left it pending). */
export const CALLBACK_RELEASES_ON_THROW = 'callback-branch-releases-claim-on-throw';

/**
 * Marks histories in which an attempt the worker held (the team's breaker open, no slot free: nothing sent) waits
 * and goes again instead of spending one of the schedule's attempts, within the schedule's longest span.
 */
export const CALLBACK_HELD_ATTEMPT_WAITS_PATCH = 'callback-held-attempt-waits-not-spent';

/**
 * Marks histories in which the delivery's claim is held for each wait on a timer (and a grace after it) before the
 * wait: a claim left as it was went stale after five minutes, so the sweep took a delivery on schedule for one
 * lost and spent its pass on raising it again (refused: still running) while events truly owed waited behind.
 * Only a delivery that waits reaches it.
 */
export const SCHEDULED_WAITS_HOLD_CLAIM_PATCH = 'signed-delivery-waits-hold-claim';

/**
 * Marks histories in which the delivery's settle (delivered, or gave up) that failed past its quick retries (a store
 * outage of about a quarter of an hour) is made again after a wait, one minute doubling to an hour, for a day.
 * Before, the failure released the claim: a callback the receiver had taken with a 2xx was then sent again by the
 * sweep's replay. Only a settle that failed reaches it.
 */
export const SIGNED_DELIVERY_SETTLE_OUTLASTS_OUTAGES_PATCH = 'signed-delivery-settle-outlasts-outages';

/**
 * Marks histories in which, after a wait whose hold of the claim failed (the store away), the claim is held again
 * before the next attempt, and a claim another holder took meanwhile (a recover's send, or the sweep's give-up, once
 * it went stale) ends the schedule. Before, the attempt went regardless: the callback was sent again, and the
 * settle's refusal ignored. Only a delivery whose hold failed reaches it.
 */
export const HOLD_CHECKED_AFTER_FAILED_HOLD_PATCH = 'signed-delivery-hold-checked-after-failed-hold';

/**
 * Marks histories in which the claim is held again before every attempt that follows a wait, not only after a hold
 * that failed: a claim held through a wait goes stale when the workflow comes back to it late (its workers down past
 * the grace), and a recover or the sweep may take it over and send or settle it; the late attempt then sent it again.
 * Only a delivery that waits reaches it. (An attempt late in its task queue checks in the receiver's slot.)
 */
export const HOLD_CHECKED_AFTER_EVERY_WAIT_PATCH = 'signed-delivery-hold-checked-after-every-wait';

/**
 * Marks histories in which an attempt after a wait found, in the receiver's slot just before its request, that its
 * claim was another's (it went stale while the attempt waited in a backed-up task queue, and was taken over): it
 * sent nothing, and the schedule ends claimed elsewhere. Only such an attempt's result reaches it.
 */
export const CLAIM_CHECKED_IN_SLOT_PATCH = 'signed-delivery-claim-checked-in-slot';

export interface SignedDelivery {
  /** The claim that makes it once in effect. */
  key: string;
  /** The caller took the claim already (several at once), as this holder, no later than `at` (the workflow's clock). */
  claimed?: { at: number };
  /** The waits between attempts (n waits: n + 1 attempts), and their jitter (absent: as listed, uncapped off). */
  waits: number[];
  jitter?: number;
  /** One attempt; `place` tells the attempt log where it sits in the schedule. */
  attempt(place: AttemptPlace): Promise<CallbackAttempt>;
  /** After the claim is settled gave_up: what the caller owes someone (an operator alert). */
  gaveUp(attempts: number, lastError: string): Promise<void>;
}

/**
 * Claims, then attempts on the schedule until delivered, refused (SSRF guard, a 4xx other than 408/429) or the
 * schedule runs out: bounded, best effort. Answers how the claim was settled.
 */
export async function deliverOnSchedule(quick: QuickCalls, delivery: SignedDelivery): Promise<BranchResult> {
  const { key, waits, jitter } = delivery;
  const me = holder();
  // Read before the take: the claim is no older than this, whatever task the take's answer comes back in.
  const claimedAt = delivery.claimed?.at ?? Date.now();
  if (!delivery.claimed && !(await quick.tryMark(key, me))) return 'claimed_elsewhere';
  // Held attempts wait within the schedule's longest span (its waits at their longest): the delivery ends no later
  // than it could before, and past that end the next attempt is the last, held or not.
  const holdsEndAt = Date.now() + callbackScheduleSpanSeconds(waits, jitter) * 1000;
  let heldBefore = false;
  const secondsToHoldsEnd = () => Math.max(1, Math.ceil((holdsEndAt - Date.now()) / 1000));
  const settle = (result?: string): Promise<boolean> =>
    outlastingStoreOutages(
      () => quick.markDelivered(key, me, result),
      () => patched(SIGNED_DELIVERY_SETTLE_OUTLASTS_OUTAGES_PATCH),
    );
  // Before a wait: the claim held through it; false when another holder took it meanwhile (it delivers now). A
  // hold that failed (the store away) leaves the claim as it was: the wait goes on. After every wait the claim is
  // held again before the next attempt (it may have gone stale during the wait, and been taken over).
  let holdFailed = false;
  /** A wait (on the schedule, or for a hold) just ended: the claim may have gone stale meanwhile. */
  let waited = false;
  // The same promise steps as before holdFailed was kept (one derived promise, as `.catch` made): a step more or
  // less would move this branch against its siblings' within an activation, and reorder old histories' commands.
  const stillHeldFor = async (seconds: number): Promise<boolean> =>
    !patched(SCHEDULED_WAITS_HOLD_CLAIM_PATCH) ||
    (await quick.renewClaim(key, me, seconds).then(
      (held) => ((holdFailed = false), held),
      () => ((holdFailed = true), true),
    ));
  // Failing again (the store still away), the attempt goes: it reads the store too, and fails or delivers.
  const heldAgain = (): Promise<boolean> => quick.renewClaim(key, me).catch(() => true);
  try {
    for (let attempt = 0; ; attempt++) {
      // The wait is drawn before the attempt (Math.random is Temporal's seeded one: the same on replay), so the
      // attempt's row can say when the next one comes.
      const drawn =
        jitter !== undefined && waits[attempt] !== undefined
          ? jitteredWaitSeconds(waits[attempt], jitter, Math.random())
          : waits[attempt];
      // Only after a hold can the span run out before the schedule does (it covers every wait at its longest).
      const pastHoldsEnd = heldBefore && Date.now() >= holdsEndAt;
      const scheduled = pastHoldsEnd ? undefined : drawn;
      let result: CallbackAttempt;
      for (let held = 0; ; held++) {
        // Decided before any await: one here on another path would reorder the episode's commands on replay.
        const checkHold = holdFailed
          ? patched(HOLD_CHECKED_AFTER_FAILED_HOLD_PATCH)
          : waited && patched(HOLD_CHECKED_AFTER_EVERY_WAIT_PATCH);
        if (checkHold && !(await heldAgain())) return 'claimed_elsewhere';
        // The attempt holds the claim again just before its request: after a wait always, the first once it could
        // have gone stale in a backed-up queue (an activity's input is not part of what replay compares).
        const claim = { claim: { key, holder: me, ...(waited ? {} : { heldSince: claimedAt }) } };
        holdFailed = false;
        waited = false;
        const heldWaits = !pastHoldsEnd && Date.now() < holdsEndAt;
        // Where the attempt sits in the schedule is for the attempt log only: histories recorded without it
        // replay the same commands (an activity's input is not part of what replay compares).
        result = await delivery.attempt({
          attempt: attempt + 1,
          waitIfRetried: scheduled,
          ...(jitter !== undefined ? { scheduleUncapped: true } : {}),
          trigger: 'episode',
          ...(heldWaits ? { heldWaits: { held } } : {}),
          ...claim,
        });
        // Only an attempt that found its claim another's reaches the patch check: other histories replay unchanged.
        if (result.result === 'stop' && result.claimedElsewhere && patched(CLAIM_CHECKED_IN_SLOT_PATCH))
          return 'claimed_elsewhere';
        // Held (nothing sent): it waits for the breaker, or for a slot, and goes again; it spends nothing. Only
        // attempts of activities that tell a hold reach the patch check: histories recorded before replay unchanged.
        if (result.result !== 'retry' || !result.held || !heldWaits) break;
        if (!patched(CALLBACK_HELD_ATTEMPT_WAITS_PATCH)) break;
        heldBefore = true;
        const heldFor = Math.min(heldWaitSeconds(result.retryAfterSeconds, held), secondsToHoldsEnd());
        if (!(await stillHeldFor(heldFor))) return 'claimed_elsewhere';
        await sleep(heldFor * 1000);
        waited = true;
      }
      if (result.result === 'delivered') {
        await settle();
        return 'delivered';
      }
      if (result.result === 'stop' || attempt >= waits.length || scheduled === undefined) {
        await settle(`gave_up: ${result.detail}`);
        await delivery.gaveUp(attempt + 1, result.detail);
        return 'gave_up';
      }
      // A durable timer: hours of waiting cost nothing, and a restart of anything loses none of it. After a hold,
      // no wait goes past the span's end.
      const wait = callbackWaitSeconds(scheduled, result.retryAfterSeconds, jitter !== undefined);
      const waitFor = heldBefore ? Math.min(wait, secondsToHoldsEnd()) : wait;
      if (!(await stillHeldFor(waitFor))) return 'claimed_elsewhere';
      await sleep(waitFor * 1000);
      waited = true;
    }
  } catch (err) {
    // An attempt (or a settle) that failed past its retries: release the claim, so the claim, the episodes view
    // and this branch's result all say released and the sweep replays it, instead of a claim left pending.
    if (!patched(CALLBACK_RELEASES_ON_THROW)) throw err;
    await quick.unmark(key, me).catch(() => undefined); // failing too: the claim goes stale after the grace
    return 'released';
  }
}
