// A team admin's API client: the token's roles claim holds "admin" (team endpoints, escalation policy).
import { mintToken } from '../../api/auth';
import { ApiClient } from './harness';
import { TEST_JWT_SECRET } from './stack';

export function adminOf(anonymous: ApiClient, userId: string, teamId: string): ApiClient {
  return new ApiClient(
    anonymous.baseUrl,
    mintToken(TEST_JWT_SECRET, userId, teamId, '1d', {}, { roles: ['admin'] }),
  );
}
