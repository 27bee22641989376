// The readiness probes (platform/http/healthRoutes.ts), from what the API's entry built.
import { searchAttributesProbe } from '../client/searchAttributeCheck';
import type { HealthProbes } from '../platform/http/healthRoutes';
import { pingMongo } from '../store/mongo';
import type { ApiServices } from './services';

/** `draining`: true once shutdown began, so readiness fails and traffic drains. */
export function wireHealthProbes(
  {
    config,
    connection,
    mongo,
    pushSender,
  }: Pick<ApiServices, 'config' | 'connection' | 'mongo' | 'pushSender'>,
  draining: () => boolean,
): HealthProbes {
  return {
    temporal: async () => void (await connection.workflowService.getSystemInfo({})),
    mongo: () => pingMongo(mongo.db),
    searchAttributes: searchAttributesProbe(connection, config.temporalNamespace),
    pushKeys: config.vapid
      ? async () => {
          if (!pushSender) throw new Error('web push is on but its sender is not loaded');
        }
      : undefined,
    draining,
  };
}
