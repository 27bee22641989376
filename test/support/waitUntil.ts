// The one wait of the suites: poll a condition until it holds, and when it never does, fail naming what was awaited
// and the last thing seen, so a failure on a loaded machine says how far things got rather than only "timed out".
import { inspect } from 'node:util';

export interface WaitOptions {
  /** How long before giving up (default 15 s): a bound on a hang, never a claim about how fast things are. */
  timeoutMs?: number;
  /** How often to look (default 100 ms). */
  intervalMs?: number;
  /** What to show of the state when it times out (default: the check's last answer). */
  seen?: () => unknown;
  /** An error of the check counts as "not yet" (a server may be restarting) and is shown if it times out. */
  errorsMeanNotYet?: boolean;
}

/** What a truthy answer can be: `ready && value` waits for `value`. */
type Truthy<T> = Exclude<T, false | 0 | '' | null | undefined>;

/** Resolves with the check's first truthy answer; rejects after `timeoutMs` with `what` and the last answer. */
export async function waitUntil<T>(
  what: string,
  check: () => T | Promise<T>,
  options: WaitOptions = {},
): Promise<Truthy<T>> {
  const { timeoutMs = 15_000, intervalMs = 100, seen, errorsMeanNotYet = false } = options;
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const answer = await check();
      if (answer) return answer as Truthy<T>;
      last = answer;
    } catch (err) {
      if (!errorsMeanNotYet) throw err;
      last = err;
    }
    if (Date.now() > deadline) {
      const shown = seen ? seen() : last;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last seen: ${inspect(shown)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
