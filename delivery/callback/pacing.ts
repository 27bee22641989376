// Pacing per receiver origin (scheme://host:port), one instance per worker process: at most `maxInFlight`
// requests open to one origin, whoever sends them (the rest wait their turn, first come first served), and a
// circuit breaker per (origin, tenant) that, after `breakerFailures` failures in a row of that tenant's requests,
// holds the tenant's requests to the origin for a cool-down (doubling per failed probe up to `maxCooldownMs`,
// jittered), lets one probe through once it passes, and closes on a success. The breaker is the tenant's because
// tenants share webhook hosts, each on a path of its own: one pointing at a failing path must not make the host
// look down for the others. It knows nothing of what is sent or of Temporal: the caller says whose request it is
// and how it went.

import type { PacingHold } from '../../domain/callback';

/** Why a request was not let through: the origin's breaker is open, or no slot came free in time. */
export type { PacingHold };

/** How the request went, for the breaker: the origin failed it, answered it, or was never judged. */
export type PacingVerdict = 'success' | 'failure' | 'neutral';

export type PacingEntry =
  | {
      held: false;
      /** The request holds a slot until this is called (once; later calls do nothing). */
      done(verdict: PacingVerdict): void;
    }
  | { held: 'breaker_open'; retryAfterMs: number }
  | { held: 'paced' };

/**
 * A tenant's breaker at an origin that opened (again) or closed, with how many tenants' breakers are open there
 * now; or an origin no longer tracked (its series can go).
 */
export type BreakerChange =
  | {
      state: 'open';
      origin: string;
      tenant: string;
      failures: number;
      cooldownMs: number;
      openAtOrigin: number;
    }
  | { state: 'closed'; origin: string; tenant: string; openForMs: number; openAtOrigin: number }
  | { state: 'forgotten'; origin: string };

export interface OriginPacingOptions {
  maxInFlight: number;
  breakerFailures: number;
  /** The first cool-down; each failed probe doubles it, up to maxCooldownMs. */
  cooldownMs: number;
  maxCooldownMs: number;
  /** Origins tracked at once (least recently used idle ones are forgotten first). Default 512. */
  maxOrigins?: number;
  /** Tenants' breakers kept per origin (least recently used closed ones are forgotten first). Default 512. */
  maxTenantsPerOrigin?: number;
  onBreakerChange?: (change: BreakerChange) => void;
  now?: () => number;
  random?: () => number;
}

export interface EnterOptions {
  /** How long the request may wait for a slot; past it, it is held as `paced`. */
  maxWaitMs: number;
  /** Aborting gives up the wait (held as `paced`). */
  signal?: AbortSignal;
  /** Past an open breaker (a human's redelivery): still one of the origin's slots, and its verdict counts. */
  bypassBreaker?: boolean;
  /** Whose request (a team): its breaker is this tenant's at the origin. Absent: the origin's unnamed tenant. */
  tenant?: string;
}

interface Waiter {
  grant(): void;
}

/** One tenant's breaker at one origin. A closed one with no failure and no probe is dropped (the same as none). */
interface BreakerState {
  failures: number;
  /** Open until this (epoch ms); then half-open. Undefined: closed. */
  openUntil?: number;
  openedAt?: number;
  /** The cool-down the breaker last opened with (before jitter). */
  cooldownMs: number;
  probing: boolean;
}

interface OriginState {
  inFlight: number;
  waiters: Waiter[];
  /** By tenant; insertion order is recency (moved to the end on each use). */
  breakers: Map<string, BreakerState>;
}

export type OriginPacing = ReturnType<typeof createOriginPacing>;

/** scheme://host:port of a URL (the port always written), or undefined when it does not parse. */
export function originOf(url: string): string | undefined {
  try {
    const { protocol, hostname, port } = new URL(url);
    return `${protocol}//${hostname}:${port || (protocol === 'https:' ? '443' : '80')}`;
  } catch {
    return undefined;
  }
}

/** Whether any tenant's breaker at the origin passes the test. */
const anyBreaker = (s: OriginState, test: (b: BreakerState) => boolean) =>
  [...s.breakers.values()].some(test);
/** No request in flight or waiting, and no probe out: the origin can be forgotten. */
const idle = (s: OriginState) =>
  s.inFlight === 0 && s.waiters.length === 0 && !anyBreaker(s, (b) => b.probing);
/** How many tenants' breakers are open at the origin. */
const openAt = (s: OriginState) => [...s.breakers.values()].filter((b) => b.openUntil !== undefined).length;

/** The tenant's breaker at the origin, made most recent; a new one may push out the least recent closed one. */
function breakerOf(s: OriginState, tenant: string, cooldownMs: number, maxTenants: number): BreakerState {
  let b = s.breakers.get(tenant);
  if (b) {
    s.breakers.delete(tenant);
  } else {
    b = { failures: 0, cooldownMs, probing: false };
    if (s.breakers.size >= maxTenants) {
      for (const [other, o] of s.breakers)
        if (o.openUntil === undefined && !o.probing) {
          s.breakers.delete(other);
          break;
        }
    }
  }
  s.breakers.set(tenant, b);
  return b;
}

/**
 * Whether the breaker lets a request through now: closed, or half-open with no probe out (this one becomes
 * the probe). Held ones are told when to come back: the cool-down's end spread over half its length again,
 * so they do not all return at the same moment.
 */
function admit(
  b: BreakerState,
  now: () => number,
  random: () => number,
): { probe: boolean } | { retryAfterMs: number } {
  if (b.openUntil === undefined) return { probe: false };
  const left = b.openUntil - now();
  if (left <= 0 && !b.probing) return { probe: true };
  const wait = left > 0 ? left : b.cooldownMs;
  return { retryAfterMs: Math.round(wait * (1 + 0.5 * random())) };
}

/** Waits for a slot of the origin, FIFO, up to maxWaitMs or the signal; false when none came in time. */
function takeSlot(
  s: OriginState,
  maxInFlight: number,
  { maxWaitMs, signal }: EnterOptions,
): Promise<boolean> {
  if (s.inFlight < maxInFlight && s.waiters.length === 0) {
    s.inFlight++;
    return Promise.resolve(true);
  }
  if (maxWaitMs <= 0 || signal?.aborted) return Promise.resolve(false);
  return new Promise<boolean>((resolve) => {
    const giveUp = () => {
      const at = s.waiters.indexOf(waiter);
      if (at >= 0) s.waiters.splice(at, 1);
      settle(false);
    };
    const timer = Number.isFinite(maxWaitMs)
      ? setTimeout(giveUp, Math.min(maxWaitMs, 2 ** 31 - 1))
      : undefined;
    timer?.unref();
    const settle = (granted: boolean) => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', giveUp);
      resolve(granted);
    };
    // Granted: the releasing request's slot passes straight to this one (inFlight unchanged).
    const waiter: Waiter = { grant: () => settle(true) };
    s.waiters.push(waiter);
    signal?.addEventListener('abort', giveUp, { once: true });
  });
}

export interface PacingState {
  breaker: 'closed' | 'open' | 'half-open';
  inFlight: number;
  waiting: number;
  failures: number;
}

/** What the tenant's breaker at an origin says at `at`, and the origin's slots: an untracked one is closed. */
function stateOf(s: OriginState | undefined, tenant: string, at: number): PacingState {
  const b = s?.breakers.get(tenant);
  const breaker = b?.openUntil === undefined ? 'closed' : b.openUntil > at ? 'open' : 'half-open';
  return { breaker, inFlight: s?.inFlight ?? 0, waiting: s?.waiters.length ?? 0, failures: b?.failures ?? 0 };
}

/** The origins tracked, least recently used first, at most `maxOrigins` while any of them is idle. */
function createOriginTable(maxOrigins: number, onBreakerChange: OriginPacingOptions['onBreakerChange']) {
  // Insertion order is recency: an origin is moved to the end on each use.
  const origins = new Map<string, OriginState>();

  /** Makes room for one more: the least recently used idle origin with no breaker open, else the least recently used idle one. */
  function forgetBeyondCap(): void {
    if (origins.size < maxOrigins) return;
    let victim: string | undefined;
    for (const [origin, s] of origins) {
      if (!idle(s)) continue;
      if (openAt(s) === 0) {
        victim = origin;
        break;
      }
      victim ??= origin;
    }
    if (victim === undefined) return; // every one busy: over the cap until one is idle
    origins.delete(victim);
    onBreakerChange?.({ state: 'forgotten', origin: victim });
  }

  return {
    /** The origin's state, made most recent; a new one may push out an idle one. */
    track(origin: string): OriginState {
      let state = origins.get(origin);
      if (state) {
        origins.delete(origin);
      } else {
        state = { inFlight: 0, waiters: [], breakers: new Map() };
        forgetBeyondCap();
      }
      origins.set(origin, state);
      return state;
    },
    get: (origin: string): OriginState | undefined => origins.get(origin),
    get size(): number {
      return origins.size;
    },
  };
}

/** What the breaker moves read: the pacing's options with their defaults filled in. */
interface BreakerContext {
  options: OriginPacingOptions;
  now: () => number;
  random: () => number;
  maxTenants: number;
}

/** Whose breaker a move is about: a tenant's at an origin, with the origin's state. */
interface TenantAtOrigin {
  origin: string;
  s: OriginState;
  tenant: string;
}

/** Opens (or reopens) the breaker for `cooldownMs`, capped and jittered ±20 % so workers do not probe together. */
function openBreaker(ctx: BreakerContext, at: TenantAtOrigin, b: BreakerState, cooldownMs: number): void {
  const t = ctx.now();
  b.cooldownMs = Math.min(cooldownMs, ctx.options.maxCooldownMs);
  b.openUntil = t + Math.round(b.cooldownMs * (0.8 + 0.4 * ctx.random()));
  b.openedAt ??= t;
  b.probing = false;
  ctx.options.onBreakerChange?.({
    state: 'open',
    origin: at.origin,
    tenant: at.tenant,
    failures: b.failures,
    cooldownMs: b.openUntil - t,
    openAtOrigin: openAt(at.s),
  });
}

function closeBreaker(ctx: BreakerContext, { origin, s, tenant }: TenantAtOrigin, b: BreakerState): void {
  const wasOpen = b.openUntil !== undefined;
  const openForMs = ctx.now() - (b.openedAt ?? ctx.now());
  // Closed with no failure: the same as no breaker at all.
  if (s.breakers.get(tenant) === b) s.breakers.delete(tenant);
  if (wasOpen)
    ctx.options.onBreakerChange?.({ state: 'closed', origin, tenant, openForMs, openAtOrigin: openAt(s) });
}

/** Gives the slot back and tells the tenant's breaker (`b`: the one it has, if any) how the request went. */
function release(
  ctx: BreakerContext,
  at: TenantAtOrigin,
  b: BreakerState | undefined,
  probe: boolean,
  verdict: PacingVerdict,
): void {
  const { s } = at;
  const next = s.waiters.shift();
  if (next) next.grant();
  else s.inFlight--;
  if (b && probe) b.probing = false;
  if (verdict === 'neutral') return;
  // Another request (a redelivery past the breaker) may have closed it while this one was out.
  const live = b && s.breakers.get(at.tenant) === b ? b : undefined;
  if (verdict === 'success') {
    if (live) closeBreaker(ctx, at, live);
    return;
  }
  // The first failure makes the tenant's breaker.
  const failing = live ?? breakerOf(s, at.tenant, ctx.options.cooldownMs, ctx.maxTenants);
  failing.failures++;
  // A failed probe opens it again, twice as long; failures of requests let through before it opened change nothing.
  if (probe && live) openBreaker(ctx, at, failing, failing.cooldownMs * 2);
  else if (failing.openUntil === undefined && failing.failures >= ctx.options.breakerFailures)
    openBreaker(ctx, at, failing, ctx.options.cooldownMs);
}

export function createOriginPacing(options: OriginPacingOptions) {
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const ctx: BreakerContext = { options, now, random, maxTenants: options.maxTenantsPerOrigin ?? 512 };
  const table = createOriginTable(options.maxOrigins ?? 512, options.onBreakerChange);

  return {
    /**
     * A request of `opts.tenant` to `origin` asks to go: let through holding a slot of the origin (call `done`
     * with how it went), or held by the tenant's open breaker there (come back after retryAfterMs) or by a wait
     * past maxWaitMs. The breaker is asked before and after the wait, so requests queued when it opens do not go
     * on to a receiver it has given up on.
     */
    async enter(origin: string, opts: EnterOptions): Promise<PacingEntry> {
      const tenant = opts.tenant ?? '';
      const s = table.track(origin);
      const breaker = () => s.breakers.get(tenant);
      if (!opts.bypassBreaker) {
        const b = breaker();
        const before = b ? admit(b, now, random) : { probe: false };
        if ('retryAfterMs' in before) return { held: 'breaker_open', retryAfterMs: before.retryAfterMs };
      }
      if (!(await takeSlot(s, options.maxInFlight, opts))) return { held: 'paced' };
      let probe = false;
      if (!opts.bypassBreaker) {
        const b = breaker();
        const after = b ? admit(b, now, random) : { probe: false };
        if ('retryAfterMs' in after) {
          release(ctx, { origin, s, tenant }, b, false, 'neutral');
          return { held: 'breaker_open', retryAfterMs: after.retryAfterMs };
        }
        probe = after.probe;
        if (probe) b!.probing = true;
      }
      let finished = false;
      return {
        held: false,
        done(verdict) {
          if (finished) return;
          finished = true;
          release(ctx, { origin, s, tenant }, s.breakers.get(tenant), probe, verdict);
        },
      };
    },

    /**
     * What the breaker of `tenant` at `origin` says now, and the origin's slots (tests and operators): untracked
     * ones are closed.
     */
    state: (origin: string, tenant = ''): PacingState => stateOf(table.get(origin), tenant, now()),

    /** How many origins are tracked now (bounded by maxOrigins while any is idle). */
    get trackedOrigins(): number {
      return table.size;
    },
  };
}
