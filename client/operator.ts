// notifyOperator: escalates a router decision error through the operator dispatcher and its claim, so each
// decision alerts once however often it is reported (by the API or by a library caller).
import { Client, WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import { routeDecisionAlert, type RouteDecisionError } from '../domain/ops';
import { operatorAlertWorkflowId, runAttributes, workflowTypes } from '../workflows/ids';
import type { operatorAlertWorkflow } from '../workflows/operatorAlert';
import { TypedSearchAttributes } from '@temporalio/common';

export async function notifyOperator(
  client: Client,
  taskQueue: string,
  report: RouteDecisionError,
  now: Date,
): Promise<{ episodeKey: string; started: boolean }> {
  const alert = routeDecisionAlert(report, now.toISOString());
  try {
    await client.workflow.start<typeof operatorAlertWorkflow>(workflowTypes.operatorAlert, {
      workflowId: operatorAlertWorkflowId(alert.episodeKey),
      taskQueue,
      args: [alert],
      // A closed dispatch may run again (its claim still dedupes); a running one is not doubled.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      workflowIdConflictPolicy: 'FAIL',
      typedSearchAttributes: new TypedSearchAttributes(runAttributes(report.runId, report.teamId)),
    });
    return { episodeKey: alert.episodeKey, started: true };
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError)
      return { episodeKey: alert.episodeKey, started: false };
    throw err;
  }
}
