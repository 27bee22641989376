// Feeds run-health workflows: every process that observes a run's events signals them here, starting the
// run's health workflow on its first event.
import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import type { ObservedEvent } from '../domain/health';
import { TypedSearchAttributes } from '@temporalio/common';
import { runAttributes } from '../contract/searchAttributes';
import { teamPriority } from './priority';
import { unlessAlreadyStarted } from './startUnlessRunning';
import {
  healthWorkflowId,
  observeSignal,
  workflowTypes,
  type HealthInput,
  type HealthOptions,
  type Workflows,
} from '../contract/workflows';

export function healthOptions(
  config: Pick<Config, 'stallAfterSeconds' | 'healthReapSeconds' | 'opsAlertWebhookUrl'>,
): HealthOptions {
  return {
    stallAfterSeconds: config.stallAfterSeconds,
    reapAfterSeconds: config.healthReapSeconds,
    opsAlerts: config.opsAlertWebhookUrl !== undefined,
  };
}

function pick(data: Record<string, unknown> | undefined, keys: string[]): Record<string, unknown> {
  return Object.fromEntries(keys.filter((k) => data?.[k] !== undefined).map((k) => [k, data![k]]));
}

export type HealthSignaler = ReturnType<typeof createHealthSignaler>;

/**
 * The start arguments (options, budget) are only read by health histories from before the worker took its own
 * settings; they are still passed so a worker not yet upgraded keeps working.
 */
export function createHealthSignaler(deps: { client: Client; taskQueue: string; options: HealthOptions }) {
  return {
    async observe(run: { _id: string; teamId: string; budget?: { limit: number } }, events: ObservedEvent[]) {
      const input: HealthInput = {
        runId: run._id,
        teamId: run.teamId,
        ...(run.budget ? { budgetLimit: run.budget.limit } : {}),
        options: deps.options,
      };
      for (const { type, data } of events) {
        // Health reads only these; the rest (a final answer, a prompt) stays out of its history.
        const event: ObservedEvent = { type, data: pick(data, ['node', 'spent']) };
        await unlessAlreadyStarted(() =>
          deps.client.workflow.signalWithStart<Workflows['runHealthWorkflow'], [ObservedEvent]>(
            workflowTypes.health,
            {
              workflowId: healthWorkflowId(run._id),
              taskQueue: deps.taskQueue,
              args: [input],
              signal: observeSignal,
              signalArgs: [event],
              priority: teamPriority(run.teamId),
              typedSearchAttributes: new TypedSearchAttributes(runAttributes(run._id, run.teamId)),
              // A run whose health was reaped after it ended does not get a new one from a late event.
              workflowIdReusePolicy: 'REJECT_DUPLICATE',
            },
          ),
        );
      }
    },
  };
}
