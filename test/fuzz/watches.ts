// The fuzzer's assistant watch routes (api/routes/watches.ts).
import type { RouteSpec } from './spec';

export const WATCH_ROUTES: RouteSpec[] = [
  {
    name: 'PUT /api/v1/assistants/:assistantId/watches/:runId',
    method: 'PUT',
    template: '/api/v1/assistants/:assistantId/watches/:runId',
    valid: () => ({}),
    preferred: ['running'],
  },
  {
    name: 'DELETE /api/v1/assistants/:assistantId/watches/:runId',
    method: 'DELETE',
    template: '/api/v1/assistants/:assistantId/watches/:runId',
    preferred: ['running'],
  },
];
