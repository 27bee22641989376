// The watches router's dependencies, from what the API's entry built.
import type { ApiServices } from '../services';
import type { WatchesRouterDeps } from './watches';

export function wireWatchesRouter({
  stores,
  emitter,
  now,
}: Pick<ApiServices, 'stores' | 'emitter' | 'now'>): WatchesRouterDeps {
  return {
    runs: stores.runs,
    watches: stores.watches,
    replayOutcome: (runId, teamId) => emitter.emitRunOutcome(runId, undefined, teamId, 'ALLOW_DUPLICATE'),
    now,
  };
}
