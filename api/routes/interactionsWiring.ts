// The interactions router's dependencies, from what the API's entry built.
import type { ApiServices } from '../services';
import type { InteractionsRouterDeps } from './interactions';

/** A device posts one action per click; a person rarely clicks more than a few a minute. */
const ACTIONS_PER_ADDRESS = { limit: 60, windowSeconds: 60 };

export function wireInteractionsRouter({
  stores,
  runsService,
  now,
}: Pick<ApiServices, 'stores' | 'runsService' | 'now'>): InteractionsRouterDeps {
  return { runsService, rateLimits: stores.rateLimits, actionLimit: ACTIONS_PER_ADDRESS, now };
}
