// The teams router's dependencies, from what the API's entry built.
import type { ApiServices } from '../services';
import type { TeamsRouterDeps } from './teams';

export function wireTeamsRouter({ stores, now }: Pick<ApiServices, 'stores' | 'now'>): TeamsRouterDeps {
  return {
    escalationPolicies: stores.escalationPolicies,
    members: {
      removals: stores.teamRemovals,
      prefs: stores.notificationPrefs,
      devices: stores.pushSubscriptions,
      holds: stores.pushHolds,
    },
    now,
  };
}
