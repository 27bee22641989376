// rateLimit(bounds): a route's admission as middleware, beside validate(). Each bound is hit in turn; the first that
// refuses answers 429 with Retry-After naming it, and the slots the bounds before it took go back. The limits live
// in a store every API process shares, which platform does not import: the router passes in how a bound is hit.
import type { Middleware } from 'koa';
import { tooManyRequests } from './httpErrors';

export interface RateRule {
  limit: number;
  windowSeconds: number;
}

export interface Bound {
  key: string;
  rule: RateRule;
  /** What is counted, for the 429's message ("too many <what>; try again later"). */
  what: string;
  /** A retried request's id: a repeat inside the window is admitted again without counting. */
  hitId?: string;
}

/** One hit on a bound: a slot taken (and how to give it back), or when to come back. */
export type Hit = (
  key: string,
  rule: RateRule,
  now: Date,
  hitId?: string,
) => Promise<{ admitted: true; release(): Promise<void> } | { admitted: false; retryAfterSeconds: number }>;

/** What the handler after rateLimit() holds: the slots its bounds took. */
export interface Admission {
  /** Gives every slot back: the step the bounds guard did not happen. */
  release(): Promise<void>;
  /** Runs the guarded step; if it throws, nothing happened, so the slots go back before the error goes on. */
  releaseIfFails<T>(step: () => Promise<T>): Promise<T>;
}

export interface Admitted {
  admission: Admission;
}

/** A route's bounds, from its state (the caller, the run) or, for a route without a caller, the request's address. */
export type RateLimiter = <S>(
  bounds: (state: S, request: { ip: string }) => Bound[],
) => Middleware<S & Admitted>;

/** The rateLimit() of a router whose bounds are hit on `limits`, all at one `now()` per request. */
export function rateLimiter(limits: { hit: Hit }, now: () => Date): RateLimiter {
  return (bounds) => async (ctx, next) => {
    const at = now();
    const taken: (() => Promise<void>)[] = [];
    const release = async () => {
      for (const giveBack of taken) await giveBack();
    };
    for (const { key, rule, what, hitId } of bounds(ctx.state, ctx)) {
      const answer = await limits.hit(key, rule, at, hitId);
      if (!answer.admitted) {
        await release();
        throw tooManyRequests(what, answer.retryAfterSeconds);
      }
      taken.push(answer.release);
    }
    ctx.state.admission = {
      release,
      async releaseIfFails(step) {
        try {
          return await step();
        } catch (err) {
          await release();
          throw err;
        }
      },
    };
    await next();
  };
}
