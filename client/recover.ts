// Starts a recover of a team's callbacks that gave up (workflows/recover.ts) for the API's recover route.
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { searchAttributes } from '../contract/searchAttributes';
import { callbackRecoverWorkflowId, workflowTypes, type RecoverInput } from '../contract/workflows';
import { teamPriority } from './priority';
import { startUnlessRunning } from './startUnlessRunning';

/** False: a recover of this team is running now (whichever process started it). */
export async function startCallbackRecover(
  client: Client,
  taskQueue: string,
  input: RecoverInput,
): Promise<boolean> {
  return startUnlessRunning(client, workflowTypes.callbackRecover, {
    workflowId: callbackRecoverWorkflowId(input.teamId),
    taskQueue,
    args: [input],
    priority: teamPriority(input.teamId),
    typedSearchAttributes: new TypedSearchAttributes([{ key: searchAttributes.teamId, value: input.teamId }]),
  });
}
