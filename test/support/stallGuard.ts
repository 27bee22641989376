// A long test bounded by its progress, not by its length: it fails when no step was done for `allowanceMs`,
// however long it runs in all (a bigger run, a loaded machine). Mocha's timeout cannot say that: setting it again
// restarts its timer, but a test that finishes after its timeout fails all the same, however steadily it stepped.
import type { Context } from 'mocha';

/**
 * Runs `body` with mocha's timeout off; fails it once `allowanceMs` pass without a call of `stepped`, naming the
 * last step it was told of.
 */
export async function failWhenStalled<T>(
  context: Context,
  allowanceMs: number,
  body: (stepped: (what?: string) => void) => Promise<T>,
): Promise<T> {
  context.timeout(0);
  let timer: NodeJS.Timeout | undefined;
  let last = 'none yet';
  let fail!: (err: Error) => void;
  const stalled = new Promise<never>((_, reject) => (fail = reject));
  const stepped = (what = last): void => {
    last = what;
    clearTimeout(timer);
    timer = setTimeout(
      () => fail(new Error(`no step done for ${allowanceMs / 1000} s; the last: ${last}`)),
      allowanceMs,
    );
  };
  stepped();
  try {
    return await Promise.race([body(stepped), stalled]);
  } finally {
    clearTimeout(timer);
  }
}
