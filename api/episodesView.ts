// What GET /runs/:id/episodes shows: every recorded episode of a run and each family's claim state.
import { claimKeys } from '../domain/outcome';
import type { ClaimState, ClaimStore } from '../store/claims';
import type { PushDeliveryStore } from '../store/pushDeliveries';
import type { EpisodeStore } from '../store/episodes';
import type { CallbackAttemptRow, CallbackAttemptStore } from '../store/callbackAttempts';

/** What a launcher sees of one callback attempt (no Temporal internals). */
export type CallbackAttemptSummary = Pick<
  CallbackAttemptRow,
  | 'attempt'
  | 'at'
  | 'durationMs'
  | 'result'
  | 'status'
  | 'error'
  | 'retryAfterSeconds'
  | 'nextWaitSeconds'
  | 'trigger'
>;

/** Attempts shown per run: the schedule's 11 at most per episode, plus rate-limited redeliveries. */
export const MAX_ATTEMPTS_SHOWN = 1000;

function attemptSummary(row: CallbackAttemptRow): CallbackAttemptSummary {
  const { attempt, at, durationMs, result, status, error, retryAfterSeconds, nextWaitSeconds, trigger } = row;
  return Object.fromEntries(
    Object.entries({
      attempt,
      at,
      durationMs,
      result,
      status,
      error,
      retryAfterSeconds,
      nextWaitSeconds,
      trigger,
    }).filter(([, v]) => v !== undefined),
  ) as CallbackAttemptSummary;
}

export interface EpisodeSummary {
  episodeId: string;
  kind: string;
  recordedAt: Date;
  families: Record<keyof typeof claimKeys, { state: ClaimState; result?: string }>;
  /** Push endpoints the episode reached. */
  pushDeliveries: number;
  /** Every attempt of its completion callback, oldest first (the schedule's and redeliveries), newest 1000 per run. */
  callbackAttempts: CallbackAttemptSummary[];
}

export type EpisodeView = ReturnType<typeof createEpisodeView>;

export function createEpisodeView(deps: {
  episodes: EpisodeStore;
  claims: ClaimStore;
  pushDeliveries: PushDeliveryStore;
  callbackAttempts: CallbackAttemptStore;
}) {
  return {
    /** The callback family's claim of one episode of the run; undefined when the team has no such episode. */
    async callbackClaim(
      teamId: string,
      runId: string,
      episodeId: string,
    ): Promise<{ state: ClaimState; result?: string } | undefined> {
      const [recorded, claim] = await Promise.all([
        deps.episodes.getForRun(teamId, runId, episodeId),
        deps.claims.describe(claimKeys.callback(episodeId)),
      ]);
      if (recorded) return claim;
      // The record is a view written beside the branches and may be missing; an episode id starts with its run's
      // id (the caller's team's, checked by the route), so a claim under it belongs to this run.
      return episodeId.startsWith(`${runId}:`) && claim.state !== 'absent' ? claim : undefined;
    },

    /** How many attempts of its callback the episode has logged (a redelivery request's view of them). */
    callbackAttemptCount(episodeId: string): Promise<number> {
      return deps.callbackAttempts.countForEpisode(episodeId);
    },

    /** `callbackAttemptsTruncated`: the run has more attempts than MAX_ATTEMPTS_SHOWN; the oldest are left out. */
    async listForRun(
      teamId: string,
      runId: string,
    ): Promise<{ episodes: EpisodeSummary[]; callbackAttemptsTruncated: boolean }> {
      const [rows, read] = await Promise.all([
        deps.episodes.listForRun(teamId, runId),
        // One read for the whole run (by run id, on its index), grouped below; one past the cap says it was cut.
        deps.callbackAttempts.listForRun(runId, MAX_ATTEMPTS_SHOWN + 1),
      ]);
      const callbackAttemptsTruncated = read.length > MAX_ATTEMPTS_SHOWN;
      const attempts = callbackAttemptsTruncated ? read.slice(1) : read;
      const attemptsOf = (episodeId: string) =>
        attempts.filter((a) => a.episodeId === episodeId).map(attemptSummary);
      const episodes = await Promise.all(
        rows.map(async (row) => {
          const families = Object.fromEntries(
            await Promise.all(
              (Object.keys(claimKeys) as (keyof typeof claimKeys)[]).map(
                async (family) => [family, await deps.claims.describe(claimKeys[family](row._id))] as const,
              ),
            ),
          ) as EpisodeSummary['families'];
          const pushDeliveries = await deps.pushDeliveries.countForEpisode(row._id);
          return {
            episodeId: row._id,
            kind: row.kind,
            recordedAt: row.recordedAt,
            families,
            pushDeliveries,
            callbackAttempts: attemptsOf(row._id),
          };
        }),
      );
      return { episodes, callbackAttemptsTruncated };
    },
  };
}
