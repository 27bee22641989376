// A workflow interceptor for tests only: Temporal's own retry backoff of scheduled activities, a tenth as long.
// The fan-out retries 2/4/8/16 s apart and a callback attempt lost with its worker 5/10 s: fixed in the workflow
// code, so a suite that drives every attempt to failure sat through 30 s per episode. Suites opt in through
// startTestWorker(..., { fastRetries: true }); the number of attempts, the timeouts (heartbeat, start-to-close)
// and the workflow's own timers (callback schedule, released-push retry) are left as they are, so every decision
// under test is the same one, made sooner. Workers in child processes (worker.ts) never load this.
// Runs inside the workflow sandbox: imports nothing but Temporal's workflow-safe modules.
import { msToNumber } from '@temporalio/common/lib/time';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** How much shorter the backoff gets (a 2 s first wait becomes 200 ms, never under 100 ms). */
export const FAST_RETRY_FACTOR = 10;

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      scheduleActivity(input, next) {
        const retry = input.options.retry;
        if (!retry?.initialInterval) return next(input);
        const initialInterval = Math.max(100, msToNumber(retry.initialInterval) / FAST_RETRY_FACTOR);
        const maximumInterval =
          retry.maximumInterval === undefined
            ? undefined
            : Math.max(initialInterval, msToNumber(retry.maximumInterval) / FAST_RETRY_FACTOR);
        return next({
          ...input,
          options: { ...input.options, retry: { ...retry, initialInterval, maximumInterval } },
        });
      },
    },
  ],
});
