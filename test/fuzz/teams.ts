// The fuzzer's team routes (api/routes/teams.ts): the fuzz caller is no team admin, so a replacement or a member's
// removal is a 403.
import type { RouteSpec } from './spec';

export const TEAM_ROUTES: RouteSpec[] = [
  {
    name: 'GET /api/v1/teams/current/escalation',
    method: 'GET',
    template: '/api/v1/teams/current/escalation',
  },
  {
    name: 'PUT /api/v1/teams/current/escalation',
    method: 'PUT',
    template: '/api/v1/teams/current/escalation',
    valid: () => ({ rungs: [{ afterSeconds: 600, to: 'owner', via: 'push' }] }),
  },
  {
    name: 'POST /api/v1/teams/current/escalation/rotate-secret',
    method: 'POST',
    template: '/api/v1/teams/current/escalation/rotate-secret',
  },
  {
    name: 'DELETE /api/v1/teams/current/members/:userId',
    method: 'DELETE',
    template: '/api/v1/teams/current/members/:userId',
  },
];
