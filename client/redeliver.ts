// Starts a redelivery of an episode's callback (workflows/redeliver.ts) for the API's redeliver route.
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { runAttributes } from '../contract/searchAttributes';
import { callbackRedeliverWorkflowId, workflowTypes, type RedeliverInput } from '../contract/workflows';
import { teamPriority } from './priority';
import { startUnlessRunning } from './startUnlessRunning';

/** False: a redelivery of this episode is running now (whichever process started it). */
export async function startCallbackRedelivery(
  client: Client,
  taskQueue: string,
  input: RedeliverInput,
): Promise<boolean> {
  // A closed redelivery may be followed by another; a running one is never doubled.
  return startUnlessRunning(client, workflowTypes.callbackRedeliver, {
    workflowId: callbackRedeliverWorkflowId(input.episodeId),
    taskQueue,
    args: [input],
    priority: teamPriority(input.teamId),
    typedSearchAttributes: new TypedSearchAttributes(runAttributes(input.runId, input.teamId)),
  });
}
