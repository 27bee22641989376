// The runs router's dependencies, from what the API's entry built.
import { notifyOperator } from '../../client/operator';
import { createClaimReader } from '../../store/claims';
import { createEpisodeView } from '../episodesView';
import { createTimelineView } from '../timelineView';
import type { ApiServices } from '../services';
import type { RunsRouterDeps } from './runs';

export function wireRunsRouter({
  config,
  client,
  mongo,
  stores,
  runsService,
  now,
}: Pick<ApiServices, 'config' | 'client' | 'mongo' | 'stores' | 'runsService' | 'now'>): RunsRouterDeps {
  return {
    runsService,
    episodes: createEpisodeView(stores),
    timeline: createTimelineView({ ...stores, claims: createClaimReader(mongo.db) }),
    runHealth: stores.runHealth,
    notifyOperator: (report) => notifyOperator(client, config.temporalTaskQueue, report, now()),
    rateLimits: stores.rateLimits,
    routeErrorLimits: { perRun: config.routeErrorRatePerRun, perTeam: config.routeErrorRatePerTeam },
    runCreateLimit: config.runCreateRate,
    escalationPolicies: stores.escalationPolicies,
    now,
  };
}
