// notifyOperator: escalates a router decision error through the operator dispatcher and its claim, so each
// decision alerts once however often it is reported (by the API or by a library caller).
import type { Client } from '@temporalio/client';
import {
  callbackExhaustedAlert,
  endpointDisabledAlert,
  pushConfigFaultAlert,
  routeDecisionAlert,
  type OperatorAlert,
  type PushConfigFault,
  type RouteDecisionError,
} from '../domain/ops';
import { claimKeys, type RunOutcome } from '../domain/outcome';
import { withDeadline } from '../platform/deadline';
import type { ClaimStore } from '../store/claims';
import type { EndpointDisabling, EndpointRow } from '../store/endpoint/endpoints';
import { runAttributes } from '../contract/searchAttributes';
import { operatorAlertWorkflowId, workflowTypes } from '../contract/workflows';
import { TypedSearchAttributes } from '@temporalio/common';
import { teamPriority } from './priority';
import { startUnlessRunning } from './startUnlessRunning';

export async function notifyOperator(
  client: Client,
  taskQueue: string,
  report: RouteDecisionError,
  now: Date,
): Promise<{ episodeKey: string; started: boolean }> {
  const alert = routeDecisionAlert(report, now.toISOString());
  return { episodeKey: alert.episodeKey, started: await startAlert(client, taskQueue, alert) };
}

/**
 * Starts an alert's own ops|<episodeKey> workflow; false when one of that key is running already. A closed
 * dispatch may run again (its claim still dedupes); a running one is not doubled.
 */
async function startAlert(
  client: Client,
  taskQueue: string,
  alert: OperatorAlert,
  deadlineMs?: number,
): Promise<boolean> {
  return startUnlessRunning(
    client,
    workflowTypes.operatorAlert,
    {
      workflowId: operatorAlertWorkflowId(alert.episodeKey),
      taskQueue,
      args: [alert],
      priority: teamPriority(alert.teamId),
      typedSearchAttributes: new TypedSearchAttributes(runAttributes(alert.runId, alert.teamId)),
    },
    'ALLOW_DUPLICATE',
    deadlineMs,
  );
}

/**
 * push_config_fault: at most once an hour per push service origin. The alert's key carries the origin and the
 * hour, so its ops| claim dedupes every report of that hour (every episode, worker and replica); reports after
 * the claim is taken skip the start with one claim read.
 */
export async function raisePushConfigFault(
  deps: { client: Client; taskQueue: string; claims: Pick<ClaimStore, 'isMarked'>; now: () => Date },
  fault: PushConfigFault,
): Promise<void> {
  const alert = pushConfigFaultAlert(fault, deps.now());
  // Both steps have a whole deadline: a stalled store or Temporal must not leave it pending for good.
  const claimed = deps.claims.isMarked(claimKeys.ops(alert.episodeKey));
  const marked = await withDeadline(claimed, CLAIM_READ_DEADLINE_MS, () => {
    throw new Error(`no answer within ${CLAIM_READ_DEADLINE_MS} ms`);
  });
  if (marked) return;
  await startAlert(deps.client, deps.taskQueue, alert, ALERT_START_DEADLINE_MS);
}

const CLAIM_READ_DEADLINE_MS = 2000;
const ALERT_START_DEADLINE_MS = 5000;

/** Starts an endpoint's endpoint_disabled alert, as its disabling recorded it. */
export type EndpointDisabledRaiser = (endpoint: EndpointRow, disabling: EndpointDisabling) => Promise<void>;

/**
 * endpoint_disabled: one alert per disabling (its key carries when), through the operator dispatcher; started again
 * (by the sweep) it is the same alert.
 */
export const endpointDisabledRaiser =
  (client: Client, taskQueue: string): EndpointDisabledRaiser =>
  async (endpoint, { disabledAt, failingSince, runId, lastError }) => {
    const { _id: id, teamId, url } = endpoint;
    const alert = endpointDisabledAlert({ id, teamId, url, failingSince, disabledAt }, runId, lastError);
    await startAlert(client, taskQueue, alert, ALERT_START_DEADLINE_MS);
  };

/** Starts a callback's callback_exhausted alert: one given up by the sweep (an episode's own raises it itself). */
export type CallbackExhaustedRaiser = (
  episode: Pick<RunOutcome, 'runId' | 'teamId' | 'episodeId'>,
  attempts: number,
  lastError: string,
) => Promise<void>;

/** callback_exhausted through the operator dispatcher: the same alert (its key, its claim) whoever raises it. */
export const callbackExhaustedRaiser =
  (client: Client, taskQueue: string, now: () => Date): CallbackExhaustedRaiser =>
  async (episode, attempts, lastError) => {
    const alert = callbackExhaustedAlert(episode, attempts, lastError, now().toISOString());
    await startAlert(client, taskQueue, alert, ALERT_START_DEADLINE_MS);
  };
