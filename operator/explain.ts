// flow-notify explain: "what did we tell whom about run X", gathered for an operator from the claims, the push
// deliveries, the callback attempt log and the Temporal histories of every workflow the run touched. Reads only; everything is bounded
// (episodes, workflows, history events, rows) and a listing cut short says so. The reads are here, one step each;
// history decoding is operator/history.ts, the row-to-view conversions operator/views.ts, the text operator/render.ts.
import type { Client, WorkflowExecutionInfo } from '@temporalio/client';
import { claimKeys, interactionOfEpisode } from '../domain/outcome';
import { mapBounded } from '../platform/concurrency';
import type { CallbackAttemptRow, CallbackAttemptStore } from '../store/callback/attempts';
import type { ClaimReader, ClaimRow } from '../store/claims';
import type { EpisodeRow, EpisodeStore } from '../store/episodes';
import type { PushDelivery, PushDeliveryStore } from '../store/push/deliveries';
import type { PushHoldStore } from '../store/push/holds';
import type { PushReceiptStore } from '../store/push/receipts';
import type { PushSubscriptionStore } from '../store/push/subscriptions';
import type { InteractionStore } from '../store/interactions';
import type { RunStore } from '../store/runs';
import { healthWorkflowId, workflowTypes } from '../contract/workflows';
import type { EpisodeView, OperatorAlertView, RunExplanation } from './explanation';
import { readHistory } from './history';
import {
  answersOf,
  deviceReceiptView,
  receiptKey,
  receiptsByDevice,
  type Answers,
  branchesOf,
  callbackAttemptView,
  claimView,
  gatherAlerts,
  pushDeliveryView,
  pushHeldView,
  runView,
  workflowView,
  type Execution,
} from './views';

export const EXPLAIN_LIMITS = {
  episodes: 50,
  workflows: 100,
  /** Per workflow execution: an episode has a few dozen events; a long-lived health workflow continues-as-new. */
  historyEvents: 5_000,
  deliveriesPerEpisode: 500,
  /** Per run: the schedule's attempts of every episode plus its (rate-limited) redeliveries. */
  callbackAttempts: 1000,
  alertClaims: 200,
  interactions: 200,
};

type Limits = typeof EXPLAIN_LIMITS;

/** Histories read at once: a run with many workflows must not open a hundred streams on the frontend. */
const HISTORY_READS_IN_FLIGHT = 8;

/** Episodes whose deliveries are read at once (two round trips each, up to `episodes` of them). */
const EPISODE_READS_IN_FLIGHT = 8;

/** Run ids are generated (`run_<hex>`); anything else is refused before it reaches a visibility query. */
export const RUN_ID_PATTERN = /^[A-Za-z0-9_.-]{1,128}$/;

export interface ExplainDeps {
  runs: Pick<RunStore, 'getById'>;
  episodes: Pick<EpisodeStore, 'listForRunAnyTeam'>;
  claims: ClaimReader;
  pushDeliveries: Pick<PushDeliveryStore, 'listForEpisode' | 'listFollowUps'>;
  callbackAttempts: Pick<CallbackAttemptStore, 'listForRun'>;
  pushSubscriptions: Pick<PushSubscriptionStore, 'endpointsByIds'>;
  /** Who was held for a digest instead of pushed; absent: not read. */
  pushHolds?: Pick<PushHoldStore, 'listForEpisode'>;
  /** What each device's service worker reported, and who answered; absent: every device reads "no receipt". */
  pushReceipts?: Pick<PushReceiptStore, 'listForEpisode'>;
  interactions?: Pick<InteractionStore, 'listForRun'>;
  client: Client;
  namespace: string;
  /** Base of the Temporal UI, e.g. http://localhost:8233. */
  temporalUiUrl: string;
  limits?: Partial<Limits>;
}

/** undefined: the run is unknown to the store and to Temporal. */
export async function explainRun(deps: ExplainDeps, runId: string): Promise<RunExplanation | undefined> {
  if (!RUN_ID_PATTERN.test(runId)) throw new Error(`not a run id: "${runId.slice(0, 140)}"`);
  const limits = { ...EXPLAIN_LIMITS, ...deps.limits };

  const [run, episodeRows, listed, interactions] = await Promise.all([
    deps.runs.getById(runId),
    deps.episodes.listForRunAnyTeam(runId, limits.episodes + 1),
    listRunWorkflows(deps, runId, limits.workflows),
    deps.interactions?.listForRun(runId, limits.interactions) ?? [],
  ]);
  if (!run && !episodeRows.length && !listed.length) return undefined;

  const infos = listed
    .slice(0, limits.workflows)
    .sort((a, b) => a.startTime.getTime() - b.startTime.getTime());
  const executions = await readHistories(deps, infos, limits.historyEvents);
  const { episodeIds, episodesTruncated } = episodeIdsOf(episodeRows, infos, limits.episodes);
  const records = await readClaimsAndAttempts(deps, runId, episodeIds, limits);
  const rowById = new Map(episodeRows.map((row) => [row._id, row]));
  const seen = { answers: answersOf(interactions), runId };
  const episodes = await mapBounded(episodeIds, EPISODE_READS_IN_FLIGHT, (episodeId) =>
    episodeView(deps, episodeId, rowById.get(episodeId), executions, records, limits, seen),
  );
  const operatorAlerts = gatherAlerts(episodeIds, records.alertClaims, records.claimByKey, executions);
  await readClaimsFoundBySends(deps, operatorAlerts, records.claimByKey);

  return {
    version: 1,
    runId,
    run: runView(run),
    episodes,
    operatorAlerts,
    workflows: executions.map((execution) => workflowView(execution, deps)),
    truncated: {
      episodes: episodesTruncated,
      workflows: listed.length > limits.workflows,
      callbackAttempts: records.attemptsTruncated,
    },
    temporalUiUrl: deps.temporalUiUrl,
  };
}

/** Every workflow of the run: its episodes and alert dispatches (FlowRunId), its health, its router alerts. */
function visibilityQuery(runId: string): string {
  return (
    `FlowRunId = '${runId}' OR WorkflowId = '${healthWorkflowId(runId)}'` +
    ` OR WorkflowId STARTS_WITH 'ops|route:${runId}:'`
  );
}

async function listRunWorkflows(
  deps: ExplainDeps,
  runId: string,
  limit: number,
): Promise<WorkflowExecutionInfo[]> {
  const found: WorkflowExecutionInfo[] = [];
  // The iterator pages through the listing; stop one past the limit to know it was cut short.
  for await (const info of deps.client.workflow.list({
    query: visibilityQuery(runId),
    pageSize: Math.min(100, limit + 1),
  })) {
    found.push(info);
    if (found.length > limit) break;
  }
  return found;
}

async function readHistories(
  deps: ExplainDeps,
  infos: WorkflowExecutionInfo[],
  maxEvents: number,
): Promise<Execution[]> {
  return mapBounded(infos, HISTORY_READS_IN_FLIGHT, async (info) => ({
    info,
    history: await readHistory(deps, { workflowId: info.workflowId, runId: info.runId }, maxEvents),
  }));
}

/** The recorded episodes, then any episode workflow whose record is missing (its write failed). */
function episodeIdsOf(
  episodeRows: EpisodeRow[],
  infos: WorkflowExecutionInfo[],
  limit: number,
): { episodeIds: string[]; episodesTruncated: boolean } {
  const episodeIds: string[] = episodeRows.slice(0, limit).map((row) => row._id);
  for (const info of infos) {
    if (info.type === workflowTypes.episode && !episodeIds.includes(info.workflowId)) {
      episodeIds.push(info.workflowId);
    }
  }
  const episodesTruncated = episodeRows.length > limit || episodeIds.length > limit;
  episodeIds.splice(limit);
  return { episodeIds, episodesTruncated };
}

interface ClaimsAndAttempts {
  claimByKey: Map<string, ClaimRow>;
  /** The run's ops| claims found by prefix (health, route and callback alerts). */
  alertClaims: ClaimRow[];
  attemptRows: CallbackAttemptRow[];
  attemptsTruncated: boolean;
}

/** Each episode's family claims, the run's alert claims, and the run's callback attempt log. */
async function readClaimsAndAttempts(
  deps: ExplainDeps,
  runId: string,
  episodeIds: string[],
  limits: Limits,
): Promise<ClaimsAndAttempts> {
  const familyKeys = episodeIds.flatMap((id) => Object.values(claimKeys).map((key) => key(id)));
  const [familyClaims, healthAlertClaims, routeAlertClaims, callbackAlertClaims, attemptRowsRead] =
    await Promise.all([
      deps.claims.byKeys(familyKeys),
      deps.claims.byPrefix(claimKeys.ops(`health:${runId}:`), limits.alertClaims),
      deps.claims.byPrefix(claimKeys.ops(`route:${runId}:`), limits.alertClaims),
      deps.claims.byPrefix(claimKeys.ops(`callback:${runId}:`), limits.alertClaims),
      deps.callbackAttempts.listForRun(runId, limits.callbackAttempts + 1),
    ]);
  // One past the limit says the oldest were cut (the store keeps the newest).
  const attemptsTruncated = attemptRowsRead.length > limits.callbackAttempts;
  const alertClaims = [...healthAlertClaims, ...routeAlertClaims, ...callbackAlertClaims];
  return {
    claimByKey: new Map([...familyClaims, ...alertClaims].map((r) => [r._id, r])),
    alertClaims,
    attemptRows: attemptsTruncated ? attemptRowsRead.slice(1) : attemptRowsRead,
    attemptsTruncated,
  };
}

/** One episode: its record, family claims, workflow result, push deliveries (read here) and callback attempts. */
async function episodeView(
  deps: ExplainDeps,
  episodeId: string,
  row: EpisodeRow | undefined,
  executions: Execution[],
  records: ClaimsAndAttempts,
  limits: Limits,
  seen: { answers: Answers; runId: string },
): Promise<EpisodeView> {
  const interactionId = interactionOfEpisode(seen.runId, episodeId);
  const answer = interactionId ? seen.answers.get(interactionId) : undefined;
  const [rows, followUps, receiptRows, held] = await Promise.all([
    deps.pushDeliveries.listForEpisode(episodeId, limits.deliveriesPerEpisode + 1),
    interactionId
      ? deps.pushDeliveries.listFollowUps(episodeId, interactionId, limits.deliveriesPerEpisode + 1)
      : [],
    deps.pushReceipts?.listForEpisode(episodeId, interactionId) ?? [],
    deps.pushHolds?.listForEpisode(episodeId, limits.deliveriesPerEpisode + 1) ?? [],
  ]);
  const receipts = receiptsByDevice(receiptRows);
  const endpoints = await deps.pushSubscriptions.endpointsByIds([
    ...new Set([...rows, ...followUps].map((r) => r.subscriptionId)),
  ]);
  const deliveryView = (r: PushDelivery & { episodeId: string }) =>
    pushDeliveryView(
      r,
      endpoints.get(r.subscriptionId),
      deviceReceiptView(receipts.get(receiptKey(r.episodeId, r.subscriptionId)), answer, r.userId),
    );
  const closed = executions
    .filter(({ info }) => info.type === workflowTypes.episode && info.workflowId === episodeId)
    .filter(({ history }) => history.result !== undefined)
    .at(-1);
  const familyClaim = (key: string) => claimView(key, records.claimByKey.get(key));
  return {
    episodeId,
    ...(row ? { kind: row.kind, recordedAt: row.recordedAt.toISOString() } : {}),
    families: {
      push: familyClaim(claimKeys.push(episodeId)),
      callback: familyClaim(claimKeys.callback(episodeId)),
      ops: familyClaim(claimKeys.ops(episodeId)),
    },
    ...(closed ? { branches: branchesOf(closed.history.result) } : {}),
    pushDeliveries: rows.slice(0, limits.deliveriesPerEpisode).map(deliveryView),
    pushDeliveriesTruncated: rows.length > limits.deliveriesPerEpisode,
    followUpPushes: followUps
      .slice(0, limits.deliveriesPerEpisode)
      .map((r) => ({ followUp: r.followUp, ...deliveryView(r) })),
    followUpPushesTruncated: followUps.length > limits.deliveriesPerEpisode,
    pushHeld: held.slice(0, limits.deliveriesPerEpisode).map(pushHeldView),
    pushHeldTruncated: held.length > limits.deliveriesPerEpisode,
    callbackAttempts: records.attemptRows
      .filter((a) => a.episodeId === episodeId)
      .map((a) => callbackAttemptView(a)),
  };
}

/**
 * Alerts found only through their sends (a push_config_fault, keyed by push service and hour, not by run):
 * their claims are read by key.
 */
async function readClaimsFoundBySends(
  deps: ExplainDeps,
  operatorAlerts: OperatorAlertView[],
  claimByKey: Map<string, ClaimRow>,
): Promise<void> {
  const unread = operatorAlerts.filter((a) => !claimByKey.has(a.claim.key)).map((a) => a.claim.key);
  for (const row of await deps.claims.byKeys(unread)) {
    const alert = operatorAlerts.find((a) => a.claim.key === row._id);
    if (alert) alert.claim = claimView(row._id, row);
  }
}
