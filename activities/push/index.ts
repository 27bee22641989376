// The push family's activities, composed: the standby veto, an outcome's push (deliverOutcome.ts), the digests
// (digestSends.ts), both sending through recordedSends.ts.
import type { DigestRef, DigestSend, DigestSendResult, PushDeliveryResult } from '../../contract/activities';
import type { RunOutcome } from '../../domain/outcome';
import type { Run } from '../../domain/run';
import { deliverPush } from './deliverOutcome';
import { digestReleaseAt, giveUpDigest, sendDigest } from './digestSends';
import type { PushActivityDeps } from './pushActivityDeps';

export type { DigestDeps, PushActivityDeps } from './pushActivityDeps';
export { groupCommit, LAST_SUCCESS_GRAIN_MS } from './recordedSends';

/** The standby veto on a run as read: it holds watched issue ids, or an assistant watches it. */
export async function standbyVetoes(deps: Pick<PushActivityDeps, 'watches'>, run: Run): Promise<boolean> {
  return run.watchedIssueIds.length > 0 || deps.watches.hasActiveWatch(run.teamId, run._id);
}

export function createPushActivities(deps: PushActivityDeps) {
  return {
    /**
     * The standby veto: a run holding watched issue ids, or an active assistant watch, gets no pause push; read
     * under the run's team (the team is absent only from tasks scheduled before it was passed: then the run says).
     */
    async isStandbyVetoed(runId: string, teamId?: string): Promise<boolean> {
      const run = teamId ? await deps.runs.getForTeam(teamId, runId) : await deps.runs.getById(runId);
      return run !== null && standbyVetoes(deps, run);
    },

    /** The outcome's push to its recipients' devices, held for a digest where due; safe to run twice. */
    deliverPush: (outcome: RunOutcome): Promise<PushDeliveryResult> => deliverPush(deps, outcome),

    /** When the person's quiet hours let a digest through (see digestSends.ts). */
    digestReleaseAt: (teamId: string, userId: string): Promise<number | undefined> =>
      digestReleaseAt(deps, teamId, userId),

    /** One digest to every device of the person, recorded as an episode's push is. */
    sendDigest: (digest: DigestSend): Promise<DigestSendResult> => sendDigest(deps, digest),

    /** A digest no device took for a day: its holds give up. */
    giveUpDigest: (digest: DigestRef): Promise<void> => giveUpDigest(deps, digest),
  };
}
