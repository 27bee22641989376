// A recover's store calls: a page of the team's callbacks that gave up in the window (those not delivered since),
// and its progress row.
import type { GaveUpPage, GaveUpRequest } from '../contract/activities';
import type { RecoverCounts, RecoverInput } from '../contract/workflows';
import { claimKeys } from '../domain/outcome';
import type { CallbackAttemptStore } from '../store/callbackAttempts';
import type { CallbackRecoverStore } from '../store/callbackRecovers';
import type { ClaimStore } from '../store/claims';
import { mapBounded } from '../lib/concurrency';

/** A page's episodes checked at once (two reads each). */
const STORE_READS_AT_ONCE = 8;

export function createRecoverActivities(deps: {
  callbackAttempts: CallbackAttemptStore;
  callbackRecovers: CallbackRecoverStore;
  claims: ClaimStore;
  now: () => Date;
}) {
  return {
    async gaveUpCallbacks(request: GaveUpRequest): Promise<GaveUpPage> {
      const { rows, next } = await deps.callbackAttempts.listGaveUp(
        request.teamId,
        new Date(request.since),
        new Date(request.until),
        request.limit,
        request.after ? { at: new Date(request.after.at), id: request.after.id } : undefined,
      );
      // Once per episode (one that gave up twice in the window, a re-run, is recovered once); its claim and its
      // attempt count read side by side, a few episodes at a time.
      const seen = new Set<string>();
      const firsts = rows.filter((row) => !seen.has(row.episodeId) && seen.add(row.episodeId));
      const checked = await mapBounded(firsts, STORE_READS_AT_ONCE, async (row) => {
        const [claim, seenAttempts] = await Promise.all([
          deps.claims.describe(claimKeys.callback(row.episodeId)),
          deps.callbackAttempts.countForEpisode(row.episodeId),
        ]);
        // Still given up: a redelivery since (manual, or an earlier recover) that was delivered is left alone.
        const givenUp = claim.state === 'delivered' && !!claim.result?.startsWith('gave_up');
        return givenUp ? { runId: row.runId, episodeId: row.episodeId, seenAttempts } : undefined;
      });
      const callbacks = checked.filter((callback) => callback !== undefined);
      return { callbacks, ...(next ? { next: { at: next.at.toISOString(), id: next.id } } : {}) };
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
  };
}
