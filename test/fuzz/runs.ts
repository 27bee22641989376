// The fuzzer's runs routes (api/routes/runs.ts, but for the callback routes in callbacks.ts): create, read, and
// every transition, each from the run state it acts on.
import { none, transitionRows, type Answer, type RouteSpec } from './spec';

/** What a transition writing one event adds: the event and, for a run's first two, its transition row. */
const oneEventTransition = (answer: Answer) => ({ events: 1, run_transitions: transitionRows(answer) });

export const RUN_ROUTES: RouteSpec[] = [
  {
    name: 'POST /api/v1/runs',
    method: 'POST',
    template: '/api/v1/runs',
    valid: (_ctx, variant) =>
      [
        {},
        { title: 'Quarterly report' },
        { title: 'Deploy', callback: { url: 'https://hooks.example.com/flow' } },
        {
          title: 'Everything',
          callback: {
            url: 'https://hooks.example.com/flow?x=1',
            secret: `whsec_${Buffer.alloc(32, 7).toString('base64')}`,
          },
          budget: { limit: 100 },
          watchedIssueIds: ['ISS-1', 'team:42'],
        },
      ][variant % 4],
    onSuccess: () => ({ runs: 1, events: 1 }),
    // The run and its run_started event; its team's RUN_CREATE_RATE_LIMIT counts it in a window row (an update).
    inserts: () => 2,
  },
  { name: 'GET /api/v1/runs', method: 'GET', template: '/api/v1/runs', onSuccess: none },
  { name: 'GET /api/v1/runs/:id', method: 'GET', template: '/api/v1/runs/:id', onSuccess: none },
  {
    name: 'GET /api/v1/runs/:id/episodes',
    method: 'GET',
    template: '/api/v1/runs/:id/episodes',
    onSuccess: none,
  },
  {
    name: 'GET /api/v1/runs/:id/timeline',
    method: 'GET',
    template: '/api/v1/runs/:id/timeline',
    onSuccess: none,
  },
  {
    name: 'GET /api/v1/runs/:id/health',
    method: 'GET',
    template: '/api/v1/runs/:id/health',
    onSuccess: none,
  },
  {
    name: 'POST /api/v1/runs/:id/route-decision-errors',
    method: 'POST',
    template: '/api/v1/runs/:id/route-decision-errors',
    valid: () => ({ decisionId: 'dec-1', error: { code: 'router_timeout', message: 'no decision' } }),
    preferred: ['running'],
    onSuccess: none,
    // No record, but the per-run and per-team bounds' bookkeeping (rate_limits): two rows for a new decision, none
    // for a repeated one, so no exact insert count. Past a bound the answer is 429, which writes nothing.
  },
  {
    name: 'POST /api/v1/runs/:id/events',
    method: 'POST',
    template: '/api/v1/runs/:id/events',
    valid: (_ctx, variant) =>
      [
        { type: 'node_started', node: 'plan' },
        { type: 'usage', spent: 12.5 },
        { type: 'run_workspace_checkpoint', ref: 'abc123', files: ['a.ts', 'b.ts'] },
        { type: 'custom_progress', detail: { step: 3, of: 10, tags: ['x', 'y'] } },
      ][variant % 4],
    preferred: ['running'],
    onSuccess: () => ({ events: 1 }),
    inserts: 1,
  },
  {
    name: 'POST /api/v1/runs/:id/pause',
    method: 'POST',
    template: '/api/v1/runs/:id/pause',
    valid: () => ({ prompt: 'Approve the budget of $1,200?' }),
    preferred: ['running'],
    movesTo: 'paused_input',
    onSuccess: (answer) => ({ interactions: 1, events: 2, run_transitions: transitionRows(answer) }),
    // The interaction, the events, the transition, and the question noted opened once its workflow started.
    inserts: 4,
  },
  {
    name: 'POST /api/v1/runs/:id/interactions/:iid/answer',
    method: 'POST',
    template: '/api/v1/runs/:id/interactions/:iid/answer',
    // The "answered" fixture was answered "yes": the valid body repeats that answer.
    valid: () => ({ answer: 'yes' }),
    preferred: ['paused_input'],
    movesTo: 'answered',
    repeatOf: 'answered',
    // The repeat writes the resuming transition's events again under their ids (the store refuses them).
    repeatInserts: 1,
    onSuccess: oneEventTransition,
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/park',
    method: 'POST',
    template: '/api/v1/runs/:id/park',
    valid: () => ({ wall: 'daily_tokens' }),
    preferred: ['running'],
    movesTo: 'paused_park',
    onSuccess: oneEventTransition,
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/soft-pause',
    method: 'POST',
    template: '/api/v1/runs/:id/soft-pause',
    valid: () => ({}),
    preferred: ['running'],
    movesTo: 'paused_operator',
    onSuccess: oneEventTransition,
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/resume',
    method: 'POST',
    template: '/api/v1/runs/:id/resume',
    valid: () => ({}),
    preferred: ['paused_park', 'paused_operator'],
    movesTo: 'running',
    onSuccess: oneEventTransition,
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/complete',
    method: 'POST',
    template: '/api/v1/runs/:id/complete',
    valid: () => ({ finalAnswer: 'All done.' }),
    preferred: ['running'],
    movesTo: 'finished',
    onSuccess: oneEventTransition,
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/fail',
    method: 'POST',
    template: '/api/v1/runs/:id/fail',
    valid: () => ({ error: { code: 'tool_crashed', message: 'boom' } }),
    preferred: ['running', 'paused_input'],
    movesTo: 'failed',
    onSuccess: oneEventTransition,
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/cancel',
    method: 'POST',
    template: '/api/v1/runs/:id/cancel',
    valid: () => ({}),
    preferred: ['running', 'paused_park'],
    movesTo: 'cancelled',
    onSuccess: oneEventTransition,
    inserts: 2,
  },
];
