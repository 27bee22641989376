// Starting a workflow that must never run twice at once: a closed execution of the id may be followed by another
// (its own claims dedupe what it does), a running one is never doubled.
import { Client, WorkflowExecutionAlreadyStartedError, type WorkflowStartOptions } from '@temporalio/client';
import type { Workflow } from '@temporalio/common';

/** Starts the workflow; false when an execution of its id is running now (whichever process started it). */
export async function startUnlessRunning<T extends Workflow>(
  client: Client,
  workflowType: string,
  options: Omit<WorkflowStartOptions<T>, 'workflowIdReusePolicy' | 'workflowIdConflictPolicy'>,
): Promise<boolean> {
  try {
    await client.workflow.start<T>(workflowType, {
      ...options,
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      workflowIdConflictPolicy: 'FAIL',
    } as WorkflowStartOptions<T>);
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}
