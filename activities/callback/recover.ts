// A recover's store calls: a page of the team's callbacks that gave up in the window (those not delivered since,
// less those re-sent too recently), a slot of the team's redelivery budget per send, and its progress row.
import type { GaveUpPage, GaveUpRequest, RecoverSend, RecoverSendAdmission } from '../../contract/activities';
import type { RecoverCounts, RecoverInput } from '../../contract/workflows';
import { isPacingHold, teamRedeliveryBudgetKey } from '../../domain/callback';
import { claimKeys } from '../../domain/outcome';
import type { CallbackAttemptStore } from '../../store/callback/attempts';
import type { CallbackRecoverStore } from '../../store/callback/recovers';
import type { ClaimStore } from '../../store/claims';
import type { RateLimit, RateLimitStore } from '../../store/rateLimits';
import { mapBounded } from '../../platform/concurrency';

/** A page's episodes checked at once (three reads each). */
const STORE_READS_AT_ONCE = 8;

/**
 * The newest attempts of an episode read to find a recent re-send. A give-up gets no attempts of its schedule
 * after it, only redeliveries (manual ones a few a minute per run, recovers a few an hour per team): a re-send
 * hides past these only behind as many redeliveries since, and then the next recover sends it once more.
 */
const RECENT_ATTEMPTS_READ = 50;

/** The team's redelivery budget hit of one recover's send of one episode: asked again, it is the same hit. */
const sendHitId = (send: RecoverSend) => `recover|${send.recoverId}|${send.episodeId}`;

export function createRecoverActivities(deps: {
  callbackAttempts: CallbackAttemptStore;
  callbackRecovers: CallbackRecoverStore;
  claims: ClaimStore;
  rateLimits: RateLimitStore;
  /** The team's redelivery budget (CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM per its window). */
  teamRedeliveries: RateLimit;
  now: () => Date;
}) {
  /** Whether a redelivery (manual or a recover's) went out for the episode at or after `since`. */
  async function resentSince(episodeId: string, since: Date): Promise<boolean> {
    const recent = await deps.callbackAttempts.listForEpisode(episodeId, RECENT_ATTEMPTS_READ);
    return recent.some(
      (row) => row.trigger === 'redeliver' && !isPacingHold(row.error) && row.at.getTime() >= since.getTime(),
    );
  }

  /** One hit on the team's redelivery budget for the send, the same hit however often it is asked. */
  const hitTeamBudget = (send: RecoverSend) =>
    deps.rateLimits.hit(
      teamRedeliveryBudgetKey(send.teamId),
      deps.teamRedeliveries,
      deps.now(),
      sendHitId(send),
    );

  return {
    async gaveUpCallbacks(request: GaveUpRequest): Promise<GaveUpPage> {
      const { rows, next } = await deps.callbackAttempts.listGaveUp(
        request.teamId,
        new Date(request.since),
        new Date(request.until),
        request.limit,
        request.after ? { at: new Date(request.after.at), id: request.after.id } : undefined,
      );
      const resentAfter =
        request.resentWithinSeconds !== undefined
          ? new Date(deps.now().getTime() - request.resentWithinSeconds * 1000)
          : undefined;
      // Once per episode (one that gave up twice in the window, a re-run, is recovered once); its claim, its
      // attempt count and its recent attempts read side by side, a few episodes at a time.
      const seen = new Set<string>();
      const firsts = rows.filter((row) => !seen.has(row.episodeId) && seen.add(row.episodeId));
      const checked = await mapBounded(firsts, STORE_READS_AT_ONCE, async (row) => {
        const [claim, seenAttempts, resent] = await Promise.all([
          deps.claims.describe(claimKeys.callback(row.episodeId)),
          deps.callbackAttempts.countForEpisode(row.episodeId),
          resentAfter ? resentSince(row.episodeId, resentAfter) : false,
        ]);
        // Still given up: a redelivery since (manual, or an earlier recover) that was delivered is left alone.
        const givenUp = claim.state === 'delivered' && !!claim.result?.startsWith('gave_up');
        if (!givenUp) return undefined;
        // Re-sent lately and still given up: sending it again now would only repeat that failure.
        if (resent) return 'skipped' as const;
        return { runId: row.runId, episodeId: row.episodeId, seenAttempts };
      });
      const callbacks = checked.filter((callback) => typeof callback === 'object');
      const skipped = checked.filter((callback) => callback === 'skipped').length;
      return {
        callbacks,
        ...(resentAfter ? { skipped } : {}),
        ...(next ? { next: { at: next.at.toISOString(), id: next.id } } : {}),
      };
    },

    saveRecoverProgress: (recover: RecoverInput, counts: RecoverCounts, completed: boolean) =>
      deps.callbackRecovers.saveProgress(
        {
          id: recover.recoverId,
          teamId: recover.teamId,
          since: new Date(recover.since),
          until: new Date(recover.until),
        },
        counts,
        completed,
        deps.now(),
      ),

    /** A recover's send counts against the team's redelivery budget, as a manual redelivery does. */
    async takeRecoverSend(send: RecoverSend): Promise<RecoverSendAdmission> {
      const admission = await hitTeamBudget(send);
      if (admission.admitted) return { admitted: true };
      return {
        admitted: false,
        retryAfterSeconds: admission.retryAfterSeconds,
        freeAt: admission.freeAt.toISOString(),
      };
    },

    /**
     * The send's slot back. Asking for the same hit again finds its use (the hit is admitted again without
     * counting), and gives that back: a retried call changes nothing more.
     */
    async returnRecoverSend(send: RecoverSend): Promise<void> {
      const admission = await hitTeamBudget(send);
      if (admission.admitted && admission.useId) await deps.rateLimits.giveBack(admission.useId);
    },
  };
}
