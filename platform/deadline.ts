// The timeout race, written once: a promise's answer, or what the caller decides once the deadline passed.

/**
 * The promise's answer, or `onTimeout()`'s once `deadline` passed: `ms` from now, or the abort of a signal the
 * caller also hands to the work it bounds. A throw from `onTimeout` is the rejection (each caller keeps its own
 * error). The timer is cleared, or the abort listener removed, as soon as either side settles, and the timer
 * never holds the process open on its own. The work itself is not stopped: it settles unseen.
 */
export function withDeadline<T, U = never>(
  promise: Promise<T>,
  deadline: number | AbortSignal,
  onTimeout: () => U | PromiseLike<U>,
): Promise<T | U> {
  return new Promise<T | U>((resolve, reject) => {
    const expire = (): void => {
      try {
        resolve(onTimeout());
      } catch (err) {
        reject(err);
      }
    };
    let stopClock: () => void;
    if (typeof deadline === 'number') {
      const timer = setTimeout(expire, deadline);
      timer.unref();
      stopClock = () => clearTimeout(timer);
    } else if (deadline.aborted) {
      expire();
      stopClock = () => undefined;
    } else {
      deadline.addEventListener('abort', expire, { once: true });
      stopClock = () => deadline.removeEventListener('abort', expire);
    }
    promise.then(
      (value) => {
        stopClock();
        resolve(value);
      },
      (err: unknown) => {
        stopClock();
        reject(err);
      },
    );
  });
}
