// The episode claim as activities: the workflow is the holder, the claim outlives Temporal's retention.
import type { ClaimStore } from '../store/claims';

export function createClaimActivities(deps: { claims: ClaimStore }) {
  return {
    tryMark: (key: string, holder: string) => deps.claims.tryMark(key, holder),
    tryMarkEach: (keys: string[], holder: string) => deps.claims.tryMarkEach(keys, holder),
    markDelivered: (key: string, holder: string, result?: string) =>
      deps.claims.markDelivered(key, holder, result),
    renewClaim: (key: string, holder: string, forSeconds?: number) =>
      deps.claims.renew(key, holder, forSeconds),
    unmark: (key: string, holder: string) => deps.claims.unmark(key, holder),
    wasDelivered: (key: string) => deps.claims.wasDelivered(key),
    describeClaim: (key: string) => deps.claims.describe(key),
    resettleClaim: (key: string, result: string) => deps.claims.resettle(key, result),
  };
}
