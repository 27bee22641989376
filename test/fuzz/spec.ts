// What the route fuzzer's parts share: the symbolic cases fast-check draws, a route's description (RouteSpec,
// written once per route in the family files beside this one), and the request and answer a case becomes.
import type { SubscriptionJSON } from '../support';

export const COLLECTIONS = [
  'runs',
  'events',
  'interactions',
  'push_subscriptions',
  'notification_prefs',
  'assistant_run_watches',
  'run_transitions',
] as const;
type Collection = (typeof COLLECTIONS)[number];
export type Counts = Record<Collection, number>;

// ---------------------------------------------------------------------------------------------------------------
// Symbolic cases

export type RunState =
  | 'running'
  | 'paused_input'
  | 'paused_park'
  | 'paused_operator'
  | 'answered'
  | 'finished'
  | 'failed'
  | 'cancelled';
export const RUN_STATES: RunState[] = [
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
export type RawSegment = { k: 'raw'; text: string; encode: boolean };
export type RunRef = { k: 'own'; state: RunState } | { k: 'otherTeam' } | { k: 'missing' } | RawSegment;
export type InteractionRef = { k: 'ofRun' } | { k: 'otherRun' } | { k: 'missing' } | RawSegment;
export type AssistantRef = { k: 'ok'; id: string } | RawSegment;
/** A push device (its id, the sha256 of its endpoint): the caller's, a teammate's, another team's user's. */
export type DeviceRef =
  { k: 'device'; whose: 'own' | 'teammate' | 'otherTeam' } | { k: 'missing' } | RawSegment;
/** An outcome episode: the `:end` episode of the run named in the same path, or of another team's run. */
export type EpisodeRef = { k: 'episode'; of: 'run' | 'otherRun' } | { k: 'missing' } | RawSegment;
export type ParamChoice = RunRef | InteractionRef | AssistantRef | DeviceRef | EpisodeRef;

export type TokenFlaw =
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
export type AuthChoice =
  | { k: 'valid'; style: number }
  | { k: 'otherTeam' }
  | { k: 'none' }
  | { k: 'flawed'; flaw: TokenFlaw }
  | { k: 'garbage'; value: string };

export type Lazy =
  | { lazy: 'huge'; bytes: number; char: string }
  | { lazy: 'deep'; depth: number; shape: 'array' | 'object' }
  | { lazy: 'many'; count: number }
  | { lazy: 'wide'; count: number }
  | { lazy: 'raw'; text: string };
export type Value = { v: unknown } | Lazy;
export type BodyOp =
  | { op: 'drop'; pick: number }
  | { op: 'set'; pick: number; value: Value }
  | { op: 'extra'; pick: number; key: string; value: Value };
export type BodyChoice =
  | { k: 'none' }
  | { k: 'valid'; variant: number; ops: BodyOp[] }
  | { k: 'truncated'; variant: number; keep: number }
  | { k: 'json'; value: unknown }
  | { k: 'text'; text: string }
  | { k: 'bytes'; bytes: Uint8Array }
  | { k: 'lazy'; value: Lazy };

export interface FuzzCase {
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

export interface RouteSpec {
  /** e.g. "POST /api/v1/runs/:id/pause". */
  name: string;
  method: string;
  template: string;
  /** A valid body for this route (variant picks among several). */
  valid?: (ctx: RouteFixtures, variant: number) => Record<string, unknown>;
  /** The state an "own" run is usually in, so valid bodies reach the write. */
  preferred?: RunState[];
  /** The state a 2xx moves the run to: the run is filed there for later cases, and replaced where it was. */
  movesTo?: RunState;
  /** Exact document count changes a 2xx (of this route's method) must show (countMode 'documents'). */
  onSuccess?: (answer: Answer) => Partial<Counts> | undefined;
  /**
   * Exact insert commands a 2xx must show (countMode 'commands'): one per collection its record spans (a rate-limit
   * bound is counted by an update of its window row, not an insert).
   */
  inserts?: number | ((answer: Answer) => number);
  /** A 2xx on a run already in this state is an idempotent repeat (the same answer again): it writes nothing. */
  repeatOf?: RunState;
  /**
   * Insert commands such a repeat runs all the same (countMode 'commands'), each refused as a duplicate: the
   * repeat finishes what a first try that died midway may have left, by inserting again under the same ids. So
   * does a 4xx on a run in that state (a different answer: 409 once the transition is finished), at most this
   * many. Counting documents holds both to none written.
   */
  repeatInserts?: number;
  /** Set-up before the route's cases, as the route's caller. */
  before?: (fx: RouteFixtures) => Promise<void>;
  /** What a path param stands for when it is not a run (by name: iid, assistantId, runId and id are). */
  paramKinds?: Record<string, 'device' | 'episode'>;
  /**
   * The caller's fixture runs of this route: with a callback to the loopback receiver; `settled`: an ended run's
   * `:end` episode also has a settled callback claim (it gave up), as a worker would have left it.
   */
  runs?: { callback: true; settled?: true };
  /** A 2xx of the route's method used up what it named: the fixtures forget it (e.g. a deleted device). */
  consumes?: (fx: RouteFixtures, req: ResolvedRequest, c: FuzzCase) => void;
  /**
   * A refusal (409) may come after the route counted itself against this many rate-limit bounds and gave each
   * count back: two updates of a window row per bound (the count and its return), nothing else. Any other write of
   * a refusal still fails the case.
   */
  givesBackSlots?: number;
}

export const none = (): Partial<Counts> => ({});

/**
 * The run_transitions rows a transition that answered `answer` (the run, or `{ run }`) added: it keeps its own
 * revision's row and removes the one two revisions back, so the count grows only with a run's first two.
 */
export function transitionRows(answer: Answer): number {
  const body = JSON.parse(answer.text) as { revision?: number; run?: { revision?: number } };
  const revisionAfter = body.run?.revision ?? body.revision ?? 0;
  return revisionAfter <= 2 ? 1 : 0;
}

/** What a route's set-up, valid bodies and bookkeeping use of the fixtures (test/fuzz/fixtures.ts). */
export interface RouteFixtures {
  /** A fresh valid PushSubscription.toJSON(). */
  subscription(n: number): SubscriptionJSON;
  /** The endpoints the current member subscribed. */
  readonly subscribed: string[];
  /** Subscribes `count` fresh endpoints for the current member. */
  subscribe(count: number): Promise<void>;
  /** A 2xx deleted this device: later cases name another. */
  unsubscribed(endpoint: string): void;
  /** A 2xx used up this run: the next case that wants a run in its state gets a fresh one. */
  forget(runId: string): void;
}

export interface Answer {
  status: number;
  contentType: string;
  text: string;
}

export interface ResolvedRequest {
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
