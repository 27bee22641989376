// Property-based fuzzing of every API route: bodies, path params, headers and methods.
//
// Each route gets `numRuns` fast-check cases of two kinds. One in six is nearly valid: the caller's token, the
// route's method, a real run in the state the route acts on, and a valid body with up to two edits (a field
// dropped, retyped, made huge or deeply nested, an extra field such as "$set" or "a.b"): these get past the edge
// and exercise the writes. The rest are wild on every dimension at once: random JSON, invalid JSON text, raw
// bytes, 1.5 MB strings, 100,000-level nesting, lone surrogates; ids with slashes, dots, percent-escapes, unicode,
// 10,000 characters; forged, expired, unsigned and garbage tokens; wrong content types, charsets and
// content encodings; other and unknown methods. Every answer must hold:
//   - the API answers (no reset, no hang) and never with a 5xx (501 to a method HTTP does not know is allowed);
//   - an error (4xx) is JSON {"error": string} and nothing else;
//   - a 4xx stores nothing and a GET writes nothing (no insert, update or findAndModify ran: the server's write
//     command counters, or with countMode 'documents' every collection's count), and a 2xx of a create route
//     writes exactly its whole record (e.g. POST /runs: the run and its run_started event; a transition also its
//     run_transitions row, which won the run's revision);
//   - no caller without a valid token gets a JSON or empty 2xx, and no caller gets a 2xx on another team's run or
//     on another user's push device;
// and after each route /healthz answers 200 and the store still holds only whole records: every document has
// its domain shape, every run its run_started event, one run_paused event per pause, its run_<status> event once
// ended, the pending interaction of a human-input pause; no event, interaction or watch of a missing run.
// Cases are symbolic ("the caller's paused run", "a 1.5 MB string"), so fast-check shrinks them and prints them
// compactly; real ids are resolved when a case runs. Each route runs as its own fuzz-team member, with its own
// seed (the run's seed plus the route's index), so a route replays on its own.
//
// The parts: one file per route family (runs.ts, watches.ts, notifications.ts, callbacks.ts, service.ts) holds
// each route's description (spec.ts: RouteSpec); generators.ts draws the symbolic cases, fixtures.ts makes what
// they name, request.ts turns a case into its request, check.ts holds the properties, harness.ts drives it all.
import { CALLBACK_ROUTES, RECOVER_ROUTES } from './callbacks';
import { fuzzRouteList, selectNames, type FuzzOptions, type FuzzReport } from './harness';
import { NOTIFICATION_ROUTES } from './notifications';
import { RUN_ROUTES } from './runs';
import { SERVICE_ROUTES } from './service';
import type { RouteSpec } from './spec';
import { TEAM_ROUTES } from './teams';
import { WATCH_ROUTES } from './watches';

export type { FuzzFailure, FuzzOptions, FuzzReport, RouteReport } from './harness';
export { storedShapeProblems } from './check';

/** Every fuzzed route. A route's seed is the run's seed plus its index here: reordering changes what a seed draws. */
const ROUTES: RouteSpec[] = [
  ...RUN_ROUTES,
  ...WATCH_ROUTES,
  ...NOTIFICATION_ROUTES,
  ...CALLBACK_ROUTES,
  ...RECOVER_ROUTES,
  ...SERVICE_ROUTES,
  ...TEAM_ROUTES,
];

export const FUZZED_ROUTES = ROUTES.map((r) => r.name);

/** The routes a filter selects: an exact name selects that route only, other text every route containing it. */
export function selectRoutes(only: string[] | undefined): string[] {
  return selectNames(FUZZED_ROUTES, only);
}

/** Fuzzes every route, or those `options.only` selects. */
export function fuzzRoutes(options: FuzzOptions): Promise<FuzzReport> {
  return fuzzRouteList(ROUTES, options);
}
