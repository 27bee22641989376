// A recover's store calls: a page of the team's callbacks that gave up in the window (those not delivered since),
// and its progress row.
import type { GaveUpPage, GaveUpRequest } from '../contract/activities';
import type { RecoverCounts, RecoverInput } from '../contract/workflows';
import { claimKeys } from '../domain/outcome';
import type { CallbackAttemptStore } from '../store/callbackAttempts';
import type { CallbackRecoverStore } from '../store/callbackRecovers';
import type { ClaimStore } from '../store/claims';

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
      const callbacks: GaveUpPage['callbacks'] = [];
      const seen = new Set<string>();
      for (const row of rows) {
        if (seen.has(row.episodeId)) continue; // gave up twice in the window (a re-run episode): once
        seen.add(row.episodeId);
        // Still given up: a redelivery since (manual, or an earlier recover) that was delivered is left alone.
        const claim = await deps.claims.describe(claimKeys.callback(row.episodeId));
        if (claim.state !== 'delivered' || !claim.result?.startsWith('gave_up')) continue;
        const seenAttempts = await deps.callbackAttempts.countForEpisode(row.episodeId);
        callbacks.push({ runId: row.runId, episodeId: row.episodeId, seenAttempts });
      }
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
