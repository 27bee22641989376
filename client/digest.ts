// A person's digest workflow (workflows/digest.ts): the push activity adds a held push to it (signal-with-start:
// started if it is not running), and the prefs route tells it that quiet hours or do-not-disturb changed.
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { searchAttributes } from '../contract/searchAttributes';
import { teamPriority } from './priority';
import { withinCallDeadline } from './startUnlessRunning';
import {
  digestEntrySignal,
  digestWorkflowId,
  prefsChangedSignal,
  workflowTypes,
  type DigestEntry,
  type Workflows,
} from '../contract/workflows';

/**
 * Adds the entry to the person's digest, starting it when none runs. Safe to repeat: the digest dedupes. Within the
 * call deadline, as every call below: a partitioned Temporal fails it instead of holding the push activity or the
 * prefs request for minutes.
 */
export async function addToDigest(
  client: Client,
  taskQueue: string,
  teamId: string,
  userId: string,
  entry: DigestEntry,
): Promise<void> {
  await withinCallDeadline(client, () =>
    client.workflow.signalWithStart<Workflows['digestWorkflow'], [DigestEntry]>(workflowTypes.digest, {
      workflowId: digestWorkflowId(teamId, userId),
      taskQueue,
      args: [{ teamId, userId }],
      signal: digestEntrySignal,
      signalArgs: [entry],
      priority: teamPriority(teamId),
      typedSearchAttributes: new TypedSearchAttributes([{ key: searchAttributes.teamId, value: teamId }]),
    }),
  );
}

/** The person's digest, when one is waiting, re-reads when it may go out. False: none is waiting. */
export async function digestPrefsChanged(client: Client, teamId: string, userId: string): Promise<boolean> {
  try {
    await withinCallDeadline(client, () =>
      client.workflow.getHandle(digestWorkflowId(teamId, userId)).signal(prefsChangedSignal),
    );
    return true;
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return false;
    throw err;
  }
}
