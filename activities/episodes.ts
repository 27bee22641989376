import type { RunOutcome } from '../domain/outcome';
import type { EpisodeStore } from '../store/episodes';

export function createEpisodeActivities(deps: { episodes: EpisodeStore; now: () => Date }) {
  return {
    /** Idempotent: the first record of an episode wins, so a retried activity changes nothing. */
    async recordEpisode(outcome: RunOutcome): Promise<void> {
      await deps.episodes.record(outcome, deps.now());
    },
  };
}
