// The route fuzzer lists its routes by hand (test/fuzz/routes.ts): a route added to a router without a place there
// would go unfuzzed without anyone noticing. Every route the app answers is fuzzed, or excluded here with a reason.
import assert from 'node:assert/strict';
import { documentedRoutes } from '../../api/openapi';
import { FUZZED_ROUTES } from '../fuzz/routes';
import { appWithEveryRoute, routersOf } from './everyRoute';

const ENDPOINTS_NOT_FUZZED =
  "team admins only: the fuzzer's tokens carry no admin role, so every case would stop at the 403 " +
  '(test/endpoints.test.ts holds the bounds and refusals)';

/** Routes the fuzzer leaves alone, each with why. Keep it short. */
const NOT_FUZZED: Record<string, string> = {
  'POST /api/v1/endpoints': ENDPOINTS_NOT_FUZZED,
  'GET /api/v1/endpoints': ENDPOINTS_NOT_FUZZED,
  'GET /api/v1/endpoints/:id': ENDPOINTS_NOT_FUZZED,
  'PATCH /api/v1/endpoints/:id': ENDPOINTS_NOT_FUZZED,
  'DELETE /api/v1/endpoints/:id': ENDPOINTS_NOT_FUZZED,
  'POST /api/v1/endpoints/:id/rotate-secret': ENDPOINTS_NOT_FUZZED,
  'POST /api/v1/endpoints/:id/test': ENDPOINTS_NOT_FUZZED,
  'GET /api/v1/endpoints/:id/attempts': ENDPOINTS_NOT_FUZZED,
  'POST /api/v1/endpoints/:id/recover': ENDPOINTS_NOT_FUZZED,
  'GET /{*rest}':
    "the catch-all (studio files, 404s): fuzzed as 'ANY unknown paths', which draws whole paths instead",
  'POST /api/v1/interactions/actions':
    'answers without a bearer by design (the fuzzer\'s "no 2xx without a token" property is not this route\'s); ' +
    "its refusals and what they leave unchanged are test/actions.test.ts's until the fuzzer mints action tokens",
  'POST /api/v1/notifications/receipts':
    'answers without a bearer by design, like the action route; its refusals, its idempotence and its bound are ' +
    "test/receipts.test.ts's until the fuzzer mints receipt tokens",
};

describe('the route fuzzer', () => {
  it('fuzzes every route the app answers, or excludes it with a reason', () => {
    const routes = documentedRoutes(routersOf(appWithEveryRoute({ metrics: true }))).map(
      (route) => `${route.method} ${route.path}`,
    );
    assert.ok(routes.length >= 25, `only ${routes.length} routes found`);
    const missing = routes.filter((route) => !FUZZED_ROUTES.includes(route) && !(route in NOT_FUZZED));
    assert.deepEqual(missing, [], `routes neither fuzzed nor excluded:\n${missing.join('\n')}`);
    // The lists stay honest: no entry for a route that no longer exists, none both fuzzed and excluded.
    const stale = [
      ...FUZZED_ROUTES.filter((name) => name !== 'ANY unknown paths' && !routes.includes(name)),
      ...Object.keys(NOT_FUZZED).filter((name) => !routes.includes(name)),
    ];
    assert.deepEqual(stale, [], `listed but not a route of the app:\n${stale.join('\n')}`);
    const both = Object.keys(NOT_FUZZED).filter((name) => FUZZED_ROUTES.includes(name));
    assert.deepEqual(both, [], 'fuzzed and excluded at once');
  });
});
