// An interaction's workflow (workflows/interaction.ts): started with its pause's episode, and signalled with start
// by the answer and by a snooze, so whichever reaches Temporal first finds or starts the one execution.
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { runAttributes } from '../contract/searchAttributes';
import {
  interactionAnsweredSignal,
  interactionSnoozedSignal,
  interactionWorkflowId,
  workflowTypes,
  type InteractionAnswer,
  type InteractionPlan,
  type InteractionRef,
  type InteractionSnooze,
  type Workflows,
} from '../contract/workflows';
import type { RunOutcome } from '../domain/outcome';
import { PRIORITY_KEYS, teamPriority } from './priority';
import { startUnlessRunning, withinCallDeadline } from './startUnlessRunning';

const startOptions = (taskQueue: string, ref: InteractionRef, plan?: InteractionPlan) => ({
  workflowId: interactionWorkflowId(ref.interactionId),
  taskQueue,
  args: (plan ? [ref, plan] : [ref]) as [InteractionRef, InteractionPlan?],
  // A person waits on its ladder, as on its pause's episode.
  priority: teamPriority(ref.teamId, PRIORITY_KEYS.humanInput),
  typedSearchAttributes: new TypedSearchAttributes(runAttributes(ref.runId, ref.teamId)),
});

/** The interaction a human-input pause asks, when the outcome is one. */
export function interactionOf(outcome: RunOutcome): InteractionRef | undefined {
  const interactionId = outcome.pause?.reason === 'human_input' ? outcome.pause.interactionId : '';
  return interactionId ? { runId: outcome.runId, teamId: outcome.teamId, interactionId } : undefined;
}

/**
 * Starts the interaction's workflow unless one runs: its ladder times from the question, not from this start.
 * Given the plan, the workflow takes it instead of reading it.
 */
export async function startInteraction(
  client: Client,
  taskQueue: string,
  ref: InteractionRef,
  plan?: InteractionPlan,
): Promise<boolean> {
  return startUnlessRunning(client, workflowTypes.interaction, startOptions(taskQueue, ref, plan));
}

export type InteractionSignaler = ReturnType<typeof createInteractionSignaler>;

export function createInteractionSignaler(client: Client, taskQueue: string) {
  return {
    /** The answer was taken: the workflow stops its ladder and closes the question on every device. */
    async answered(ref: InteractionRef, answer: InteractionAnswer): Promise<void> {
      await withinCallDeadline(client, () =>
        client.workflow.signalWithStart<Workflows['interactionWorkflow'], [InteractionAnswer]>(
          workflowTypes.interaction,
          { ...startOptions(taskQueue, ref), signal: interactionAnsweredSignal, signalArgs: [answer] },
        ),
      );
    },

    /** A person snoozed the question: pushed to them again an hour later unless it is answered by then. */
    async snoozed(ref: InteractionRef, snooze: InteractionSnooze): Promise<void> {
      await withinCallDeadline(client, () =>
        client.workflow.signalWithStart<Workflows['interactionWorkflow'], [InteractionSnooze]>(
          workflowTypes.interaction,
          { ...startOptions(taskQueue, ref), signal: interactionSnoozedSignal, signalArgs: [snooze] },
        ),
      );
    },
  };
}
