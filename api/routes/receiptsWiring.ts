// The receipts router's dependencies, from what the API's entry built; undefined when web push is off (no push
// carries a receipt token, so the route does not exist).
import type { ApiServices } from '../services';
import type { ReceiptsRouterDeps } from './receipts';

/** A device reports at most shown, clicked and an action per push; a burst of pushes to one office stays far under. */
const RECEIPTS_PER_ADDRESS = { limit: 600, windowSeconds: 60 };

export function wireReceiptsRouter({
  config,
  stores,
  metrics,
  now,
}: Pick<ApiServices, 'config' | 'stores' | 'metrics' | 'now'>): ReceiptsRouterDeps | undefined {
  if (!config.vapid) return undefined;
  return {
    receipts: stores.pushReceipts,
    rateLimits: stores.rateLimits,
    receiptLimit: RECEIPTS_PER_ADDRESS,
    metrics,
    now,
  };
}
