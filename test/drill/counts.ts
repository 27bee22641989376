// The drill's counts: what every receiver got against what the plan owed, and the invariants over them. The count
// steps run last in the drill's scenario (test/drill/scenario.ts), on the context the earlier steps filled in.
import { Webhook } from 'standardwebhooks';
import type { Db } from 'mongodb';
import { PUSH_REPEATS_PER_CRASH } from '../../activities';
import type { SweepReport } from '../../contract/workflows';
import type { OperatorAlert } from '../../domain/ops';
import type { PushPayload } from '../../domain/push';
import type { CallbackReceiver, PushService } from '../support';
import { notificationOf } from '../support/pushService';
import { endpointViolations, formatEndpoints, type EndpointCounts } from './endpoints';
import { formatQuestions, questionViolations, rungPairs, type QuestionCounts } from './questions';
import type { Drill, DrillOptions, EpisodePlan, FaultWindow } from './scenario';

export interface DrillCounts {
  runs: number;
  episodes: number;
  durationSeconds: { drive: number; settle: number; total: number };
  push: {
    /** (episode, endpoint) pairs owed a push. */
    expected: number;
    /** Accepted deliveries the push service decrypted. */
    sent: number;
    /** Pairs that got at least one. */
    delivered: number;
    /** Copies beyond the first. */
    repeated: number;
    /** Repeats by the fault window their first copy fell in ("none": outside every window). */
    repeatedBy: Record<'kill' | 'temporal' | 'mongo' | 'none', number>;
    /** The most repeats one episode had from one kill (bounded by the fan-out width). */
    maxRepeatsPerKillAndEpisode: number;
    /** Repeats whose payload or tag differed from the first copy. */
    repeatsWithOtherTag: number;
    lost: number;
    lostPairs: string[];
    /** Deliveries to an endpoint not owed that episode. */
    unexpected: number;
    /** What the push service answered, by status (scripted failures included). */
    answers: Record<string, number>;
  };
  callbacks: {
    expected: number;
    delivered: number;
    /** Every POST the receiver saw. */
    attempts: number;
    /** Episodes whose callback took more than one POST. */
    retried: number;
    /** POSTs whose webhook-id was not their episode's id, or episodes seen under two ids. */
    unstableIds: number;
    badSignatures: number;
    lost: number;
    lostEpisodes: string[];
    unexpected: number;
  };
  alerts: {
    expected: number;
    received: number;
    /** Alerts by kind. */
    byKind: Record<string, number>;
    duplicates: number;
    duplicateKeys: string[];
    /**
     * Repeats whose first copy arrived within a kill's window, under the same Idempotency-Key: the moment between
     * the receiver's 2xx and the send's record (how-it-works: a receiver that dedupes on the key sees it once).
     */
    repeatedAtKill: number;
    missing: number;
    missingKeys: string[];
    unexpected: number;
  };
  emits: {
    /** The API engine's own emit that failed (logged; the sweep replays). */
    apiEngineFailed: number;
    inProcess: { started: number; refused: number; failed: number };
    cli: { started: number; refused: number; notEmitted: number; failed: number };
  };
  /** Answers from notifications, snoozes, escalation rungs and the closes. */
  questions: QuestionCounts;
  /** The team endpoints' deliveries. */
  endpoints: EndpointCounts;
  claims: { pending: number; pendingPastGrace: number };
  /** Pauses whose push did not settle within the step timeout (the run moved on anyway). */
  stuckSteps: number;
  /** Runs the API could no longer move on (answer refused although the run still waits on it). */
  stuckRuns: string[];
  /** Runs the drill could not drive to their end (an API call kept failing). */
  runErrors: string[];
  finalSweep?: SweepReport;
  workflows: {
    total: number;
    byStatus: Record<string, number>;
    /** FAILED, TERMINATED, TIMED_OUT or CANCELLED, as type/id. */
    failed: string[];
    /** Still running after the settle, as type/id. */
    running: string[];
  };
  faults: {
    workerKills: number;
    workerStarts: number;
    unexpectedWorkerExits: number;
    temporalRestarts: number;
    mongoRestarts: number;
    /** Whether the Mongo restart began while a callback was retrying (its last attempt refused, its claim held). */
    mongoRestartDuringCallbackRetry: boolean;
    push500Answers: number;
    push429Answers: number;
    receiverFailureAnswers: number;
    /** Operator alert POSTs refused during the ops outage, and of those before the worker was killed in it. */
    opsOutage: { refused: number; refusedBeforeKill: number };
  };
  /** Invariant violations; empty when the drill passed. */
  violations: string[];
}

type ClaimDoc = { _id: string; delivered: boolean; sent_at: Date; result?: string };
export const claimsOf = (d: Db) => d.collection<ClaimDoc>('sent_notifications');

/** Pushes: every (episode, endpoint) pair owed once; repeats only from a kill, identical to the first copy. */
export function countPushes(drill: Drill): void {
  const { push, episodes, windows, kills, log } = drill;
  const inWindow = (at: number, kind: FaultWindow['kind']) =>
    windows.some((w) => w.kind === kind && at >= w.from && at <= w.to);
  const killOf = (at: number) => kills.findIndex((k) => at >= k - 3000 && at <= k + 1000);

  const owedPairs = new Map<string, EpisodePlan>();
  for (const e of episodes) {
    const users = new Set([e.run.owner, ...e.run.team.teamWide]);
    for (const user of users) {
      for (const sub of e.run.team.endpoints.get(user) ?? []) {
        owedPairs.set(`${e.episodeId}|${push.idOf(sub)}`, e);
      }
    }
  }
  // A question's close (kind answered: it replaces the question once anyone answered) is owed once to each device
  // the question reached, and is held to the same rules as the question's own push: kept apart by its prefix.
  // So is a rung's push to its person, and that device's close: repeats judged here, owed and lost with the
  // questions (test/drill/questions.ts).
  const rungs = rungPairs(drill);
  const CLOSE = 'close|';
  const byPair = new Map<string, ReturnType<PushService['received']>>();
  for (const received of push.received()) {
    const payload = received.payload as PushPayload;
    const key = `${payload.kind === 'answered' ? CLOSE : ''}${payload.episodeId}|${received.endpointId}`;
    byPair.set(key, [...(byPair.get(key) ?? []), received]);
  }
  const pushCounts: DrillCounts['push'] = {
    expected: owedPairs.size,
    sent: push.received().length,
    delivered: 0,
    repeated: 0,
    repeatedBy: { kill: 0, temporal: 0, mongo: 0, none: 0 },
    maxRepeatsPerKillAndEpisode: 0,
    repeatsWithOtherTag: 0,
    lost: 0,
    lostPairs: [],
    unexpected: 0,
    answers: {},
  };
  const perKillEpisode = new Map<string, number>();
  for (const [key, got] of byPair) {
    const close = key.startsWith(CLOSE);
    const pair = close ? key.slice(CLOSE.length) : key;
    if (!owedPairs.has(pair) && !rungs.has(pair)) {
      pushCounts.unexpected += got.length;
      continue;
    }
    if (!close && owedPairs.has(pair)) pushCounts.delivered++;
    const [first, ...repeats] = got;
    const firstPayload = first.payload as PushPayload;
    for (const repeat of repeats) {
      pushCounts.repeated++;
      const payload = repeat.payload as PushPayload;
      if (
        payload.tag !== firstPayload.tag ||
        payload.tag !== firstPayload.episodeId ||
        JSON.stringify(notificationOf(payload)) !== JSON.stringify(notificationOf(firstPayload))
      ) {
        pushCounts.repeatsWithOtherTag++;
      }
      const at = first.at.getTime();
      const cause = inWindow(at, 'kill')
        ? 'kill'
        : inWindow(at, 'temporal')
          ? 'temporal'
          : inWindow(at, 'mongo')
            ? 'mongo'
            : 'none';
      pushCounts.repeatedBy[cause]++;
      if (cause === 'kill') {
        const slot = `${killOf(at)}|${firstPayload.episodeId}`;
        perKillEpisode.set(slot, (perKillEpisode.get(slot) ?? 0) + 1);
      } else {
        log(
          `drill: repeat outside a kill window (${cause}): ${key} first at ${first.at.toISOString()}, ` +
            `again at ${repeat.at.toISOString()}`,
        );
      }
    }
  }
  pushCounts.maxRepeatsPerKillAndEpisode = Math.max(0, ...perKillEpisode.values());
  for (const key of owedPairs.keys()) {
    if (!byPair.has(key)) {
      pushCounts.lost++;
      // The evidence: what the push service answered that endpoint, in order, over the whole drill.
      const endpointId = key.slice(key.lastIndexOf('|') + 1);
      const answered = push.attempts(endpointId).map((a) => a.status);
      pushCounts.lostPairs.push(`${key} (endpoint answered ${answered.join(',')})`);
    }
  }
  for (const attempt of push.attempts()) {
    const status = String(attempt.status);
    pushCounts.answers[status] = (pushCounts.answers[status] ?? 0) + 1;
  }
  drill.pushCounts = pushCounts;
}

/** Callbacks: one per ended run that asked for one, every attempt under its episode's id, all verifiable. */
export async function countCallbacks(drill: Drill): Promise<void> {
  const { callbacks, episodes, observer } = drill;
  const endWithCallback = episodes.filter((e) => e.kind === 'end' && e.run.withCallback);
  const cbCounts: DrillCounts['callbacks'] = {
    expected: endWithCallback.length,
    delivered: 0,
    attempts: callbacks.received.length,
    retried: 0,
    unstableIds: 0,
    badSignatures: 0,
    lost: 0,
    lostEpisodes: [],
    unexpected: 0,
  };
  const callbackRuns = new Map(endWithCallback.map((e) => [e.run.id!, e]));
  const idsByRun = new Map<string, Set<string>>();
  const attemptsByEpisode = new Map<string, number>();
  for (const received of callbacks.received) {
    let body: { episodeId?: string; run?: { id?: string } };
    try {
      body = JSON.parse(received.body) as typeof body;
    } catch {
      cbCounts.unexpected++;
      continue;
    }
    const runId = body.run?.id ?? '';
    const plan = callbackRuns.get(runId);
    if (!plan) {
      cbCounts.unexpected++;
      continue;
    }
    const id = String(received.headers['webhook-id'] ?? '');
    idsByRun.set(runId, (idsByRun.get(runId) ?? new Set()).add(id));
    if (id !== plan.episodeId || body.episodeId !== plan.episodeId) cbCounts.unstableIds++;
    attemptsByEpisode.set(plan.episodeId, (attemptsByEpisode.get(plan.episodeId) ?? 0) + 1);
    // Verified as the receiver would have when it got it: the library also checks the timestamp against
    // its clock (5 minutes' tolerance), so its clock is set to the moment of receipt for the check.
    const realNow = Date.now;
    Date.now = () => received.at.getTime();
    try {
      new Webhook(plan.run.secret!).verify(received.body, received.headers as Record<string, string>);
    } catch {
      cbCounts.badSignatures++;
    } finally {
      Date.now = realNow;
    }
  }
  for (const ids of idsByRun.values()) if (ids.size > 1) cbCounts.unstableIds++;
  for (const e of endWithCallback) {
    const claim = await observer.use((d) => claimsOf(d).findOne({ _id: `cb|${e.episodeId}` }));
    const settled = claim?.delivered ? (claim.result ?? 'delivered') : undefined;
    if ((attemptsByEpisode.get(e.episodeId) ?? 0) > 0 && settled === 'delivered') cbCounts.delivered++;
    else {
      cbCounts.lost++;
      cbCounts.lostEpisodes.push(`${e.episodeId} (${claim ? (settled ?? 'pending') : 'absent'})`);
    }
    if ((attemptsByEpisode.get(e.episodeId) ?? 0) > 1) cbCounts.retried++;
  }
  drill.callbackCounts = cbCounts;
}

/** Operator alerts: each failed run's, and each reported router decision's, exactly once. */
export async function countAlerts(drill: Drill): Promise<void> {
  const { opsWebhook, episodes, kills } = drill;
  const owedAlerts = new Set(
    episodes
      .filter((e) => e.kind === 'end')
      .flatMap((e) => [
        ...(e.run.end === 'fail' ? [e.episodeId] : []),
        ...(e.run.routeError ? [`route:${e.run.id}:d1`] : []),
      ]),
  );
  const alertCounts: DrillCounts['alerts'] = {
    expected: owedAlerts.size,
    received: 0,
    byKind: {},
    duplicates: 0,
    duplicateKeys: [],
    repeatedAtKill: 0,
    missing: 0,
    missingKeys: [],
    unexpected: 0,
  };
  const alertsByKey = new Map<string, number>();
  const alertTimes = new Map<string, Date[]>();
  const alertKeys = new Map<string, Set<string>>();
  const atKill = (at: number) => kills.some((k) => at >= k - 3000 && at <= k + 1000);
  const refusedAlerts = refusedIndexes(drill, opsWebhook);
  for (const [index, received] of opsWebhook.received.entries()) {
    // A refused POST (a scripted 5xx) is not a delivery: the dispatcher retried it.
    if (refusedAlerts.has(index)) continue;
    alertCounts.received++;
    let alert: OperatorAlert;
    try {
      alert = JSON.parse(received.body) as OperatorAlert;
    } catch {
      alertCounts.unexpected++;
      continue;
    }
    alertsByKey.set(alert.episodeKey, (alertsByKey.get(alert.episodeKey) ?? 0) + 1);
    alertTimes.set(alert.episodeKey, [...(alertTimes.get(alert.episodeKey) ?? []), received.at]);
    const idempotencyKey = String(received.headers['idempotency-key'] ?? '');
    alertKeys.set(alert.episodeKey, (alertKeys.get(alert.episodeKey) ?? new Set()).add(idempotencyKey));
    alertCounts.byKind[alert.kind] = (alertCounts.byKind[alert.kind] ?? 0) + 1;
    if (!owedAlerts.has(alert.episodeKey)) alertCounts.unexpected++;
  }
  for (const key of owedAlerts) {
    const n = alertsByKey.get(key) ?? 0;
    if (n === 0) {
      alertCounts.missing++;
      alertCounts.missingKeys.push(key);
    } else if (n > 1) {
      const times = alertTimes.get(key) ?? [];
      const first = times[0]?.getTime() ?? 0;
      if (atKill(first) && alertKeys.get(key)?.size === 1 && !alertKeys.get(key)?.has('')) {
        alertCounts.repeatedAtKill += n - 1;
        continue;
      }
      alertCounts.duplicates += n - 1;
      // The evidence: when each copy arrived, and how far the first was from the nearest kill.
      const nearest = kills.reduce((best, k) => (Math.abs(k - first) < Math.abs(best - first) ? k : best), 0);
      const offset = nearest ? `; first copy ${((first - nearest) / 1000).toFixed(1)} s from a kill` : '';
      alertCounts.duplicateKeys.push(
        `${key} (at ${times.map((t) => t.toISOString()).join(', ')}${offset}; ` +
          `${await activityAttempts(drill, key.startsWith('route:') ? `ops|${key}` : key)})`,
      );
    }
  }
  drill.alertCounts = alertCounts;
  drill.refusedAlertPosts = refusedAlerts.size;
}

/** How the dispatching workflow's activity attempts went, from its history. */
async function activityAttempts(drill: Drill, workflowId: string): Promise<string> {
  try {
    const history = await drill.client.workflow.getHandle(workflowId).fetchHistory();
    const seen: string[] = [];
    for (const event of history.events ?? []) {
      const scheduled = event.activityTaskScheduledEventAttributes;
      const started = event.activityTaskStartedEventAttributes;
      const timedOut = event.activityTaskTimedOutEventAttributes;
      if (scheduled) seen.push(String(scheduled.activityType?.name));
      if (started) seen.push(`attempt ${started.attempt} on ${started.identity}`);
      if (timedOut) seen.push(`timed out: ${String(timedOut.failure?.message ?? '')}`);
    }
    return `history of ${workflowId}: ${seen.join(' / ')}`;
  } catch (err) {
    return `no history for ${workflowId}: ${String(err)}`;
  }
}

/**
 * The indexes of the requests a receiver refused: it answers its script in the order requests arrive, so the
 * `count` requests from index `from` on were the ones refused.
 */
function refusedIndexes(drill: Drill, receiver: CallbackReceiver): Set<number> {
  return new Set(
    drill.scripted
      .filter((s) => s.receiver === receiver)
      .flatMap((s) => Array.from({ length: s.count }, (_, i) => s.from + i))
      .filter((i) => i < receiver.received.length),
  );
}

/** Claims still pending, and every workflow of the drill's task queue by status. */
export async function countClaimsAndWorkflows(drill: Drill): Promise<void> {
  const pendingRows = await drill.observer.use((d) => claimsOf(d).find({ delivered: false }).toArray());
  drill.claimCounts = {
    pending: pendingRows.length,
    pendingPastGrace: pendingRows.filter((r) => r.sent_at.getTime() < Date.now() - drill.graceSeconds * 1000)
      .length,
  };
  const workflowCounts: DrillCounts['workflows'] = { total: 0, byStatus: {}, failed: [], running: [] };
  for await (const info of drill.client.workflow.list({
    query: `TaskQueue = "${drill.config.temporalTaskQueue}"`,
  })) {
    workflowCounts.total++;
    const status = info.status.name;
    workflowCounts.byStatus[status] = (workflowCounts.byStatus[status] ?? 0) + 1;
    if (['FAILED', 'TERMINATED', 'TIMED_OUT', 'CANCELLED'].includes(status)) {
      workflowCounts.failed.push(`${info.type}/${info.workflowId}: ${status}`);
    }
    if (status === 'RUNNING') workflowCounts.running.push(`${info.type}/${info.workflowId}`);
  }
  drill.workflowCounts = workflowCounts;
}

/** The drill's result: everything counted, and the invariants it breaks. */
export function checkInvariants(drill: Drill): void {
  const { options, tally } = drill;
  const answers = drill.pushCounts.answers;
  const result: DrillCounts = {
    runs: options.runs,
    episodes: drill.episodes.length,
    durationSeconds: {
      drive: drill.driveSeconds,
      settle: drill.settleSeconds,
      total: (Date.now() - drill.started) / 1000,
    },
    push: drill.pushCounts,
    callbacks: drill.callbackCounts,
    alerts: drill.alertCounts,
    questions: drill.questionCounts,
    endpoints: drill.endpointCounts,
    emits: {
      apiEngineFailed: tally.apiEngineFailed,
      inProcess: tally.inProcess,
      cli: tally.cli,
    },
    claims: drill.claimCounts,
    stuckSteps: tally.stuckSteps,
    stuckRuns: tally.stuckRuns,
    runErrors: tally.runErrors,
    finalSweep: drill.finalSweep,
    workflows: drill.workflowCounts,
    faults: {
      workerKills: drill.kills.length,
      workerStarts: drill.worker.starts,
      unexpectedWorkerExits: drill.worker.unexpectedExits.length,
      temporalRestarts: tally.temporalRestarts,
      mongoRestarts: tally.mongoRestarts,
      mongoRestartDuringCallbackRetry: tally.mongoRestartDuringCallbackRetry,
      push500Answers: answers['500'] ?? 0,
      push429Answers: answers['429'] ?? 0,
      receiverFailureAnswers: refusedIndexes(drill, drill.callbacks).size + drill.refusedAlertPosts,
      opsOutage: tally.opsOutage,
    },
    violations: [],
  };
  result.violations = drillViolations(result, options);
  drill.result = result;
}

/** The drill's invariants over the counts; each violation is one line. */
export function drillViolations(c: DrillCounts, options: Pick<DrillOptions, 'faults' | 'stack'>): string[] {
  const v: string[] = [];
  const { faults } = options;
  if (c.push.lost) v.push(`${c.push.lost} (episode, endpoint) pushes lost: ${c.push.lostPairs.join(', ')}`);
  if (c.push.unexpected) v.push(`${c.push.unexpected} pushes reached an endpoint not owed them`);
  const outside = c.push.repeated - c.push.repeatedBy.kill;
  if (outside)
    v.push(`${outside} repeated pushes outside kill windows (${JSON.stringify(c.push.repeatedBy)})`);
  if (c.push.repeatsWithOtherTag)
    v.push(`${c.push.repeatsWithOtherTag} repeats differed from their first copy`);
  if (c.push.maxRepeatsPerKillAndEpisode > PUSH_REPEATS_PER_CRASH) {
    v.push(
      `one kill repeated ${c.push.maxRepeatsPerKillAndEpisode} sends of one episode (> ${PUSH_REPEATS_PER_CRASH})`,
    );
  }
  if (c.callbacks.lost)
    v.push(`${c.callbacks.lost} callbacks not delivered: ${c.callbacks.lostEpisodes.join(', ')}`);
  if (c.callbacks.unstableIds) v.push(`${c.callbacks.unstableIds} callbacks with an unstable webhook-id`);
  if (c.callbacks.badSignatures) v.push(`${c.callbacks.badSignatures} callbacks failed verification`);
  if (c.callbacks.unexpected) v.push(`${c.callbacks.unexpected} unexpected callbacks`);
  if (c.alerts.missing)
    v.push(`${c.alerts.missing} operator alerts missing: ${c.alerts.missingKeys.join(', ')}`);
  if (c.alerts.duplicates) {
    v.push(
      `${c.alerts.duplicates} operator alerts sent more than once: ${c.alerts.duplicateKeys.join(', ')}`,
    );
  }
  if (c.alerts.unexpected) v.push(`${c.alerts.unexpected} unexpected operator alerts`);
  v.push(...questionViolations(c.questions), ...endpointViolations(c.endpoints));
  if (c.claims.pendingPastGrace) v.push(`${c.claims.pendingPastGrace} claims left pending past the grace`);
  if (c.stuckSteps) v.push(`${c.stuckSteps} pauses whose push never settled`);
  for (const stuck of c.stuckRuns) v.push(`a run got stuck in the API: ${stuck}`);
  for (const error of c.runErrors) v.push(`a run could not be driven: ${error}`);
  if (c.finalSweep === undefined) v.push('the final sweep did not complete');
  else if (c.finalSweep.started) v.push(`the final sweep still found ${c.finalSweep.started} episodes owed`);
  if (c.workflows.failed.length) v.push(`workflows failed: ${c.workflows.failed.join(', ')}`);
  const openEpisodes = c.workflows.running.filter((w) => w.startsWith('episodeWorkflow/'));
  if (openEpisodes.length) v.push(`episode workflows still running: ${openEpisodes.join(', ')}`);
  // The drill must have done what it said.
  if (Number.isFinite(faults.workerKills) && c.faults.workerKills < faults.workerKills) {
    v.push(`only ${c.faults.workerKills} of ${faults.workerKills} worker kills happened`);
  }
  if (faults.temporalRestarts && options.stack.temporalServer && !c.faults.temporalRestarts) {
    v.push('the Temporal restart did not happen');
  }
  if (faults.mongoRestarts && options.stack.mongoServer && !c.faults.mongoRestarts) {
    v.push('the Mongo restart did not happen');
  }
  if (faults.mongoRestarts && faults.receiverFailures && options.stack.mongoServer) {
    if (!c.faults.mongoRestartDuringCallbackRetry)
      v.push('the Mongo restart did not meet a retrying callback');
  }
  return v;
}

/** A short human summary of the counts. */
export function formatDrill(c: DrillCounts): string {
  const p = c.push;
  return [
    `drill: ${c.runs} runs, ${c.episodes} episodes in ${c.durationSeconds.total.toFixed(0)} s ` +
      `(drive ${c.durationSeconds.drive.toFixed(0)} s, settle ${c.durationSeconds.settle.toFixed(0)} s)`,
    `  faults: ${c.faults.workerKills} worker SIGKILLs (${c.faults.workerStarts} starts, ` +
      `${c.faults.unexpectedWorkerExits} unexpected exits), ${c.faults.temporalRestarts} Temporal restart, ` +
      `${c.faults.mongoRestarts} Mongo restart${c.faults.mongoRestartDuringCallbackRetry ? ' (a callback retrying)' : ''}, push answered 500 x${c.faults.push500Answers} and 429 x${c.faults.push429Answers}, ` +
      `operator outage refused ${c.faults.opsOutage.refused} alert POSTs (${c.faults.opsOutage.refusedBeforeKill} before its worker kill)`,
    `  push: owed ${p.expected}, sent ${p.sent}, delivered ${p.delivered}, repeated ${p.repeated} ` +
      `(kill ${p.repeatedBy.kill}, temporal ${p.repeatedBy.temporal}, mongo ${p.repeatedBy.mongo}, none ${p.repeatedBy.none}; ` +
      `max ${p.maxRepeatsPerKillAndEpisode} per kill and episode), other tag ${p.repeatsWithOtherTag}, ` +
      `lost ${p.lost}, unexpected ${p.unexpected}`,
    `  callbacks: owed ${c.callbacks.expected}, delivered ${c.callbacks.delivered}, attempts ${c.callbacks.attempts} ` +
      `(${c.callbacks.retried} retried), unstable ids ${c.callbacks.unstableIds}, bad signatures ` +
      `${c.callbacks.badSignatures}, lost ${c.callbacks.lost}`,
    `  operator alerts: owed ${c.alerts.expected}, received ${c.alerts.received} ${JSON.stringify(c.alerts.byKind)}, ` +
      `duplicates ${c.alerts.duplicates} (repeated at a kill, same key: ${c.alerts.repeatedAtKill}), ` +
      `missing ${c.alerts.missing}, unexpected ${c.alerts.unexpected}`,
    formatQuestions(c.questions),
    formatEndpoints(c.endpoints),
    `  emits: API engine failures ${c.emits.apiEngineFailed}; in-process ${JSON.stringify(c.emits.inProcess)}; ` +
      `runner CLI ${JSON.stringify(c.emits.cli)}`,
    `  claims: ${c.claims.pending} pending (${c.claims.pendingPastGrace} past the grace); stuck pauses ${c.stuckSteps}; ` +
      `final sweep ${JSON.stringify(c.finalSweep)}`,
    `  workflows: ${c.workflows.total} ${JSON.stringify(c.workflows.byStatus)}` +
      (c.workflows.running.length ? `; running: ${c.workflows.running.join(', ')}` : ''),
    c.violations.length
      ? `  VIOLATIONS:\n${c.violations.map((x) => `    - ${x}`).join('\n')}`
      : '  invariants: all held',
  ].join('\n');
}
