// The route fuzzer's driver: each route's cases as one fast-check property, with its own seed and fuzz-team member,
// then /healthz and the stored shapes after the route; a report of every route and every failure.
import { createECDH, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import type { Db } from 'mongodb';
import { mintToken } from '../../api/auth';
import type { SubscriptionJSON } from '../support';
import { TEST_JWT_SECRET } from '../support/stack';
import {
  check,
  commandSnapshot,
  describe,
  diff,
  documentSnapshot,
  interactionOf,
  send,
  short,
  storedShapeProblems,
  type Snapshot,
} from './check';
import { Fixtures, INTRUDER } from './fixtures';
import { caseArbitrary } from './generators';
import { resolve } from './request';
import type { RouteSpec } from './spec';

export interface FuzzOptions {
  baseUrl: string;
  /** Cases per route (fast-check numRuns). */
  numRuns: number;
  /** The API's database, read to check that a refused request stored nothing. */
  db: Db;
  seed?: number;
  log?: (line: string) => void;
  /** Told after each case (shrinking included): the route and how many of its cases have run. */
  onCase?: (route: string, cases: number) => void;
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

function defaultSubscription(n: number): SubscriptionJSON {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    endpoint: `https://push.fuzz.invalid/push/fuzz-${n}-${randomBytes(6).toString('hex')}`,
    expirationTime: null,
    keys: { p256dh: ecdh.getPublicKey().toString('base64url'), auth: randomBytes(16).toString('base64url') },
  };
}

/** The names a filter selects: an exact name selects that one only, other text every name containing it. */
export function selectNames(names: string[], only: string[] | undefined): string[] {
  if (!only?.length) return names;
  return names.filter((name) => only.some((o) => name === o || (!names.includes(o) && name.includes(o))));
}

/** Fuzzes `all` (the whole list: a route's seed and user come from its index in it), or those `only` selects. */
export async function fuzzRouteList(all: RouteSpec[], options: FuzzOptions): Promise<FuzzReport> {
  const started = Date.now();
  const seed = options.seed ?? Math.floor(Math.random() * 0x7fffffff);
  const log = options.log ?? (() => undefined);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const secret = options.jwtSecret ?? process.env.AUTH_JWT_SECRET ?? TEST_JWT_SECRET;
  const tokens = {
    owner: await mintToken(secret, 'fuzz-user', 'fuzz-team', '1d'),
    intruder: await mintToken(secret, INTRUDER, 'other-team', '1d'),
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
  const selected = selectNames(
    all.map((r) => r.name),
    options.only,
  );
  const routes = all.filter((r) => selected.includes(r.name));
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
    const routeSeed = (seed + all.indexOf(route)) | 0;
    await fx.actAs(`fuzz-user-${all.indexOf(route)}`, route.runs);
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
      // A refusal that counted itself against its rate-limit bounds and gave each count back: exactly those updates.
      if (
        route.givesBackSlots &&
        !('error' in answer) &&
        answer.status === 409 &&
        mode === 'commands' &&
        written.update === 2 * route.givesBackSlots &&
        !written.insert &&
        !written.delete &&
        !written.findAndModify
      )
        delete written.update;
      split.setupMs += t1 - t0;
      split.answerMs += took;
      split.checkMs += Date.now() - t1 - took;
      cases++;
      options.onCase?.(route.name, cases);
      if (took > (slowest?.ms ?? 0)) slowest = { ms: took, request: describe(req, answer) };
      const key = 'error' in answer ? 'no answer' : String(answer.status);
      statuses[key] = (statuses[key] ?? 0) + 1;
      const problems = check(route, req, answer, written, mode);
      const previous = lastRequest;
      lastRequest = describe(req, answer);
      // The fixtures learn what a 2xx did before a failure is thrown: shrinking runs more cases on them.
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
      if (problems.length) {
        // A connection-level failure may be the previous request's doing (a socket it left unusable).
        const context = 'error' in answer ? `\nthe request before it:\n${previous ?? 'none'}` : '';
        throw new Error(`${problems.join('; ')}\n${describe(req, answer)}${context}`);
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
