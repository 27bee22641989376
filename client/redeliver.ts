// Starts a redelivery of an episode's callback (workflows/redeliver.ts) for the API's redeliver route.
import { Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { callbackRedeliverWorkflowId, runAttributes, workflowTypes } from '../workflows/ids';
import type { callbackRedeliverWorkflow, RedeliverInput } from '../workflows/redeliver';

/** False: a redelivery of this episode is running now (whichever process started it). */
export async function startCallbackRedelivery(
  client: Client,
  taskQueue: string,
  input: RedeliverInput,
): Promise<boolean> {
  try {
    await client.workflow.start<typeof callbackRedeliverWorkflow>(workflowTypes.callbackRedeliver, {
      workflowId: callbackRedeliverWorkflowId(input.episodeId),
      taskQueue,
      args: [input],
      // A closed redelivery may be followed by another; a running one is never doubled.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      workflowIdConflictPolicy: 'FAIL',
      typedSearchAttributes: new TypedSearchAttributes(runAttributes(input.runId, input.teamId)),
    });
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}
