// Test pings send a signed POST to a URL the caller chose: a run's callback test and a team endpoint's test count
// against one budget per user and one per team, so a new run or a new endpoint never brings a fresh one.
import type { RateLimit } from '../../store/rateLimits';

export interface TestPingLimits {
  perUser: RateLimit;
  perTeam: RateLimit;
}

/** The caller's user and team bounds on test pings (the rate limiter's bounds). */
export const testPingBounds = (limits: TestPingLimits, caller: { userId: string; teamId: string }) => [
  { key: `callback-test-user|${caller.userId}`, rule: limits.perUser, what: 'test pings from this user' },
  { key: `callback-test-team|${caller.teamId}`, rule: limits.perTeam, what: 'test pings from this team' },
];
