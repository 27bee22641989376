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
import { createECDH, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import jwt from 'jsonwebtoken';
import type { Db } from 'mongodb';
import { mintToken } from '../../api/auth';
import { claimKeys } from '../../domain/outcome';
import { RUN_STATUSES } from '../../domain/runStatus';
import { createClaimStore } from '../../store/claims';
import { PREF_KINDS, prefKey } from '../../store/notificationPrefs';
import { subscriptionId } from '../../store/pushSubscriptions';
import type { SubscriptionJSON } from '../support';
import { TEST_JWT_SECRET } from '../support/stack';

export interface FuzzOptions {
  baseUrl: string;
  /** Cases per route (fast-check numRuns). */
  numRuns: number;
  /** The API's database, read to check that a refused request stored nothing. */
  db: Db;
  seed?: number;
  log?: (line: string) => void;
  /** The HS256 secret the API verifies tokens with (default: AUTH_JWT_SECRET, else the test suites' secret). */
  jwtSecret?: string;
  /** A fresh valid PushSubscription.toJSON() (default: real P-256 keys on an https endpoint that never resolves). */
  subscription?: (n: number) => SubscriptionJSON;
  /** Only these routes: a route's exact name (see FUZZED_ROUTES), or a part of one or several names. */
  only?: string[];
  /** Per-request timeout: an API that has not answered by then counts as a hang. */
  timeoutMs?: number;
  /**
   * A loopback receiver for the runs of the callback routes (the API needs CALLBACK_ALLOW_PRIVATE=1 to call it).
   * Without one those runs have no callback: the routes answer 409 and send nothing.
   */
  callbackUrl?: string;
  /**
   * How "a refused request stored nothing" is checked: 'commands' (default) compares the server's write command
   * counters around each case; 'documents' counts every collection's documents before and after (exact, slow).
   */
  countMode?: 'commands' | 'documents';
}

export interface FuzzFailure {
  route: string;
  /** What went wrong, and the shrunk request as it was sent. */
  reason: string;
  /** fast-check's shrunk counterexample (symbolic). */
  counterexample: string;
  seed: number;
  /** Replays exactly this case: fc.check(..., { seed, path }). */
  path?: string;
  runsBeforeFailure: number;
  shrinks: number;
}

export interface RouteReport {
  route: string;
  /** The slowest answer of the route, and the request that took it. */
  slowest?: { ms: number; request: string };
  /** Requests sent for this route, shrinking included (setup requests not counted). */
  cases: number;
  statuses: Record<string, number>;
  ms: number;
  /** Of ms: preparing fixture runs, waiting for answers, reading the write counters. */
  split: { setupMs: number; answerMs: number; checkMs: number };
  failure?: FuzzFailure;
}

export interface FuzzReport {
  seed: number;
  numRuns: number;
  countMode: 'commands' | 'documents';
  totalCases: number;
  ms: number;
  routes: RouteReport[];
  failures: FuzzFailure[];
}

const BODY_LIMIT = 1024 * 1024; // api/app.ts: jsonLimit '1mb'
const STANDARD_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);
const COLLECTIONS = [
  'runs',
  'events',
  'interactions',
  'push_subscriptions',
  'notification_prefs',
  'assistant_run_watches',
] as const;
type Collection = (typeof COLLECTIONS)[number];
type Counts = Record<Collection, number>;

// ---------------------------------------------------------------------------------------------------------------
// Symbolic cases

type RunState =
  | 'running'
  | 'paused_input'
  | 'paused_park'
  | 'paused_operator'
  | 'answered'
  | 'finished'
  | 'failed'
  | 'cancelled';
const RUN_STATES: RunState[] = [
  'running',
  'paused_input',
  'paused_park',
  'paused_operator',
  'answered',
  'finished',
  'failed',
  'cancelled',
];

/** A path segment: a real resource, or raw text put in the path as is (or percent-encoded). */
type RawSegment = { k: 'raw'; text: string; encode: boolean };
type RunRef = { k: 'own'; state: RunState } | { k: 'otherTeam' } | { k: 'missing' } | RawSegment;
type InteractionRef = { k: 'ofRun' } | { k: 'otherRun' } | { k: 'missing' } | RawSegment;
type AssistantRef = { k: 'ok'; id: string } | RawSegment;
/** A push device (its id, the sha256 of its endpoint): the caller's, a teammate's, another team's user's. */
type DeviceRef = { k: 'device'; whose: 'own' | 'teammate' | 'otherTeam' } | { k: 'missing' } | RawSegment;
/** An outcome episode: the `:end` episode of the run named in the same path, or of another team's run. */
type EpisodeRef = { k: 'episode'; of: 'run' | 'otherRun' } | { k: 'missing' } | RawSegment;
type ParamChoice = RunRef | InteractionRef | AssistantRef | DeviceRef | EpisodeRef;

type TokenFlaw =
  | 'wrongSecret'
  | 'expired'
  | 'notYetValid'
  | 'noTeam'
  | 'noSub'
  | 'emptyTeam'
  | 'numericTeam'
  | 'algNone'
  | 'hs512'
  | 'noExp'
  | 'tooLong'
  | 'futureIat'
  | 'tampered'
  | 'truncated'
  | 'basicScheme'
  | 'noScheme'
  | 'twoTokens';
type AuthChoice =
  | { k: 'valid'; style: number }
  | { k: 'otherTeam' }
  | { k: 'none' }
  | { k: 'flawed'; flaw: TokenFlaw }
  | { k: 'garbage'; value: string };

type Lazy =
  | { lazy: 'huge'; bytes: number; char: string }
  | { lazy: 'deep'; depth: number; shape: 'array' | 'object' }
  | { lazy: 'many'; count: number }
  | { lazy: 'wide'; count: number }
  | { lazy: 'raw'; text: string };
type Value = { v: unknown } | Lazy;
type BodyOp =
  | { op: 'drop'; pick: number }
  | { op: 'set'; pick: number; value: Value }
  | { op: 'extra'; pick: number; key: string; value: Value };
type BodyChoice =
  | { k: 'none' }
  | { k: 'valid'; variant: number; ops: BodyOp[] }
  | { k: 'truncated'; variant: number; keep: number }
  | { k: 'json'; value: unknown }
  | { k: 'text'; text: string }
  | { k: 'bytes'; bytes: Uint8Array }
  | { k: 'lazy'; value: Lazy };

interface FuzzCase {
  method: string;
  /** Path params by name, or a whole path for the unknown-paths route. */
  params: Record<string, ParamChoice>;
  path?: string;
  query: string | null;
  auth: AuthChoice;
  body: BodyChoice;
  contentType: string | null;
  headers: [string, string][];
}

// ---------------------------------------------------------------------------------------------------------------
// Routes

interface RouteSpec {
  /** e.g. "POST /api/v1/runs/:id/pause". */
  name: string;
  method: string;
  template: string;
  /** A valid body for this route (variant picks among several). */
  valid?: (ctx: Fixtures, variant: number) => Record<string, unknown>;
  /** The state an "own" run is usually in, so valid bodies reach the write. */
  preferred?: RunState[];
  /** The state a 2xx moves the run to: the run is filed there for later cases, and replaced where it was. */
  movesTo?: RunState;
  /** Exact document count changes a 2xx (of this route's method) must show (countMode 'documents'). */
  onSuccess?: (status: number) => Partial<Counts> | undefined;
  /**
   * Exact insert commands a 2xx must show (countMode 'commands'): one per collection its record spans, and one per
   * rate-limit bound the request was counted against.
   */
  inserts?: number | ((answer: Answer) => number);
  /** A 2xx on a run already in this state is an idempotent repeat (the same answer again): it writes nothing. */
  repeatOf?: RunState;
  /** Set-up before the route's cases, as the route's caller. */
  before?: (fx: Fixtures) => Promise<void>;
  /** What a path param stands for when it is not a run (by name: iid, assistantId, runId and id are). */
  paramKinds?: Record<string, 'device' | 'episode'>;
  /**
   * The caller's fixture runs of this route: with a callback to the loopback receiver; `settled`: an ended run's
   * `:end` episode also has a settled callback claim (it gave up), as a worker would have left it.
   */
  runs?: { callback: true; settled?: true };
  /** A 2xx of the route's method used up what it named: the fixtures forget it (e.g. a deleted device). */
  consumes?: (fx: Fixtures, req: ResolvedRequest, c: FuzzCase) => void;
  /**
   * A refusal (409) may come after the route took its rate-limit slots and gave them back: one insert per bound,
   * as many deletes, and no rate_limits row of the request left. Any other write of a refusal still fails the case.
   */
  givesBackSlot?: true;
}

const none = (): Partial<Counts> => ({});

/** The run the answer shows was launched with a callback (the body the API parsed named one). */
function launchedWithCallback(answer: Answer): boolean {
  try {
    return (JSON.parse(answer.text) as { callback?: unknown }).callback !== undefined;
  } catch {
    return false;
  }
}
const ROUTES: RouteSpec[] = [
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
    // A run with a callback is also counted against its team's RUN_CREATE_RATE_LIMIT (a rate_limits row).
    inserts: (answer) => (launchedWithCallback(answer) ? 3 : 2),
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
    onSuccess: () => ({ interactions: 1, events: 2, run_transitions: 1 }),
    inserts: 3,
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
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/park',
    method: 'POST',
    template: '/api/v1/runs/:id/park',
    valid: () => ({ wall: 'daily_tokens' }),
    preferred: ['running'],
    movesTo: 'paused_park',
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/soft-pause',
    method: 'POST',
    template: '/api/v1/runs/:id/soft-pause',
    valid: () => ({}),
    preferred: ['running'],
    movesTo: 'paused_operator',
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/resume',
    method: 'POST',
    template: '/api/v1/runs/:id/resume',
    valid: () => ({}),
    preferred: ['paused_park', 'paused_operator'],
    movesTo: 'running',
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/complete',
    method: 'POST',
    template: '/api/v1/runs/:id/complete',
    valid: () => ({ finalAnswer: 'All done.' }),
    preferred: ['running'],
    movesTo: 'finished',
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/fail',
    method: 'POST',
    template: '/api/v1/runs/:id/fail',
    valid: () => ({ error: { code: 'tool_crashed', message: 'boom' } }),
    preferred: ['running', 'paused_input'],
    movesTo: 'failed',
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
  {
    name: 'POST /api/v1/runs/:id/cancel',
    method: 'POST',
    template: '/api/v1/runs/:id/cancel',
    valid: () => ({}),
    preferred: ['running', 'paused_park'],
    movesTo: 'cancelled',
    onSuccess: () => ({ events: 1, run_transitions: 1 }),
    inserts: 2,
  },
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
  {
    name: 'GET /api/v1/notifications/push/vapid-public-key',
    method: 'GET',
    template: '/api/v1/notifications/push/vapid-public-key',
    onSuccess: none,
  },
  {
    name: 'POST /api/v1/notifications/push/subscriptions',
    method: 'POST',
    template: '/api/v1/notifications/push/subscriptions',
    valid: (ctx, variant) => {
      const sub = ctx.subscription(variant) as unknown as Record<string, unknown>;
      ctx.subscribed.push(sub.endpoint as string);
      return sub;
    },
    onSuccess: (status) => ({ push_subscriptions: status === 201 ? 1 : 0 }),
  },
  {
    name: 'DELETE /api/v1/notifications/push/subscriptions',
    method: 'DELETE',
    template: '/api/v1/notifications/push/subscriptions',
    // Rows of the caller to delete; valid bodies name them (a second delete of one is a no-op 204).
    before: (fx) => fx.subscribe(20),
    valid: (ctx, variant) => ({
      endpoint: ctx.subscribed.length
        ? ctx.subscribed[variant % ctx.subscribed.length]
        : 'https://push.example.com/never-subscribed',
    }),
  },
  {
    name: 'GET /api/v1/notifications/push/subscriptions',
    method: 'GET',
    template: '/api/v1/notifications/push/subscriptions',
    before: (fx) => fx.subscribe(3),
    onSuccess: none,
  },
  {
    name: 'POST /api/v1/notifications/push/test',
    method: 'POST',
    template: '/api/v1/notifications/push/test',
    // A test push fans out to every endpoint of the caller: a few, so each case is a real send.
    before: (fx) => fx.subscribe(3),
    valid: () => ({}),
  },
  {
    name: 'GET /api/v1/notifications/prefs',
    method: 'GET',
    template: '/api/v1/notifications/prefs',
    onSuccess: none,
  },
  {
    name: 'PUT /api/v1/notifications/prefs',
    method: 'PUT',
    template: '/api/v1/notifications/prefs',
    valid: (_ctx, variant) =>
      variant % 3 === 2
        ? {
            scope: variant % 2 ? 'team' : 'own',
            kinds: { run_finished: variant % 4 < 2, usage_parked: false },
          }
        : { scope: variant % 2 ? 'team' : 'own' },
  },
  {
    name: 'DELETE /api/v1/notifications/push/subscriptions/:id',
    method: 'DELETE',
    template: '/api/v1/notifications/push/subscriptions/:id',
    paramKinds: { id: 'device' },
    // A few of the caller's devices; a 204 deletes one (a delete, not a record), which later cases no longer name.
    before: (fx) => fx.subscribe(3),
    consumes: (fx, req) => {
      for (const device of req.devices) fx.unsubscribed(device.endpoint);
    },
  },
  {
    name: 'POST /api/v1/runs/:id/callback/test',
    method: 'POST',
    template: '/api/v1/runs/:id/callback/test',
    // The caller's runs call back the fuzzer's loopback receiver: a 200 is a real signed POST to it, nothing else.
    runs: { callback: true },
    valid: () => ({}),
    onSuccess: none,
    // The test ping's rate-limit rows (rate_limits: per run, user and team), nothing else.
    inserts: 3,
  },
  {
    name: 'POST /api/v1/runs/:id/episodes/:episodeId/callback/redeliver',
    method: 'POST',
    template: '/api/v1/runs/:id/episodes/:episodeId/callback/redeliver',
    paramKinds: { episodeId: 'episode' },
    runs: { callback: true, settled: true },
    preferred: ['finished', 'failed', 'cancelled'],
    valid: () => ({}),
    onSuccess: none,
    // The redelivery's rate-limit rows (per run, user and team); its workflow starts on the fuzz API's task queue,
    // where no worker polls (so nothing is sent and no callback_attempts row is written). It stays running: the
    // episode is in progress.
    inserts: 3,
    givesBackSlot: true,
    // Half the redelivered runs are replaced (fresh 202s later), half kept (a 409: in progress, slot given back).
    consumes: (fx, req, c) => {
      if (c.body.k === 'valid' && c.body.variant % 2 === 0) for (const id of req.runIds) fx.forget(id);
    },
  },
  { name: 'GET /healthz', method: 'GET', template: '/healthz', onSuccess: none },
  { name: 'GET /readyz', method: 'GET', template: '/readyz', onSuccess: none },
  { name: 'GET /metrics', method: 'GET', template: '/metrics', onSuccess: none },
  { name: 'GET /api/v1/openapi.json', method: 'GET', template: '/api/v1/openapi.json', onSuccess: none },
  { name: 'ANY unknown paths', method: 'GET', template: '' },
];

export const FUZZED_ROUTES = ROUTES.map((r) => r.name);

/** The routes a filter selects: an exact name selects that route only, other text every route containing it. */
export function selectRoutes(only: string[] | undefined): string[] {
  if (!only?.length) return FUZZED_ROUTES;
  return FUZZED_ROUTES.filter((name) =>
    only.some((o) => name === o || (!FUZZED_ROUTES.includes(o) && name.includes(o))),
  );
}

// ---------------------------------------------------------------------------------------------------------------
// Generators

const HEADER_CHAR = fc
  .integer({ min: 0x20, max: 0xff })
  .filter((c) => c !== 0x7f)
  .map((c) => String.fromCharCode(c));
const headerText = (maxLength: number) =>
  fc.string({ unit: HEADER_CHAR, minLength: 1, maxLength }).map((s) => s.trim() || 'x');

const badSegment: fc.Arbitrary<RawSegment> = fc
  .tuple(
    fc.oneof(
      {
        weight: 3,
        arbitrary: fc.constantFrom('', '.', '..', '...', 'a..b', '%', '%zz', '%E0%A4%A', '%00', '%2F'),
      },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          'a/b',
          'a%2Fb',
          '%2e%2e',
          '..%2f..%2fetc%2fpasswd',
          ' ',
          'a b',
          '?',
          '#',
          ';',
          '\\',
          "'",
          '"',
          '<script>',
          '{"$gt":""}',
          '$where',
          '__proto__',
          'constructor',
          'run_x|y',
          '*',
          '~',
          'run_00000000000000000000000000000000',
        ),
      },
      { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 24 }) },
      { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 24 }) },
      { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,40}$/) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(128, 129, 2_000, 10_000).map((n) => 'a'.repeat(n)),
      },
    ),
    fc.boolean(),
  )
  .map(([text, encode]) => ({ k: 'raw' as const, text, encode }));

/** In wild cases a run is in any state (the route's own state as often as any): most answers are a 409. */
const runRef: fc.Arbitrary<RunRef> = fc.oneof(
  { withCrossShrink: true },
  {
    weight: 6,
    arbitrary: fc.constantFrom(...RUN_STATES).map((state) => ({ k: 'own' as const, state })),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'otherTeam' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 3, arbitrary: badSegment },
);

const interactionRef: fc.Arbitrary<InteractionRef> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant({ k: 'ofRun' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'otherRun' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 2, arbitrary: badSegment },
);

const assistantRef: fc.Arbitrary<AssistantRef> = fc.oneof(
  { withCrossShrink: true },
  {
    weight: 4,
    arbitrary: fc.stringMatching(/^[A-Za-z0-9_:-]{1,24}$/).map((id) => ({ k: 'ok' as const, id })),
  },
  { weight: 2, arbitrary: badSegment },
);

const deviceRef: fc.Arbitrary<DeviceRef> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant({ k: 'device' as const, whose: 'own' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'device' as const, whose: 'teammate' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'device' as const, whose: 'otherTeam' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 2, arbitrary: badSegment },
);

const episodeRef: fc.Arbitrary<EpisodeRef> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant({ k: 'episode' as const, of: 'run' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'episode' as const, of: 'otherRun' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 2, arbitrary: badSegment },
);

const TOKEN_FLAWS: TokenFlaw[] = [
  'wrongSecret',
  'expired',
  'notYetValid',
  'noTeam',
  'noSub',
  'emptyTeam',
  'numericTeam',
  'algNone',
  'hs512',
  'noExp',
  'tooLong',
  'futureIat',
  'tampered',
  'truncated',
  'basicScheme',
  'noScheme',
  'twoTokens',
];
const authChoice: fc.Arbitrary<AuthChoice> = fc.oneof(
  { withCrossShrink: true },
  { weight: 12, arbitrary: fc.nat(3).map((style) => ({ k: 'valid' as const, style })) },
  { weight: 2, arbitrary: fc.constant({ k: 'otherTeam' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'none' as const }) },
  { weight: 2, arbitrary: fc.constantFrom(...TOKEN_FLAWS).map((flaw) => ({ k: 'flawed' as const, flaw })) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        headerText(64),
        headerText(64).map((s) => `Bearer ${s}`),
        fc.constantFrom(
          'Bearer',
          'Bearer ',
          'Bearer null',
          'Bearer undefined',
          'Bearer a.b.c',
          'Bearer eyJhbGciOiJIUzI1NiJ9..',
          'Bearer ' + 'A'.repeat(4_000),
          'Bearer a b',
          'Bearer\u00e9\u00e9',
        ),
      )
      .map((value) => ({ k: 'garbage' as const, value })),
  },
);

const RAW_NUMBERS = ['1e999', '-1e999', '1E400', '-0', '-0.0', '1e-400', '123456789012345678901234567890'];
const HUGE_BYTES = [
  129,
  501,
  2_049,
  10_001,
  64_001,
  100_001,
  1_000_001,
  BODY_LIMIT - 64,
  BODY_LIMIT + 1,
  1_500_000,
];
const lazyValue: fc.Arbitrary<Lazy> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      lazy: fc.constant('huge' as const),
      bytes: fc.constantFrom(...HUGE_BYTES),
      char: fc.constantFrom('a', 'é', '😀', '\\', '"', '\u0000', '\ud800', '\u2028'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      lazy: fc.constant('deep' as const),
      depth: fc.constantFrom(2, 99, 100, 101, 180, 181, 1_000, 5_000, 100_000),
      shape: fc.constantFrom('array' as const, 'object' as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ lazy: fc.constant('many' as const), count: fc.constantFrom(101, 1_000, 100_000) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ lazy: fc.constant('wide' as const), count: fc.constantFrom(1_000, 50_000) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ lazy: fc.constant('raw' as const), text: fc.constantFrom(...RAW_NUMBERS) }),
  },
);

const WRONG_TYPES: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  1e308,
  Number.MAX_SAFE_INTEGER + 2,
  '',
  ' ',
  '0',
  'null',
  [],
  {},
  [null],
  [[]],
  [[1, 2]],
  [{}],
  { $gt: '' },
  { $where: 'sleep(1000)' },
  { 'a.b': 1 },
  { _id: 'x' },
  { '': 1 },
  'x'.repeat(129),
  '\u0000',
  '\ud800',
  '\udfff\ud800',
  '💥',
  'é',
  '\u202e',
];
const jsonish = fc.jsonValue({ maxDepth: 3 });
/** Valid JSON a document store may refuse: operator and dotted keys, NUL in keys, nested arrays, ±Infinity. */
const storeHostile: fc.Arbitrary<Value> = fc.oneof(
  fc
    .constantFrom<unknown>(
      { $set: { x: 1 } },
      { 'a.b': 1 },
      { 'a\u0000b': 1 },
      [[]],
      [1, [2]],
      { a: [{ b: [[3]] }] },
      { _id: { $oid: 'x' } },
    )
    .map((v) => ({ v })),
  fc
    .constantFrom('1e999', '-1e999', '{"x":1e999}', '[1e400]')
    .map((text) => ({ lazy: 'raw' as const, text })),
);

const value: fc.Arbitrary<Value> = fc.oneof(
  { withCrossShrink: true },
  { weight: 3, arbitrary: fc.constantFrom(...WRONG_TYPES).map((v) => ({ v })) },
  { weight: 3, arbitrary: storeHostile },
  { weight: 3, arbitrary: jsonish.map((v) => ({ v })) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 64 }).map((v) => ({ v })) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 64 }).map((v) => ({ v })) },
  { weight: 3, arbitrary: lazyValue },
);

const extraKey = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'extra',
      '$where',
      '$set',
      'a.b',
      '.',
      '__proto__',
      'constructor',
      'prototype',
      '_id',
      '',
      '\u0000',
      'type',
      'spent',
      'id',
      'teamId',
      'ownerId',
      'status',
      'toString',
      'x'.repeat(1_000),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 16 }) },
);

const bodyOp: fc.Arbitrary<BodyOp> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drop' as const), pick: fc.nat(20) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('set' as const), pick: fc.nat(20), value }) },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('extra' as const), pick: fc.nat(20), key: extraKey, value }),
  },
);

const INVALID_JSON = [
  '{',
  '}',
  '[',
  '{"',
  '{"a":',
  '{"a":1,}',
  '[1,]',
  "{'a':1}",
  '{a:1}',
  'NaN',
  'Infinity',
  'undefined',
  'nul',
  'tru',
  '\uFEFF{}',
  '{}{}',
  '{"a":1}{"b":2}',
  '{"a":"\\x41"}',
  '{"a":"\\u12"}',
  '"\\ud800"',
  '{"a":01}',
  '{"a":.5}',
  '{"a":+1}',
  '/* c */ {}',
  '{"a":1} // c',
  'null',
  'true',
  '0',
  '"x"',
  '[]',
  '{"a":"\u2028"}',
  '\u0000',
  ' ',
  '',
  '\t\n{}\n',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '{"a":1,"a":2}',
];

const bodyChoice: fc.Arbitrary<BodyChoice> = fc.oneof(
  { withCrossShrink: true },
  {
    weight: 12,
    arbitrary: fc.record({
      k: fc.constant('valid' as const),
      variant: fc.nat(7),
      ops: fc.oneof(
        { withCrossShrink: true },
        { weight: 1, arbitrary: fc.constant<BodyOp[]>([]) },
        { weight: 2, arbitrary: fc.array(bodyOp, { minLength: 1, maxLength: 3 }) },
      ),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'none' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('truncated' as const), variant: fc.nat(7), keep: fc.nat(200) }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('json' as const), value: jsonish }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('json' as const),
      value: fc.dictionary(extraKey, jsonish, { maxKeys: 5 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('json' as const), value: fc.anything({ maxDepth: 3 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('text' as const),
      text: fc.oneof(fc.constantFrom(...INVALID_JSON), fc.string({ unit: 'binary', maxLength: 200 })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 64 }) }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('lazy' as const), value: lazyValue }) },
);

const contentType: fc.Arbitrary<string | null> = fc.oneof(
  { withCrossShrink: true },
  { weight: 12, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: fc.constant(null) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'text/plain',
      'text/plain; charset=utf-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=xyz',
      'application/json; charset=utf-16',
      'application/json; charset=latin1',
      'application/json; charset=bogus',
      'application/merge-patch+json',
      'application/vnd.api+json',
      'application/csp-report',
      'application/xml',
      'application/octet-stream',
      '*/*',
      'json',
      'application/',
    ),
  },
  { weight: 1, arbitrary: headerText(40) },
);

const extraHeaders: fc.Arbitrary<[string, string][]> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant<[string, string][]>([]) },
  {
    weight: 1,
    arbitrary: fc.array(
      fc.oneof(
        fc.tuple(
          fc.constant('content-encoding'),
          fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'bogus', 'gzip, gzip', 'zstd'),
        ),
        fc.tuple(fc.constant('accept'), fc.constantFrom('text/html', 'application/xml', '*/*', 'image/png')),
        fc.tuple(fc.constant('accept-charset'), fc.constantFrom('utf-16', 'iso-8859-1', 'bogus')),
        fc.tuple(fc.constant('x-http-method-override'), fc.constantFrom('DELETE', 'PUT', 'GET')),
        fc.tuple(fc.constant('x-forwarded-for'), headerText(40)),
        fc.tuple(fc.constant('cookie'), headerText(40)),
        fc.tuple(fc.constant('origin'), fc.constantFrom('https://evil.example', 'null')),
        fc.tuple(
          headerText(20).map((s) => `x-${s.replace(/[^a-z0-9-]/gi, '') || 'fuzz'}`),
          headerText(40),
        ),
      ),
      { minLength: 1, maxLength: 3 },
    ),
  },
);

const querySuffix: fc.Arbitrary<string | null> = fc.oneof(
  { withCrossShrink: true },
  { weight: 8, arbitrary: fc.constant(null) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constantFrom(
        '?',
        '?a',
        '?a=1&a=2',
        '?__proto__[x]=1',
        '?%zz',
        '?limit=-1',
        '?x=' + 'y'.repeat(2_000),
      ),
      fc.string({ unit: 'binary', maxLength: 30 }).map((s) => `?q=${encodeURIComponent(s)}`),
      // The paged listings' own parameters: any limit, and cursors that are or look like one.
      fc.string({ unit: 'binary', maxLength: 12 }).map((s) => `?limit=${encodeURIComponent(s)}`),
      fc
        .tuple(fc.oneof(fc.integer(), fc.double(), fc.string()), fc.oneof(fc.string(), fc.integer()))
        .map((pair) => `?before=${Buffer.from(JSON.stringify(pair)).toString('base64url')}`),
      fc.string({ unit: 'binary', maxLength: 40 }).map((s) => `?limit=2&before=${encodeURIComponent(s)}`),
    ),
  },
);

const OTHER_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const methodFor = (method: string): fc.Arbitrary<string> =>
  fc.oneof(
    { withCrossShrink: true },
    { weight: 10, arbitrary: fc.constant(method) },
    { weight: 2, arbitrary: fc.constantFrom(...OTHER_METHODS) },
    { weight: 1, arbitrary: fc.constantFrom('PROPFIND', 'PURGE', 'SEARCH', 'MKCOL') },
  );

const unknownPath: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '/',
      '/api',
      '/api/',
      '/api/v1',
      '/api/v1/',
      '/api/v1/nope',
      '/api/v2/runs',
      '/API/V1/RUNS',
      '/api/v1/runs/',
      '//api/v1/runs',
      '/api/v1/runs/x/y/z',
      '/api/v1/notifications',
      '/api/v1/notifications/push',
      '/api/v1/assistants/a/watches',
      '/index.html',
      '/sw.js',
      '/runs/abc',
      '/healthz/',
      '/healthz/x',
      '/favicon.ico',
      '/..%2f..%2f..%2fetc%2fpasswd',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/%',
      '/%zz',
      '/%E0%A4%A',
      '/%00',
      '/api/%zz',
      '/api/v1/runs/%',
    ),
  },
  {
    weight: 3,
    arbitrary: fc
      .array(badSegment, { minLength: 1, maxLength: 5 })
      .map((segs) => `/api/v1/${segs.map(segmentText).join('/')}`),
  },
  {
    weight: 2,
    arbitrary: fc
      .array(badSegment, { minLength: 1, maxLength: 5 })
      .map((segs) => `/${segs.map(segmentText).join('/')}`),
  },
  { weight: 1, arbitrary: fc.constantFrom(`/api/v1/${'x'.repeat(10_000)}`, `/${'a/'.repeat(2_000)}`) },
);

function caseArbitrary(route: RouteSpec): fc.Arbitrary<FuzzCase> {
  const params: Record<string, fc.Arbitrary<ParamChoice>> = {};
  const realParams: Record<string, fc.Arbitrary<ParamChoice>> = {};
  for (const name of paramNames(route.template)) {
    const kind = route.paramKinds?.[name];
    if (kind) {
      params[name] = kind === 'device' ? deviceRef : episodeRef;
      realParams[name] =
        kind === 'device'
          ? fc.constant({ k: 'device' as const, whose: 'own' as const })
          : fc.constant({ k: 'episode' as const, of: 'run' as const });
      continue;
    }
    params[name] = name === 'iid' ? interactionRef : name === 'assistantId' ? assistantRef : runRef;
    realParams[name] =
      name === 'iid'
        ? fc.constant({ k: 'ofRun' as const })
        : name === 'assistantId'
          ? fc.stringMatching(/^[A-Za-z0-9_:-]{1,24}$/).map((id) => ({ k: 'ok' as const, id }))
          : fc
              .constantFrom(...(route.preferred ?? RUN_STATES))
              .map((state) => ({ k: 'own' as const, state }));
  }
  // Anything goes, on every dimension at once.
  const wild = fc.record({
    method: route.template ? methodFor(route.method) : fc.constantFrom(...OTHER_METHODS, 'PROPFIND'),
    params: fc.record(params),
    path: route.template ? fc.constant(undefined) : unknownPath,
    query: querySuffix,
    auth: authChoice,
    body: bodyChoice,
    contentType,
    headers: extraHeaders,
  });
  // A well-formed request (the caller, the route's method, a real resource in the state the route acts on)
  // whose body is valid or up to two edits off: these get past the edge and exercise the writes.
  const nearlyValid = fc.record({
    method: route.template ? fc.constant(route.method) : fc.constantFrom(...OTHER_METHODS),
    params: fc.record(realParams),
    path: route.template ? fc.constant(undefined) : unknownPath,
    query: fc.constant(null),
    auth: fc.constant<AuthChoice>({ k: 'valid', style: 0 }),
    body: fc.record({
      k: fc.constant('valid' as const),
      variant: fc.nat(7),
      ops: fc.array(bodyOp, { maxLength: 2 }),
    }),
    contentType: fc.constant('application/json'),
    headers: fc.constant<[string, string][]>([]),
  });
  return fc.oneof(
    { withCrossShrink: true },
    { weight: 1, arbitrary: nearlyValid },
    { weight: 5, arbitrary: wild },
  ) as fc.Arbitrary<FuzzCase>;
}

const paramNames = (template: string): string[] => [...template.matchAll(/:(\w+)/g)].map((m) => m[1]);
const segmentText = (seg: RawSegment): string => (seg.encode ? encodeURIComponent(seg.text) : seg.text);

// ---------------------------------------------------------------------------------------------------------------
// Fixtures: the runs and interactions a case's symbolic params stand for

interface RunFixture {
  runId: string;
  teamId: string;
  interactionId?: string;
}

interface Answer {
  status: number;
  contentType: string;
  text: string;
}

const RUN_BATCH = 2;
const INTRUDER = 'intruder';
const TEAMMATE = 'fuzz-teammate';

class Fixtures {
  /** The caller's runs by state and kind (see `kind`). */
  private readonly runs = new Map<string, RunFixture>();
  private other?: RunFixture;
  private readonly endpoints = new Map<string, string[]>();
  /** Devices of a teammate and of another team's user, subscribed when a case first names them. */
  private readonly foreign = new Map<'teammate' | 'otherTeam', string>();
  /** The fuzz-team member the current route's valid tokens name (each route has its own). */
  user = 'fuzz-user';
  /** What the current route's runs are made with (RouteSpec.runs). */
  private kind: RouteSpec['runs'];

  constructor(
    private readonly baseUrl: string,
    readonly tokens: { owner: string; intruder: string; secret: string },
    readonly subscription: (n: number) => SubscriptionJSON,
    private readonly timeoutMs: number,
    private readonly db: Db,
    /** The loopback receiver that runs made with a callback call back (and nothing else). */
    private readonly callbackUrl: string | undefined,
  ) {}

  /** Valid tokens now name this member of fuzz-team (runs are the team's, so fixtures carry over). */
  actAs(user: string, runs?: RouteSpec['runs']): void {
    this.user = user;
    this.tokens.owner = mintToken(this.tokens.secret, user, 'fuzz-team', '1d');
    this.kind = runs;
  }

  private key(state: RunState): string {
    return `${state}${this.kind?.callback ? '+callback' : ''}${this.kind?.settled ? '+settled' : ''}`;
  }

  /** One of the current member's devices, subscribing one when none is left. */
  async ownDevice(): Promise<{ owner: string; endpoint: string }> {
    if (!this.subscribed.length) await this.subscribe(1);
    return { owner: this.user, endpoint: this.subscribed[0] };
  }

  /** A device of a fuzz-team teammate, or of another team's user (the intruder). */
  async foreignDevice(whose: 'teammate' | 'otherTeam'): Promise<{ owner: string; endpoint: string }> {
    const owner = whose === 'otherTeam' ? INTRUDER : TEAMMATE;
    let endpoint = this.foreign.get(whose);
    if (!endpoint) {
      const token =
        whose === 'otherTeam'
          ? this.tokens.intruder
          : mintToken(this.tokens.secret, owner, 'fuzz-team', '1d');
      const sub = this.subscription(0);
      await this.setup(token, 'POST', '/api/v1/notifications/push/subscriptions', sub);
      endpoint = sub.endpoint;
      this.foreign.set(whose, endpoint);
    }
    return { owner, endpoint };
  }

  /** A 2xx deleted this device (its owner asked): later cases name another. */
  unsubscribed(endpoint: string): void {
    const list = this.subscribed;
    if (list.includes(endpoint)) list.splice(list.indexOf(endpoint), 1);
    for (const [whose, e] of this.foreign) if (e === endpoint) this.foreign.delete(whose);
  }

  /** The endpoints the current member subscribed (by a valid case or by a route's set-up). */
  get subscribed(): string[] {
    const list = this.endpoints.get(this.user) ?? [];
    this.endpoints.set(this.user, list);
    return list;
  }

  /** Subscribes `count` fresh endpoints for the current member. */
  async subscribe(count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      const sub = this.subscription(i);
      await this.setup(this.tokens.owner, 'POST', '/api/v1/notifications/push/subscriptions', sub);
      this.subscribed.push(sub.endpoint);
    }
  }

  /** Spare runs per state, prepared a batch at a time (in parallel: most of a run's set-up is Temporal latency). */
  private readonly stock = new Map<string, RunFixture[]>();

  async run(state: RunState): Promise<RunFixture> {
    const key = this.key(state);
    let run = this.runs.get(key);
    if (!run) {
      let spare = this.stock.get(key) ?? [];
      if (!spare.length) {
        spare = await Promise.all(
          Array.from({ length: RUN_BATCH }, () => this.prepare(this.tokens.owner, 'fuzz-team', state)),
        );
      }
      run = spare.shift() as RunFixture;
      this.stock.set(key, spare);
      this.runs.set(key, run);
    }
    return run;
  }

  async otherTeamRun(): Promise<RunFixture> {
    this.other ??= await this.prepare(this.tokens.intruder, 'other-team', 'paused_input');
    return this.other;
  }

  /** A 2xx moved this run: the next case that wants a run in that state gets a fresh one. */
  forget(runId: string): RunFixture | undefined {
    let found: RunFixture | undefined;
    for (const [state, run] of this.runs) {
      if (run.runId !== runId) continue;
      this.runs.delete(state);
      found = run;
    }
    if (this.other?.runId === runId) this.other = undefined;
    return found;
  }

  /** A 2xx moved the caller's run to `state`: it serves as that state's next run (no set-up needed). */
  moved(runId: string, state: RunState, interactionId?: string): void {
    const run = this.forget(runId);
    if (!run) return;
    const key = this.key(state);
    this.stock.set(key, [
      { ...run, interactionId: interactionId ?? run.interactionId },
      ...(this.stock.get(key) ?? []),
    ]);
  }

  /** Requests sent for set-up so far: a case that sent none can reuse the previous case's write counters. */
  setupRequests = 0;

  private async setup(token: string, method: string, path: string, body: unknown): Promise<Answer> {
    this.setupRequests++;
    const answer = await send(this.baseUrl, this.timeoutMs, {
      method,
      path,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    if ('error' in answer || answer.status >= 300) {
      const what = 'error' in answer ? answer.error : `${answer.status} ${answer.text.slice(0, 300)}`;
      throw new Error(`the API failed a set-up request (${method} ${path}): ${what}`);
    }
    return answer;
  }

  private async prepare(token: string, teamId: string, state: RunState): Promise<RunFixture> {
    const callback = this.kind?.callback && this.callbackUrl ? { url: this.callbackUrl } : undefined;
    const created = await this.setup(token, 'POST', '/api/v1/runs', { title: `fuzz ${state}`, callback });
    const runId = (JSON.parse(created.text) as { id: string }).id;
    const at = (op: string) => `/api/v1/runs/${runId}/${op}`;
    const run: RunFixture = { runId, teamId };
    if (state === 'paused_input' || state === 'answered') {
      const paused = await this.setup(token, 'POST', at('pause'), { prompt: 'Proceed?' });
      run.interactionId = (JSON.parse(paused.text) as { interactionId: string }).interactionId;
      if (state === 'answered')
        await this.setup(token, 'POST', at(`interactions/${run.interactionId}/answer`), { answer: 'yes' });
    }
    const then: Partial<Record<RunState, [string, unknown]>> = {
      paused_park: ['park', { wall: 'daily_tokens' }],
      paused_operator: ['soft-pause', {}],
      finished: ['complete', { finalAnswer: 'done' }],
      failed: ['fail', { error: { code: 'e', message: 'm' } }],
      cancelled: ['cancel', {}],
    };
    const step = then[state];
    if (step) await this.setup(token, 'POST', at(step[0]), step[1]);
    if (this.kind?.settled && callback && ['finished', 'failed', 'cancelled'].includes(state)) {
      // What a worker leaves when the ended run's callback gave up (no worker runs here): its claim, settled.
      this.setupRequests++;
      const claims = createClaimStore(this.db, { graceSeconds: 60 });
      const key = claimKeys.callback(`${runId}:end`);
      if (
        !(await claims.tryMark(key, 'fuzz-fixture')) ||
        !(await claims.markDelivered(key, 'fuzz-fixture', 'gave_up'))
      )
        throw new Error(`could not settle the callback claim ${key}`);
    }
    return run;
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Turning a symbolic case into the request it stands for

interface ResolvedRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  /** The caller holds a valid token (its team), or none. */
  callerTeam?: string;
  /** Teams of the runs named in the path. */
  runTeams: string[];
  /** The fixture runs named in the path (forgotten when a 2xx moves them). */
  runIds: string[];
  /** The states of the caller's runs named in the path, as they were before the request. */
  runStates: RunState[];
  /** Every param is a real resource (no raw segment): the route itself answers. */
  wellFormed: boolean;
  /** The user the caller's valid token names (none without one). */
  callerUser?: string;
  /** The devices named in the path, and whose they are: a 2xx may touch only the caller's own. */
  devices: { whose: 'own' | 'teammate' | 'otherTeam'; owner: string; endpoint: string }[];
}

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function authHeader(choice: AuthChoice, tokens: Fixtures['tokens']): string | undefined {
  const claims = { team: 'fuzz-team' };
  const sign = (payload: object, secret = tokens.secret, options: jwt.SignOptions = {}) =>
    jwt.sign(payload, secret, { algorithm: 'HS256', ...options });
  switch (choice.k) {
    case 'valid':
      return [
        `Bearer ${tokens.owner}`,
        `bearer ${tokens.owner}`,
        `BEARER   ${tokens.owner}`,
        `Bearer\t${tokens.owner}`,
      ][choice.style % 4];
    case 'otherTeam':
      return `Bearer ${tokens.intruder}`;
    case 'none':
      return undefined;
    case 'garbage':
      return choice.value;
    case 'flawed': {
      const token = ((): string => {
        switch (choice.flaw) {
          case 'wrongSecret':
            return sign(claims, 'not-the-secret', { subject: 'fuzz-user' });
          case 'expired':
            return sign({ ...claims, exp: Math.floor(Date.now() / 1000) - 60 }, tokens.secret, {
              subject: 'fuzz-user',
            });
          case 'notYetValid':
            return sign({ ...claims, nbf: Math.floor(Date.now() / 1000) + 3600 }, tokens.secret, {
              subject: 'fuzz-user',
            });
          case 'noTeam':
            return sign({}, tokens.secret, { subject: 'fuzz-user' });
          case 'noSub':
            return sign(claims);
          case 'emptyTeam':
            return sign({ team: '' }, tokens.secret, { subject: 'fuzz-user' });
          case 'numericTeam':
            return sign({ team: 42, sub: 7 });
          case 'algNone':
            return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ ...claims, sub: 'fuzz-user' })}.`;
          case 'hs512':
            return jwt.sign(claims, tokens.secret, { algorithm: 'HS512', subject: 'fuzz-user' });
          case 'noExp':
            return sign(claims, tokens.secret, { subject: 'fuzz-user' });
          case 'tooLong':
            return sign(claims, tokens.secret, { subject: 'fuzz-user', expiresIn: '30d' });
          case 'futureIat': {
            const iat = Math.floor(Date.now() / 1000) + 3600;
            return sign({ ...claims, iat, exp: iat + 600 }, tokens.secret, { subject: 'fuzz-user' });
          }
          case 'tampered': {
            const [header, , signature] = tokens.owner.split('.');
            return `${header}.${b64url({ team: 'other-team', sub: 'fuzz-user' })}.${signature}`;
          }
          case 'truncated':
            return tokens.owner.slice(0, -3);
          case 'basicScheme':
          case 'noScheme':
          case 'twoTokens':
            return tokens.owner;
        }
      })();
      if (choice.flaw === 'basicScheme') return `Basic ${token}`;
      if (choice.flaw === 'noScheme') return token;
      if (choice.flaw === 'twoTokens') return `Bearer ${token} ${token}`;
      return `Bearer ${token}`;
    }
  }
}

function lazyText(lazy: Lazy): string {
  switch (lazy.lazy) {
    case 'huge': {
      const unit = JSON.stringify(lazy.char).slice(1, -1);
      return `"${unit.repeat(Math.ceil(lazy.bytes / Buffer.byteLength(unit)))}"`;
    }
    case 'deep':
      return lazy.shape === 'array'
        ? '['.repeat(lazy.depth) + ']'.repeat(lazy.depth)
        : '{"a":'.repeat(lazy.depth) + '0' + '}'.repeat(lazy.depth);
    case 'many':
      return `[${Array.from({ length: lazy.count }, (_, i) => `"ISS-${i}"`).join(',')}]`;
    case 'wide':
      return `{${Array.from({ length: lazy.count }, (_, i) => `"k${i}":${i}`).join(',')}}`;
    case 'raw':
      return lazy.text;
  }
}

type JsonPath = (string | number)[];

/** Every path into a JSON value (objects and arrays), parents before children. */
function pathsOf(value: unknown, prefix: JsonPath = []): JsonPath[] {
  if (typeof value !== 'object' || value === null) return [];
  const keys: (string | number)[] = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
  return keys.flatMap((key) => {
    const path = [...prefix, key];
    return [path, ...pathsOf((value as Record<string | number, unknown>)[key], path)];
  });
}

function parentOf(root: unknown, path: JsonPath): Record<string | number, unknown> | undefined {
  let node = root;
  for (const key of path.slice(0, -1)) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return typeof node === 'object' && node !== null ? (node as Record<string | number, unknown>) : undefined;
}

/** Own data property, even for "__proto__" (an assignment would set the prototype instead). */
function define(target: Record<string | number, unknown>, key: string | number, v: unknown): void {
  Object.defineProperty(target, key, { value: v, enumerable: true, writable: true, configurable: true });
}

/** A valid body with the case's edits applied, serialised; lazy values are spliced in as text. */
function editedBody(valid: Record<string, unknown>, ops: BodyOp[]): string {
  const body = JSON.parse(JSON.stringify(valid)) as Record<string, unknown>;
  const splices: string[] = [];
  const put = (v: Value): unknown => {
    // A copy: generated values (and constants) are shared between cases, and later edits may write into them.
    if ('v' in v) return structuredClone(v.v);
    splices.push(lazyText(v));
    return `@@fuzz-lazy-${splices.length - 1}@@`;
  };
  for (const op of ops) {
    const paths = pathsOf(body);
    if (op.op === 'extra') {
      const objects: JsonPath[] = [[], ...paths.filter((p) => isPlainObject(valueAt(body, p)))];
      const at = objects[op.pick % objects.length];
      const target = at.length ? (valueAt(body, at) as Record<string, unknown>) : body;
      define(target, op.key, put(op.value));
      continue;
    }
    if (!paths.length) {
      if (op.op === 'set') define(body, 'x', put(op.value));
      continue;
    }
    const path = paths[op.pick % paths.length];
    const parent = parentOf(body, path);
    if (!parent) continue;
    const key = path[path.length - 1];
    if (op.op === 'drop') {
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
    } else define(parent, key, put(op.value));
  }
  let text = JSON.stringify(body);
  splices.forEach((splice, i) => {
    text = text.replace(`"@@fuzz-lazy-${i}@@"`, () => splice);
  });
  return text;
}

const isPlainObject = (v: unknown): boolean => typeof v === 'object' && v !== null && !Array.isArray(v);
function valueAt(root: unknown, path: JsonPath): unknown {
  let node = root;
  for (const key of path) node = (node as Record<string | number, unknown>)[key];
  return node;
}

function bodyText(choice: BodyChoice, valid: () => Record<string, unknown>): string | Uint8Array | undefined {
  switch (choice.k) {
    case 'none':
      return undefined;
    case 'valid':
      return editedBody(valid(), choice.ops);
    case 'truncated': {
      const text = JSON.stringify(valid());
      return text.slice(0, Math.min(choice.keep, text.length - 1));
    }
    case 'json':
      return JSON.stringify(choice.value) ?? 'null';
    case 'text':
      return choice.text;
    case 'bytes':
      return choice.bytes;
    case 'lazy':
      return lazyText(choice.value);
  }
}

async function resolve(route: RouteSpec, c: FuzzCase, fx: Fixtures): Promise<ResolvedRequest> {
  const runTeams: string[] = [];
  const runIds: string[] = [];
  const runStates: RunState[] = [];
  const devices: ResolvedRequest['devices'] = [];
  let wellFormed = true;
  let named: RunFixture | undefined;
  const segments: Record<string, string> = {};
  // Runs first: the interaction and episode params are "of the run" named in the same path.
  const later = (name: string) => Number(name === 'iid' || route.paramKinds?.[name] === 'episode');
  const names = paramNames(route.template).sort((a, b) => later(a) - later(b));
  for (const name of names) {
    const choice = c.params[name];
    if (choice.k === 'raw') {
      wellFormed = false;
      segments[name] = segmentText(choice);
    } else if (choice.k === 'device') {
      const device = choice.whose === 'own' ? await fx.ownDevice() : await fx.foreignDevice(choice.whose);
      devices.push({ whose: choice.whose, owner: device.owner, endpoint: device.endpoint });
      segments[name] = subscriptionId(device.endpoint);
    } else if (choice.k === 'episode') {
      const run = choice.of === 'run' ? named : await fx.otherTeamRun();
      segments[name] = `${run?.runId ?? 'run_ffffffffffffffffffffffffffffffff'}:end`;
    } else if (choice.k === 'missing' && route.paramKinds?.[name]) {
      segments[name] =
        route.paramKinds[name] === 'device' ? '0'.repeat(64) : 'run_00000000000000000000000000000000:end';
    } else if (choice.k === 'own' || choice.k === 'otherTeam') {
      named = choice.k === 'own' ? await fx.run(choice.state) : await fx.otherTeamRun();
      runTeams.push(named.teamId);
      runIds.push(named.runId);
      if (choice.k === 'own') runStates.push(choice.state);
      segments[name] = named.runId;
    } else if (choice.k === 'missing') {
      segments[name] =
        name === 'iid' ? 'int_00000000000000000000000000000000' : 'run_00000000000000000000000000000000';
    } else if (choice.k === 'ok') {
      segments[name] = choice.id;
    } else if (choice.k === 'ofRun') {
      segments[name] = named?.interactionId ?? 'int_ffffffffffffffffffffffffffffffff';
    } else {
      const other = await fx.otherTeamRun();
      segments[name] = other.interactionId ?? 'int_eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee';
    }
  }
  const path =
    (c.path ?? route.template.replace(/:(\w+)/g, (_, name: string) => segments[name])) + (c.query ?? '');
  const headers: Record<string, string> = {};
  const auth = authHeader(c.auth, fx.tokens);
  if (auth !== undefined) headers.authorization = auth;
  for (const [name, v] of c.headers) headers[name] = v;
  let body: string | Uint8Array | undefined;
  if (c.method !== 'GET' && c.method !== 'HEAD') {
    body = bodyText(c.body, () =>
      route.valid ? route.valid(fx, c.body.k === 'valid' ? c.body.variant : 0) : {},
    );
    if (body !== undefined && c.contentType !== null) headers['content-type'] = c.contentType;
  }
  const callerTeam = c.auth.k === 'valid' ? 'fuzz-team' : c.auth.k === 'otherTeam' ? 'other-team' : undefined;
  const callerUser = c.auth.k === 'valid' ? fx.user : c.auth.k === 'otherTeam' ? INTRUDER : undefined;
  return {
    method: c.method,
    path,
    headers,
    body,
    callerTeam,
    runTeams,
    runIds,
    runStates,
    wellFormed,
    callerUser,
    devices,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Sending, and checking the answer

async function send(
  baseUrl: string,
  timeoutMs: number,
  req: { method: string; path: string; headers: Record<string, string>; body?: string | Uint8Array },
): Promise<Answer | { error: string }> {
  try {
    const res = await fetch(baseUrl + req.path, {
      method: req.method,
      headers: req.headers,
      body: typeof req.body === 'object' ? new Uint8Array(req.body) : req.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = Buffer.from(await res.arrayBuffer()).toString('utf8');
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', text };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return {
      error: `${err instanceof Error ? err.message : String(err)}${cause ? ` (${cause.code ?? ''} ${cause.message ?? ''})` : ''}`,
    };
  }
}

function interactionOf(text: string): string | undefined {
  try {
    const id = (JSON.parse(text) as { interactionId?: unknown }).interactionId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

function short(text: string, max = 240): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars)`;
}

function describe(req: ResolvedRequest, answer: Answer | { error: string }): string {
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, short(v, 120)]));
  const body =
    req.body === undefined
      ? 'none'
      : typeof req.body === 'string'
        ? `${JSON.stringify(short(req.body))} (${Buffer.byteLength(req.body)} bytes)`
        : `bytes ${Buffer.from(req.body).toString('hex')}`;
  const got =
    'error' in answer
      ? `no answer: ${answer.error}`
      : `${answer.status} ${answer.contentType} ${short(answer.text)}`;
  return `request: ${req.method} ${short(req.path, 200)}\n  headers: ${JSON.stringify(headers)}\n  body: ${body}\n  answer: ${got}`;
}

// What a case wrote. The default probe reads the server's own command counters (serverStatus
// metrics.commands: one cheap call on MongoDB and FerretDB alike), so "a refused request wrote nothing" is
// checked on every case at a constant cost; counting documents instead (countMode 'documents') is exact but
// scans every collection on FerretDB, which grows with the store (≈40 µs a document, twice a case).
const WRITE_COMMANDS = ['insert', 'update', 'delete', 'findAndModify'] as const;
type Snapshot = Record<string, number>;

async function commandSnapshot(db: Db): Promise<Snapshot | undefined> {
  const status = (await db.admin().command({ serverStatus: 1 })) as {
    metrics?: { commands?: Record<string, { total?: unknown; failed?: unknown } | undefined> };
  };
  const commands = status.metrics?.commands;
  if (!commands) return undefined;
  return Object.fromEntries(
    WRITE_COMMANDS.map((name) => {
      const total = commands[name]?.total;
      return [name, typeof total === 'number' || typeof total === 'bigint' ? Number(total) : 0];
    }),
  );
}

async function documentSnapshot(db: Db): Promise<Snapshot> {
  const counts = await Promise.all(COLLECTIONS.map((name) => db.collection(name).countDocuments({})));
  return Object.fromEntries(COLLECTIONS.map((name, i) => [name, counts[i]]));
}

function diff(before: Snapshot, after: Snapshot): Snapshot {
  const changed: Snapshot = {};
  for (const name of Object.keys(after))
    if (after[name] !== (before[name] ?? 0)) changed[name] = after[name] - (before[name] ?? 0);
  return changed;
}

function isErrorShape(answer: Answer): string | undefined {
  if (!/^application\/json/i.test(answer.contentType))
    return `error answer is ${answer.contentType || 'untyped'}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    return 'error answer is not JSON';
  }
  if (
    !isPlainObject(parsed) ||
    typeof (parsed as { error?: unknown }).error !== 'string' ||
    Object.keys(parsed as object).length !== 1
  ) {
    return 'error answer is not {"error": string}';
  }
  return undefined;
}

/** Properties of one answer; an empty list means the case passed. */
function check(
  route: RouteSpec,
  req: ResolvedRequest,
  answer: Answer | { error: string },
  written: Snapshot,
  mode: 'commands' | 'documents',
): string[] {
  const wrote = JSON.stringify(written);
  if ('error' in answer)
    return [`the API did not answer: ${answer.error} (write commands meanwhile: ${wrote})`];
  const problems: string[] = [];
  const { status } = answer;
  // 501 is HTTP's own answer to a method the server does not implement; 431 is Node's to oversized headers.
  if (status >= 500 && !(status === 501 && !STANDARD_METHODS.has(req.method)))
    problems.push(`answered ${status} (write commands meanwhile: ${wrote})`);
  if (status >= 400 && req.method !== 'HEAD' && status !== 431) {
    const shape = isErrorShape(answer);
    if (shape) problems.push(shape);
  }
  // A refused request stores nothing. By command: no insert, update or findAndModify ran at all (a delete
  // cannot leave a record behind; DELETE of a missing watch is a 404 after a no-op delete).
  const stored =
    mode === 'documents'
      ? Object.keys(written).length > 0
      : (written.insert ?? 0) + (written.update ?? 0) + (written.findAndModify ?? 0) > 0;
  if (status >= 400 && status < 500 && stored) problems.push(`a ${status} wrote to the store: ${wrote}`);
  if ((req.method === 'GET' || req.method === 'HEAD') && status < 500 && stored)
    problems.push(`a ${req.method} (${status}) wrote to the store: ${wrote}`);
  // The path as fetch sent it (a relative "//…" or "/\\…" would parse as a host, so keep the origin in front).
  const pathname = new URL(`http://x${req.path}`).pathname;
  // Without a token only the studio's files (HTML, scripts, styles, images), the probes (/healthz, /readyz; /metrics
  // is text) and the OpenAPI document answer a 2xx: a JSON or empty 2xx (a 204, say) came from a route behind the gate.
  if (
    status < 300 &&
    req.callerTeam === undefined &&
    (/^application\/json/i.test(answer.contentType) || !answer.contentType) &&
    !/^\/(healthz|readyz|api\/v1\/openapi\.json)\/?$/i.test(pathname)
  ) {
    problems.push(`answered ${status} (${answer.contentType || 'no content type'}) without a valid token`);
  }
  if (
    status < 300 &&
    req.method !== 'OPTIONS' &&
    req.callerTeam &&
    req.runTeams.some((team) => team !== req.callerTeam)
  ) {
    problems.push(`answered ${status} to ${req.callerTeam} about another team's run`);
  }
  const notTheirs = req.devices.filter((d) => d.owner !== req.callerUser);
  if (status < 300 && req.method !== 'OPTIONS' && req.method !== 'HEAD' && notTheirs.length)
    problems.push(
      `answered ${status} to ${req.callerUser ?? 'no user'} about the ${notTheirs[0].whose} device`,
    );
  // A create that succeeds writes its whole record: exactly these documents (or, by command, these inserts).
  if (status < 300 && req.method === route.method && req.wellFormed && route.template) {
    const repeat = route.repeatOf !== undefined && req.runStates.includes(route.repeatOf);
    const expected = repeat
      ? {}
      : mode === 'documents'
        ? route.onSuccess?.(status)
        : route.inserts === undefined
          ? undefined
          : { insert: typeof route.inserts === 'number' ? route.inserts : route.inserts(answer as Answer) };
    if (expected) {
      const got = mode === 'documents' ? written : { insert: written.insert ?? 0 };
      const want = Object.fromEntries(
        Object.keys({ ...expected, ...got }).flatMap((k) =>
          (expected as Snapshot)[k] || got[k] ? [[k, (expected as Snapshot)[k] ?? 0]] : [],
        ),
      );
      const have = Object.fromEntries(Object.keys(want).map((k) => [k, got[k] ?? 0]));
      if (JSON.stringify(want) !== JSON.stringify(have))
        problems.push(`a ${status} wrote ${JSON.stringify(have)}, expected exactly ${JSON.stringify(want)}`);
    }
  }
  return problems;
}

/**
 * The domain shape of every stored document, and the records that must come together: a run and its
 * run_started event, one run_paused event per pause, its run_<status> event once ended, the pending interaction
 * of a run paused for a human; no event, interaction or watch of a missing run or of another team.
 */
export async function storedShapeProblems(db: Db): Promise<string[]> {
  const problems: string[] = [];
  const isDate = (v: unknown) => v instanceof Date && !Number.isNaN(v.getTime());
  const isText = (v: unknown) => typeof v === 'string' && v.length > 0;
  const get = (doc: unknown, key: string): unknown => (doc as Record<string, unknown> | undefined)?.[key];

  const eventsOf = new Map<string, { types: string[]; teams: Set<unknown> }>();
  for await (const e of db
    .collection('events')
    .find({}, { projection: { _id: 1, runId: 1, teamId: 1, type: 1, at: 1 } })) {
    if (!isText(e._id) || !isText(e.type) || !isDate(e.at) || !isText(e.teamId) || !isText(e.runId))
      problems.push(`event ${String(e._id)}: bad shape`);
    const entry = eventsOf.get(String(e.runId)) ?? { types: [], teams: new Set() };
    entry.types.push(String(e.type));
    entry.teams.add(e.teamId);
    eventsOf.set(String(e.runId), entry);
  }
  const interactions = new Map<string, Record<string, unknown>>();
  for await (const i of db.collection('interactions').find({}, { projection: { prompt: 0 } })) {
    interactions.set(String(i._id), i);
    if (
      !['pending', 'answered', 'abandoned'].includes(i.status as string) ||
      !isDate(i.createdAt) ||
      !isText(i.runId) ||
      (i.status === 'answered' && (typeof i.answer !== 'string' || !isDate(i.answeredAt)))
    )
      problems.push(`interaction ${String(i._id)}: bad shape`);
  }

  const runs = new Map<string, string>();
  for await (const r of db
    .collection('runs')
    .find({}, { projection: { finalAnswer: 0, 'error.message': 0 } })) {
    const id = String(r._id);
    runs.set(id, String(r.teamId));
    const pause = r.pause as Record<string, unknown> | undefined;
    const events = eventsOf.get(id) ?? { types: [], teams: new Set() };
    const count = (type: string) => events.types.filter((t) => t === type).length;
    const interaction = isText(pause?.interactionId)
      ? interactions.get(String(pause?.interactionId))
      : undefined;
    const bad = [
      !isText(r._id) && '_id',
      !isText(r.teamId) && 'teamId',
      !isText(r.ownerId) && 'ownerId',
      typeof r.title !== 'string' && 'title',
      !(RUN_STATUSES as readonly unknown[]).includes(r.status) && 'status',
      !(Number.isInteger(r.pauseCount) && (r.pauseCount as number) >= 0) && 'pauseCount',
      !(Array.isArray(r.watchedIssueIds) && r.watchedIssueIds.every(isText)) && 'watchedIssueIds',
      !isDate(r.createdAt) && 'createdAt',
      !isDate(r.updatedAt) && 'updatedAt',
      r.callback !== undefined &&
        !(isText(get(r.callback, 'url')) && isText(get(r.callback, 'secret'))) &&
        'callback',
      r.status === 'paused' && !(pause && typeof pause.reason === 'string' && isDate(pause.at)) && 'pause',
      ['finished', 'failed', 'cancelled'].includes(r.status as string) && !isDate(r.endedAt) && 'endedAt',
      r.status === 'failed' && !isText(get(r.error, 'code')) && 'error',
      count('run_started') !== 1 && `${count('run_started')} run_started events`,
      count('run_paused') !== r.pauseCount &&
        `${count('run_paused')} run_paused events for ${String(r.pauseCount)} pauses`,
      ['finished', 'failed', 'cancelled'].includes(r.status as string) &&
        count(`run_${String(r.status)}`) !== 1 &&
        `${count(`run_${String(r.status)}`)} run_${String(r.status)} events`,
      r.status === 'paused' &&
        pause?.reason === 'human_input' &&
        !(interaction && interaction.status === 'pending' && interaction.runId === id) &&
        'no pending interaction for its human-input pause',
      [...events.teams].some((team) => team !== r.teamId) && "events of another team's id",
    ].filter(Boolean);
    if (bad.length)
      problems.push(
        `run ${id}: ${bad.map((b) => (String(b).includes(' ') ? b : `bad ${String(b)}`)).join(', ')}`,
      );
  }
  for (const runId of eventsOf.keys()) if (!runs.has(runId)) problems.push(`events of missing run ${runId}`);
  for (const i of interactions.values()) {
    if (runs.get(String(i.runId)) !== i.teamId)
      problems.push(`interaction ${String(i._id)}: of missing run ${String(i.runId)} or of another team`);
  }
  for await (const s of db.collection('push_subscriptions').find({})) {
    if (
      !isText(s.endpoint) ||
      !isText(get(s.keys, 'p256dh')) ||
      !isText(get(s.keys, 'auth')) ||
      !isText(s.userId) ||
      !isText(s.teamId) ||
      !isDate(s.createdAt) ||
      !isDate(s.updatedAt)
    )
      problems.push(`push subscription ${String(s._id)}: bad shape`);
  }
  for await (const p of db.collection('notification_prefs').find({})) {
    const off: unknown = p.off ?? [];
    if (
      !isText(p.userId) ||
      !isText(p.teamId) ||
      String(p._id) !== prefKey(p.userId, p.teamId) ||
      (p.scope !== 'team' && p.scope !== 'own') ||
      !Array.isArray(off) ||
      off.some((kind) => !PREF_KINDS.includes(kind)) ||
      (p.scope === 'own' && !off.length) ||
      !isDate(p.updatedAt)
    )
      problems.push(`notification pref ${String(p._id)}: bad shape`);
  }
  for await (const w of db.collection('assistant_run_watches').find({})) {
    if (
      String(w._id) !== `${String(w.assistantId)}|${String(w.runId)}` ||
      typeof w.active !== 'boolean' ||
      !isText(w.teamId) ||
      !isDate(w.updatedAt)
    )
      problems.push(`watch ${String(w._id)}: bad shape`);
    if (runs.get(String(w.runId)) !== w.teamId)
      problems.push(`watch ${String(w._id)}: of missing run ${String(w.runId)} or of another team`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------------------------
// The driver

function defaultSubscription(n: number): SubscriptionJSON {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    endpoint: `https://push.fuzz.invalid/push/fuzz-${n}-${randomBytes(6).toString('hex')}`,
    expirationTime: null,
    keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') },
  };
}

export async function fuzzRoutes(options: FuzzOptions): Promise<FuzzReport> {
  const started = Date.now();
  const seed = options.seed ?? Math.floor(Math.random() * 0x7fffffff);
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const secret = options.jwtSecret ?? process.env.AUTH_JWT_SECRET ?? TEST_JWT_SECRET;
  const tokens = {
    owner: mintToken(secret, 'fuzz-user', 'fuzz-team', '1d'),
    intruder: mintToken(secret, INTRUDER, 'other-team', '1d'),
    secret,
  };
  let subscriptions = 0;
  const fx = new Fixtures(
    options.baseUrl,
    tokens,
    () => (options.subscription ?? defaultSubscription)(subscriptions++),
    timeoutMs,
    options.db,
    options.callbackUrl,
  );
  const commandsAvailable =
    (options.countMode ?? 'commands') === 'commands' && !!(await commandSnapshot(options.db));
  const mode = commandsAvailable ? 'commands' : 'documents';
  const snapshot = async (): Promise<Snapshot> =>
    mode === 'commands' ? ((await commandSnapshot(options.db)) ?? {}) : documentSnapshot(options.db);
  const selected = selectRoutes(options.only);
  const routes = ROUTES.filter((r) => selected.includes(r.name));
  const report: FuzzReport = {
    seed,
    numRuns: options.numRuns,
    countMode: mode,
    totalCases: 0,
    ms: 0,
    routes: [],
    failures: [],
  };
  log(
    `fuzz: seed ${seed}, ${options.numRuns} cases per route, ${routes.length} routes, writes checked by ${mode}`,
  );

  const reported = new Set<string>();
  let lastRequest: string | undefined;
  let last: { snapshot: Snapshot; setupRequests: number; route: RouteSpec } | undefined;
  for (const route of routes) {
    const routeStarted = Date.now();
    // One seed per route (the run's seed plus the route's index), so a route replays on its own.
    const routeSeed = (seed + ROUTES.indexOf(route)) | 0;
    fx.actAs(`fuzz-user-${ROUTES.indexOf(route)}`, route.runs);
    await route.before?.(fx);
    const statuses: Record<string, number> = {};
    let cases = 0;
    let slowest: RouteReport['slowest'];
    const split = { setupMs: 0, answerMs: 0, checkMs: 0 };
    const property = fc.asyncProperty(caseArbitrary(route), async (c) => {
      const t0 = Date.now();
      const req = await resolve(route, c, fx);
      const t1 = Date.now();
      // Nothing else writes between two cases (the fuzzer is the API's only client), so the counters read after
      // the previous case are this one's "before", unless set-up requests ran in between.
      const before =
        last && last.setupRequests === fx.setupRequests && last.route === route
          ? last.snapshot
          : await snapshot();
      const sentAt = Date.now();
      const answer = await send(options.baseUrl, timeoutMs, req);
      const took = Date.now() - sentAt;
      const afterSnapshot = await snapshot();
      last = { snapshot: afterSnapshot, setupRequests: fx.setupRequests, route };
      const written = diff(before, afterSnapshot);
      // A refusal that took its rate-limit slots and gave them back: exactly their inserts, and their rows are gone.
      const slots = typeof route.inserts === 'number' ? route.inserts : 1;
      if (
        route.givesBackSlot &&
        !('error' in answer) &&
        answer.status === 409 &&
        mode === 'commands' &&
        written.insert === slots &&
        !written.update &&
        !written.findAndModify &&
        (written.delete ?? 0) >= slots &&
        !(await options.db.collection('rate_limits').countDocuments({ at: { $gte: new Date(sentAt) } }))
      )
        delete written.insert;
      split.setupMs += t1 - t0;
      split.answerMs += took;
      split.checkMs += Date.now() - t1 - took;
      cases++;
      if (took > (slowest?.ms ?? 0)) slowest = { ms: took, request: describe(req, answer) };
      const key = 'error' in answer ? 'no answer' : String(answer.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
      const problems = check(route, req, answer, written, mode);
      const previous = lastRequest;
      lastRequest = describe(req, answer);
      if (problems.length) {
        // A connection-level failure may be the previous request's doing (a socket it left unusable).
        const context = 'error' in answer ? `\nthe request before it:\n${previous ?? 'none'}` : '';
        throw new Error(`${problems.join('; ')}\n${describe(req, answer)}${context}`);
      }
      if (!('error' in answer) && answer.status < 300 && req.method !== 'GET' && req.method !== 'HEAD') {
        if (req.method === route.method && req.wellFormed) route.consumes?.(fx, req, c);
        // The run may have moved (or, for an unrelated method, may not): either way, start the next case afresh.
        if (
          req.method === route.method &&
          route.movesTo &&
          req.wellFormed &&
          req.callerTeam === 'fuzz-team'
        ) {
          const interactionId = route.movesTo === 'paused_input' ? interactionOf(answer.text) : undefined;
          for (const id of req.runIds) fx.moved(id, route.movesTo, interactionId);
        } else if (route.movesTo || req.method !== route.method) for (const id of req.runIds) fx.forget(id);
      }
    });
    const details = await fc.check(property, { numRuns: options.numRuns, seed: routeSeed });
    const routeReport: RouteReport = {
      route: route.name,
      cases,
      statuses,
      ms: Date.now() - routeStarted,
      split,
      slowest,
    };
    if (details.failed) {
      const error = details.errorInstance;
      routeReport.failure = {
        route: route.name,
        reason: error instanceof Error ? error.message : String(error),
        counterexample: short(fc.stringify(details.counterexample?.[0]), 2_000),
        seed: routeSeed,
        path: details.counterexamplePath ?? undefined,
        runsBeforeFailure: details.numRuns,
        shrinks: details.numShrinks,
      };
    }
    // The server is still up, and everything it stored still has its domain shape.
    const health = await send(options.baseUrl, timeoutMs, { method: 'GET', path: '/healthz', headers: {} });
    const after: string[] = [];
    if ('error' in health || health.status !== 200) {
      after.push(
        `/healthz after the route's cases: ${'error' in health ? health.error : `${health.status} ${health.text}`}`,
      );
    }
    // Only what this route's cases left behind: a problem already reported stays reported once.
    const shapes = (await storedShapeProblems(options.db)).filter((p) => !reported.has(p));
    for (const p of shapes) reported.add(p);
    after.push(...shapes.slice(0, 10), ...(shapes.length > 10 ? [`... and ${shapes.length - 10} more`] : []));
    if (after.length) {
      const reason = after.join('\n');
      if (routeReport.failure) routeReport.failure.reason += `\nafter the route's cases:\n${reason}`;
      else {
        routeReport.failure = {
          route: route.name,
          reason,
          counterexample: '(found after the route ran: no single case)',
          seed: routeSeed,
          runsBeforeFailure: details.numRuns,
          shrinks: 0,
        };
      }
    }
    report.routes.push(routeReport);
    report.totalCases += cases;
    if (routeReport.failure) report.failures.push(routeReport.failure);
    const summary = Object.entries(statuses)
      .sort()
      .map(([s, n]) => `${s}×${n}`)
      .join(' ');
    log(
      `fuzz ${route.name}: ${cases} cases in ${routeReport.ms} ms [${summary}] (set-up ${split.setupMs} ms, answers ${split.answerMs} ms, slowest ${slowest?.ms ?? 0} ms)${routeReport.failure ? ' FAILED' : ''}`,
    );
  }
  report.ms = Date.now() - started;
  return report;
}
