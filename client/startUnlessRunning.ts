// The one way a process starts a workflow that must never run twice at once: by its registered name, the
// arguments checked against the contract's signature, and Temporal's answer when the id is taken read as "not
// started" rather than an error (unlessAlreadyStarted, which a signal-with-start uses too).
import { Client, WorkflowExecutionAlreadyStartedError, type WorkflowStartOptions } from '@temporalio/client';
import type { Workflows } from '../contract/workflows';

/**
 * A start's or a signal's whole round trip, the client's retries included: a request that waits on Temporal
 * answers within it (a partition would otherwise hold it for as long as the connection lives). Long enough that
 * an overloaded server's slow answer is still taken (a call given up leaves its work to the sweep's next pass).
 */
export const TEMPORAL_CALL_DEADLINE_MS = 30_000;

/** The call, given up past `deadlineMs` (a gRPC DEADLINE_EXCEEDED). */
export function withinCallDeadline<T>(
  client: Client,
  call: () => Promise<T>,
  deadlineMs = TEMPORAL_CALL_DEADLINE_MS,
): Promise<T> {
  return client.withDeadline(Date.now() + deadlineMs, call);
}

/**
 * Starts the workflow; false when Temporal refuses its id: an execution of it is running now (whichever process
 * started it), or, under REJECT_DUPLICATE, one ran before. ALLOW_DUPLICATE (the default): a closed execution may
 * be followed by another (its own claims dedupe what it does), a running one is never doubled.
 */
export async function startUnlessRunning<Name extends keyof Workflows>(
  client: Client,
  workflowType: Name,
  options: Omit<WorkflowStartOptions<Workflows[Name]>, 'workflowIdReusePolicy' | 'workflowIdConflictPolicy'>,
  reuse: 'ALLOW_DUPLICATE' | 'REJECT_DUPLICATE' = 'ALLOW_DUPLICATE',
  deadlineMs = TEMPORAL_CALL_DEADLINE_MS,
): Promise<boolean> {
  return unlessAlreadyStarted(() =>
    withinCallDeadline(
      client,
      () =>
        client.workflow.start<Workflows[Name]>(workflowType, {
          ...options,
          workflowIdReusePolicy: reuse,
          workflowIdConflictPolicy: 'FAIL',
        } as WorkflowStartOptions<Workflows[Name]>),
      deadlineMs,
    ),
  );
}

/**
 * Runs a start (or a signal-with-start); false when Temporal refuses the workflow id, which the caller reads as
 * "someone else has it", never as a failure. Any other error is thrown.
 */
export async function unlessAlreadyStarted(start: () => Promise<unknown>): Promise<boolean> {
  try {
    await start();
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}
