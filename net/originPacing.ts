// Pacing per receiver origin (scheme://host:port), one instance per worker process: at most `maxInFlight`
// requests open to one origin (the rest wait their turn, first come first served), and a circuit breaker that,
// after `breakerFailures` failures in a row, holds the origin's requests for a cool-down (doubling per failed
// probe up to `maxCooldownMs`, jittered), lets one probe through once it passes, and closes on a success. It knows
// nothing of what is sent or of Temporal: the caller says how each request went.

import type { PacingHold } from '../domain/callback';

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

/** A breaker that opened (again), closed, or an origin no longer tracked (its series can go). */
export type BreakerChange =
  | { state: 'open'; origin: string; failures: number; cooldownMs: number }
  | { state: 'closed'; origin: string; openForMs: number }
  | { state: 'forgotten'; origin: string };

export interface OriginPacingOptions {
  maxInFlight: number;
  breakerFailures: number;
  /** The first cool-down; each failed probe doubles it, up to maxCooldownMs. */
  cooldownMs: number;
  maxCooldownMs: number;
  /** Origins tracked at once (least recently used idle ones are forgotten first). Default 512. */
  maxOrigins?: number;
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
}

interface Waiter {
  grant(): void;
}

interface OriginState {
  inFlight: number;
  waiters: Waiter[];
  failures: number;
  /** Open until this (epoch ms); then half-open. Undefined: closed. */
  openUntil?: number;
  openedAt?: number;
  /** The cool-down the breaker last opened with (before jitter). */
  cooldownMs: number;
  probing: boolean;
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

export function createOriginPacing(options: OriginPacingOptions) {
  const now = options.now ?? Date.now;
  const random = options.random ?? Math.random;
  const maxOrigins = options.maxOrigins ?? 512;
  // Insertion order is recency: an origin is moved to the end on each use.
  const origins = new Map<string, OriginState>();

  const idle = (s: OriginState) => s.inFlight === 0 && s.waiters.length === 0 && !s.probing;

  function track(origin: string): OriginState {
    let state = origins.get(origin);
    if (state) {
      origins.delete(origin);
    } else {
      state = { inFlight: 0, waiters: [], failures: 0, cooldownMs: options.cooldownMs, probing: false };
      forgetBeyondCap();
    }
    origins.set(origin, state);
    return state;
  }

  /** Makes room for one more: the least recently used idle closed origin, else the least recently used idle one. */
  function forgetBeyondCap(): void {
    if (origins.size < maxOrigins) return;
    let victim: string | undefined;
    for (const [origin, s] of origins) {
      if (!idle(s)) continue;
      if (s.openUntil === undefined) {
        victim = origin;
        break;
      }
      victim ??= origin;
    }
    if (victim === undefined) return; // every one busy: over the cap until one is idle
    origins.delete(victim);
    options.onBreakerChange?.({ state: 'forgotten', origin: victim });
  }

  /** ±20 %: workers (and origins) that opened together do not probe together. */
  const jittered = (ms: number) => Math.round(ms * (0.8 + 0.4 * random()));

  function open(origin: string, s: OriginState, cooldownMs: number): void {
    const t = now();
    s.cooldownMs = Math.min(cooldownMs, options.maxCooldownMs);
    s.openUntil = t + jittered(s.cooldownMs);
    s.openedAt ??= t;
    s.probing = false;
    options.onBreakerChange?.({ state: 'open', origin, failures: s.failures, cooldownMs: s.openUntil - t });
  }

  function close(origin: string, s: OriginState): void {
    const wasOpen = s.openUntil !== undefined;
    const openForMs = now() - (s.openedAt ?? now());
    s.failures = 0;
    s.openUntil = undefined;
    s.openedAt = undefined;
    s.cooldownMs = options.cooldownMs;
    s.probing = false;
    if (wasOpen) options.onBreakerChange?.({ state: 'closed', origin, openForMs });
  }

  /**
   * Whether the breaker lets a request through now: closed, or half-open with no probe out (this one becomes
   * the probe). Held ones are told when to come back: the cool-down's end spread over half its length again,
   * so they do not all return at the same moment.
   */
  function admit(s: OriginState): { probe: boolean } | { retryAfterMs: number } {
    if (s.openUntil === undefined) return { probe: false };
    const left = s.openUntil - now();
    if (left <= 0 && !s.probing) return { probe: true };
    const wait = left > 0 ? left : s.cooldownMs;
    return { retryAfterMs: Math.round(wait * (1 + 0.5 * random())) };
  }

  function release(origin: string, s: OriginState, probe: boolean, verdict: PacingVerdict): void {
    const next = s.waiters.shift();
    if (next) next.grant();
    else s.inFlight--;
    if (probe) s.probing = false;
    if (verdict === 'success') return close(origin, s);
    if (verdict !== 'failure') return;
    s.failures++;
    // A failed probe opens it again, twice as long; failures of requests let through before it opened change nothing.
    if (probe) open(origin, s, s.cooldownMs * 2);
    else if (s.openUntil === undefined && s.failures >= options.breakerFailures)
      open(origin, s, options.cooldownMs);
  }

  /** Waits for a slot of the origin, FIFO, up to maxWaitMs or the signal; false when none came in time. */
  function takeSlot(s: OriginState, { maxWaitMs, signal }: EnterOptions): Promise<boolean> {
    if (s.inFlight < options.maxInFlight && s.waiters.length === 0) {
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

  return {
    /**
     * A request to `origin` asks to go: let through holding a slot (call `done` with how it went), or held by an
     * open breaker (come back after retryAfterMs) or by a wait past maxWaitMs. The breaker is asked before and
     * after the wait, so requests queued when it opens do not go on to a receiver it has given up on.
     */
    async enter(origin: string, opts: EnterOptions): Promise<PacingEntry> {
      const s = track(origin);
      if (!opts.bypassBreaker) {
        const before = admit(s);
        if ('retryAfterMs' in before) return { held: 'breaker_open', retryAfterMs: before.retryAfterMs };
      }
      if (!(await takeSlot(s, opts))) return { held: 'paced' };
      let probe = false;
      if (!opts.bypassBreaker) {
        const after = admit(s);
        if ('retryAfterMs' in after) {
          release(origin, s, false, 'neutral');
          return { held: 'breaker_open', retryAfterMs: after.retryAfterMs };
        }
        probe = after.probe;
        if (probe) s.probing = true;
      }
      let finished = false;
      return {
        held: false,
        done(verdict) {
          if (finished) return;
          finished = true;
          release(origin, s, probe, verdict);
        },
      };
    },

    /** What the breaker of `origin` says now (tests and operators): untracked origins are closed. */
    state(origin: string): {
      breaker: 'closed' | 'open' | 'half-open';
      inFlight: number;
      waiting: number;
      failures: number;
    } {
      const s = origins.get(origin);
      if (!s) return { breaker: 'closed', inFlight: 0, waiting: 0, failures: 0 };
      const breaker = s.openUntil === undefined ? 'closed' : s.openUntil > now() ? 'open' : 'half-open';
      return { breaker, inFlight: s.inFlight, waiting: s.waiters.length, failures: s.failures };
    },

    /** How many origins are tracked now (bounded by maxOrigins while any is idle). */
    get trackedOrigins(): number {
      return origins.size;
    },
  };
}
