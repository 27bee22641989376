// Starts a redelivery of an episode's callback (workflows/redeliver.ts) for the API's redeliver route.
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { callbackRedeliverWorkflowId, runAttributes, workflowTypes } from '../contract/workflows';
import type { callbackRedeliverWorkflow, RedeliverInput } from '../workflows/redeliver';
import { startUnlessRunning } from './startUnlessRunning';

/** False: a redelivery of this episode is running now (whichever process started it). */
export async function startCallbackRedelivery(
  client: Client,
  taskQueue: string,
  input: RedeliverInput,
): Promise<boolean> {
  // A closed redelivery may be followed by another; a running one is never doubled.
  return startUnlessRunning<typeof callbackRedeliverWorkflow>(client, workflowTypes.callbackRedeliver, {
    workflowId: callbackRedeliverWorkflowId(input.episodeId),
    taskQueue,
    args: [input],
    typedSearchAttributes: new TypedSearchAttributes(runAttributes(input.runId, input.teamId)),
  });
}
