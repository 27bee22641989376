// createActivities(deps): every activity the worker registers, built from passed-in dependencies.
import type { EpisodeStore } from '../store/episodes';
import { createEpisodeActivities } from './episodes';

export interface ActivityDeps {
  episodes: EpisodeStore;
  now?: () => Date;
}

export function createActivities(deps: ActivityDeps) {
  const now = deps.now ?? (() => new Date());
  return {
    ...createEpisodeActivities({ episodes: deps.episodes, now }),
  };
}

export type Activities = ReturnType<typeof createActivities>;
