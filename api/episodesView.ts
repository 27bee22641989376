// What GET /runs/:id/episodes shows: every recorded episode of a run and each family's claim state.
import { claimKeys } from '../domain/outcome';
import type { ClaimState, ClaimStore } from '../store/claims';
import type { PushDeliveryStore } from '../store/pushDeliveries';
import type { EpisodeStore } from '../store/episodes';

export interface EpisodeSummary {
  episodeId: string;
  kind: string;
  recordedAt: Date;
  families: Record<keyof typeof claimKeys, { state: ClaimState; result?: string }>;
  /** Push endpoints the episode reached. */
  pushDeliveries: number;
}

export type EpisodeView = ReturnType<typeof createEpisodeView>;

export function createEpisodeView(deps: {
  episodes: EpisodeStore;
  claims: ClaimStore;
  pushDeliveries: PushDeliveryStore;
}) {
  return {
    async listForRun(teamId: string, runId: string): Promise<EpisodeSummary[]> {
      const rows = await deps.episodes.listForRun(teamId, runId);
      return Promise.all(
        rows.map(async (row) => {
          const families = Object.fromEntries(
            await Promise.all(
              (Object.keys(claimKeys) as (keyof typeof claimKeys)[]).map(
                async (family) => [family, await deps.claims.describe(claimKeys[family](row._id))] as const,
              ),
            ),
          ) as EpisodeSummary['families'];
          const pushDeliveries = await deps.pushDeliveries.countForEpisode(row._id);
          return { episodeId: row._id, kind: row.kind, recordedAt: row.recordedAt, families, pushDeliveries };
        }),
      );
    },
  };
}
