// The fault drill, shared by `npm run drill` (test/drill/main.ts, full size, its own stack) and its small
// version in `npm test` (test/drill.test.ts, on a throwaway stack of its own).
//
// Runs are driven through the real API, each through a few pauses (human input, usage park) and an end
// (finished, failed, cancelled). Every outcome is emitted three times from two processes: once by the API's
// engine, once more by this (the API's) process through createOutcomeEmitter, and once by the runner CLI
// (`bin/flow-notify emit ... --disposition ack`) as a child process. Meanwhile, in turn and together: the worker
// process is SIGKILLed and restarted, the Temporal dev server and the Mongo-wire server are restarted, and the
// push service answers 500 to 30 % of requests for a while, then 429 with Retry-After to some. Questions are
// answered from their notification (a choice, or a snooze then the answer route) or the route, every other run
// climbing its team's escalation ladder first (test/drill/questions.ts); the first team's endpoints take every
// event they subscribed to through receivers that fail too (test/drill/endpoints.ts). Afterwards the drill settles
// (sweeps included), recovers the endpoints, then counts what every receiver got and checks the invariants.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import webpush from 'web-push';
import type { SweepReport } from '../../contract/workflows';
import { startApi, type ApiHandle } from '../../api/server';
import { createOutcomeEmitter, episodeOptions, type OutcomeEmitter } from '../../client/emitter';
import { loadConfig, type Config } from '../../config';
import { PROJECT_ROOT, type ServerProcess } from '../../platform/embedded';
import { createStores } from '../../store';
import { MongoClient, MongoServerSelectionError, type Db } from 'mongodb';
import { connectMongo, type Mongo } from '../../store/mongo';
import {
  CallbackReceiver,
  childProcessEnv,
  runScenario,
  startPushService,
  WorkerProcess,
  type PushService,
  type Step,
  type SubscriptionJSON,
} from '../support';
import { ApiClient } from '../support/harness';
import { deleteSweepSchedule, processStackVars } from '../support/processStack';
import { TEST_PUSH_BURST_LIMIT } from '../support/stack';
import { waitUntil } from '../support/waitUntil';
import { sweepWorkflow } from '../../workflows/sweep';
import {
  countEndpoints,
  endpointFaults,
  recoverEndpoints,
  registerEndpoints,
  type DrillEndpoint,
} from './endpoints';
import {
  answerQuestion,
  answerWay,
  countQuestions,
  DRILL_CHOICES,
  emptyQuestionTally,
  escalates,
  rungsSettled,
  rungUsersOf,
  setEscalationPolicies,
  type AnswerWay,
  type QuestionTally,
} from './questions';
import {
  checkInvariants,
  claimsOf,
  countAlerts,
  countCallbacks,
  countClaimsAndWorkflows,
  countPushes,
  type DrillCounts,
} from './counts';

export { drillViolations, formatDrill, type DrillCounts } from './counts';

export interface DrillStack {
  mongoUrl: string;
  temporalAddress: string;
  /** Needed for the Mongo restart (the drill skips it, and says so, without). */
  mongoServer?: ServerProcess;
  /** Needed for the Temporal restart. */
  temporalServer?: ServerProcess;
}

export interface DrillFaults {
  /** SIGKILLs of the worker process; Infinity: one every few seconds until 85 % of the drive. */
  workerKills: number;
  /** With workerKills = Infinity: seconds between a worker being ready and its kill, [min, max]. */
  killEverySeconds?: [number, number];
  /** Restarts of the Temporal dev server (0 or 1), at 30 % of the drive. */
  temporalRestarts: number;
  /** Restarts of the Mongo-wire server (0 or 1), at 60 % of the drive. */
  mongoRestarts: number;
  /** Fraction of push requests answered 500 from 10 % to 45 % of the drive. */
  push500Ratio: number;
  /** Fraction answered 429 with Retry-After from 45 % to 75 % of the drive. */
  push429Ratio: number;
  /** Callback and operator receivers answer a few 5xx/429 along the way. */
  receiverFailures: boolean;
  /**
   * At half the drive the operator webhook goes down (503) until alerts are retrying, the worker is SIGKILLed
   * meanwhile, and the webhook comes back a few seconds after: the retrying alerts must still arrive, once.
   */
  opsOutageKill?: boolean;
}

export const FULL_FAULTS: DrillFaults = {
  workerKills: Infinity,
  killEverySeconds: [4, 8],
  temporalRestarts: 1,
  mongoRestarts: 1,
  push500Ratio: 0.3,
  push429Ratio: 0.2,
  receiverFailures: true,
  opsOutageKill: true,
};

export interface DrillOptions {
  stack: DrillStack;
  runs: number;
  /** Episodes per run: the pauses before the end, plus the end. At least 1. */
  episodesPerRun: number;
  faults: DrillFaults;
  log?: (line: string) => void;
  /** How many runner CLI processes may run at once. */
  cliConcurrency?: number;
  /** How many runs are driven at once (the rest wait their turn). */
  runConcurrency?: number;
  /** How long the settle phase may take before the drill counts what is still open. */
  settleTimeoutMs?: number;
  /** How long one pause may wait for its push to settle before the run moves on regardless. */
  stepTimeoutMs?: number;
}

export interface FaultWindow {
  kind: 'kill' | 'temporal' | 'mongo';
  from: number;
  to: number;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const between = (min: number, max: number) => min + Math.random() * (max - min);

/** Runner CLI processes in flight; killed if this process exits early (Ctrl-C, a crash). */
const liveChildren = new Set<ChildProcess>();
process.once('exit', () => {
  for (const child of liveChildren) child.kill('SIGKILL');
});

/** Limits how many of something run at once. */
function semaphore(limit: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    active++;
    try {
      return await task();
    } finally {
      active--;
      waiting.shift()?.();
    }
  };
}

interface TeamPlan {
  id: string;
  owners: string[];
  /** user → their endpoints */
  endpoints: Map<string, SubscriptionJSON[]>;
  /** Users who chose team-wide scope. */
  teamWide: string[];
  /** Each escalation rung's person (one device each, owed nothing else). */
  rungUsers: string[];
}

type EndKind = 'complete' | 'fail' | 'cancel';

export interface RunPlan {
  index: number;
  team: TeamPlan;
  owner: string;
  withCallback: boolean;
  end: EndKind;
  /** A router decision error reported for this run (three times). */
  routeError: boolean;
  id?: string;
  secret?: string;
}

export interface EpisodePlan {
  episodeId: string;
  run: RunPlan;
  kind: 'input' | 'park' | 'end';
  /** A question's. */
  interactionId?: string;
  answer?: AnswerWay;
}

interface ApiRun {
  id: string;
  status: string;
  pause?: { reason: string; seq: number; interactionId?: string; wall?: string };
}

/** Every receiver's scripted failures: the `count` requests from index `from` on were the ones refused. */
interface ScriptedFailures {
  receiver: CallbackReceiver;
  from: number;
  count: number;
}

/** What the drill's steps share. Each step fills in what later steps use; the scenario below gives the order. */
export interface Drill {
  options: DrillOptions;
  stack: DrillStack;
  faults: DrillFaults;
  log: (line: string) => void;
  started: number;
  suffix: string;
  graceSeconds: number;
  /** Run in reverse order when the drill ends, whatever happened. */
  cleanup: (() => Promise<unknown>)[];
  /** Set when the drill ends: a worker that exits then is not restarted. */
  stopping: boolean;

  // The outside parties (loopback stand-ins).
  push: PushService;
  callbacks: CallbackReceiver;
  opsWebhook: CallbackReceiver;
  /** The first team's endpoints, each on a receiver of its own. */
  endpoints: DrillEndpoint[];

  // The system under test: the API in this process, the worker as a child process, the runner CLI as more.
  vars: Record<string, string>;
  config: Config;
  api: ApiHandle;
  /** The drill's own reads (claims), through a client that reconnects when it stops selecting a server. */
  observer: ReturnType<typeof observingDb>;
  client: Client;
  emitter: OutcomeEmitter;
  worker: WorkerProcess;
  /** One lock for everything that stops or starts the worker, so a crash restart and a kill never overlap. */
  workerLock: Promise<void>;
  /** The API as nobody in particular; `.as(user, team)` for a caller. */
  anonymous: ApiClient;
  cliSlot: <T>(task: () => Promise<T>) => Promise<T>;
  cliEnv: Record<string, string>;

  // The plan, and how far the drive got through it.
  teams: TeamPlan[];
  runs: RunPlan[];
  episodes: EpisodePlan[];
  totalSteps: number;
  stepsDone: number;
  driveDone: boolean;

  // What happened.
  windows: FaultWindow[];
  scripted: ScriptedFailures[];
  kills: number[];
  tally: {
    apiEngineFailed: number;
    inProcess: DrillCounts['emits']['inProcess'];
    cli: DrillCounts['emits']['cli'];
    temporalRestarts: number;
    mongoRestarts: number;
    mongoRestartDuringCallbackRetry: boolean;
    opsOutage: DrillCounts['faults']['opsOutage'];
    stuckSteps: number;
    stuckRuns: string[];
    runErrors: string[];
    questions: QuestionTally;
  };
  driveSeconds: number;
  settleSeconds: number;
  finalSweep?: SweepReport;

  // The counts, one step each.
  pushCounts: DrillCounts['push'];
  callbackCounts: DrillCounts['callbacks'];
  alertCounts: DrillCounts['alerts'];
  /** Alert POSTs the operator webhook refused on purpose (counted when the alerts are). */
  refusedAlertPosts: number;
  claimCounts: DrillCounts['claims'];
  workflowCounts: DrillCounts['workflows'];
  questionCounts: DrillCounts['questions'];
  endpointCounts: DrillCounts['endpoints'];
  /** Everything counted, with the invariants it breaks: the drill's result. */
  result: DrillCounts;
}

/** The drill, in order: set up, drive through the faults, settle, count. */
const DRILL_SCENARIO: Step<Drill>[] = [
  startOutsideParties,
  configureTheSystem,
  startApiAndClients,
  startWorkerProcess,
  subscribeTeams,
  setEscalationPolicies,
  registerEndpoints,
  planRuns,
  driveRunsThroughFaults,
  settle,
  recoverEndpoints,
  countPushes,
  countCallbacks,
  countAlerts,
  countQuestions,
  countEndpoints,
  countClaimsAndWorkflows,
  checkInvariants,
];

export async function runDrill(options: DrillOptions): Promise<DrillCounts> {
  const drill = {
    options,
    stack: options.stack,
    faults: options.faults,
    log: options.log ?? (() => undefined),
    started: Date.now(),
    suffix: randomBytes(4).toString('hex'),
    graceSeconds: 10,
    cleanup: [],
    stopping: false,
    workerLock: Promise.resolve(),
    episodes: [],
    stepsDone: 0,
    driveDone: false,
    windows: [],
    scripted: [],
    kills: [],
    tally: {
      apiEngineFailed: 0,
      inProcess: { started: 0, refused: 0, failed: 0 },
      cli: { started: 0, refused: 0, notEmitted: 0, failed: 0 },
      temporalRestarts: 0,
      mongoRestarts: 0,
      mongoRestartDuringCallbackRetry: false,
      opsOutage: { refused: 0, refusedBeforeKill: 0 },
      stuckSteps: 0,
      stuckRuns: [],
      runErrors: [],
      questions: emptyQuestionTally(),
    },
  } as unknown as Drill; // the steps fill in the rest, in the scenario's order
  await runScenario(drill, DRILL_SCENARIO, tearDown);
  return drill.result;
}

// ---------------------------------------------------------------------------------------------------------------
// Set-up

async function startOutsideParties(drill: Drill): Promise<void> {
  drill.push = await startPushService();
  drill.cleanup.push(() => drill.push.close());
  drill.callbacks = await CallbackReceiver.start();
  drill.cleanup.push(() => drill.callbacks.close());
  drill.opsWebhook = await CallbackReceiver.start();
  drill.cleanup.push(() => drill.opsWebhook.close());
}

function configureTheSystem(drill: Drill): void {
  const { stack, suffix } = drill;
  const vapid = webpush.generateVAPIDKeys();
  drill.vars = processStackVars(
    { db: 'drill', queue: 'drill', suffix, stack },
    {
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:drill@flow.test',
      PUSH_ALLOW_PRIVATE: '1',
      // The crowd user stands for a team's many devices (24 endpoints): above the default 20 per user.
      PUSH_MAX_SUBSCRIPTIONS_PER_USER: '32',
      // Its oracle counts each episode's push on every endpoint, so every push goes out at once; holds and
      // digests under the default bound are the week drill's (test/drill/week.ts).
      PUSH_BURST_LIMIT: TEST_PUSH_BURST_LIMIT,
      CALLBACK_ALLOW_PRIVATE: '1',
      OPS_ALERT_WEBHOOK_URL: drill.opsWebhook.url,
      STUDIO_URL: 'https://studio.flow.test',
      SWEEP_INTERVAL_SECONDS: '5',
      CLAIM_GRACE_SECONDS: String(drill.graceSeconds),
      // An alert's tries are a third of that grace apart: an hour of them fits its workflow's history.
      OPS_ALERT_RETRY_HOURS: '1',
      CALLBACK_RETRY_SECONDS: '1,1,2,2,4,8',
      CALLBACK_TIMEOUT_SECONDS: '5',
      HEALTH_REAP_SECONDS: '3',
      PORT: '0',
    },
  );
  drill.config = loadConfig(drill.vars);
}

/** The API in this process, its store, the drill's own Mongo observer, a Temporal client and an emitter. */
async function startApiAndClients(drill: Drill): Promise<void> {
  const { config, cleanup, tally } = drill;
  drill.api = await startApi(config, {
    log: (line) => {
      if (line.includes('outcome emit for')) tally.apiEngineFailed++;
    },
  });
  cleanup.push(() => drill.api.close());
  drill.anonymous = new ApiClient(drill.api.url);
  // The in-process emitter reads runs like the API does, through the production connection.
  const mongo: Mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  cleanup.push(() => mongo.client.close());
  // The drill's own reads (claims) go through an observer that reconnects when its client stops selecting a
  // server, so a wedged client in the drill never passes for a fault of the system under test.
  drill.observer = observingDb(config.mongoUrl, config.mongoDb, drill.log);
  cleanup.push(() => drill.observer.close());
  const stores = createStores(mongo.db, { claimGraceSeconds: drill.graceSeconds });
  const connection = await Connection.connect({ address: config.temporalAddress });
  cleanup.push(() => connection.close());
  drill.client = new Client({ connection, namespace: config.temporalNamespace });
  cleanup.push(() => deleteSweepSchedule(drill.client, config.temporalTaskQueue));
  drill.emitter = createOutcomeEmitter({
    client: drill.client,
    taskQueue: config.temporalTaskQueue,
    runs: stores.runs,
    options: episodeOptions(config),
  });
  drill.cliSlot = semaphore(drill.options.cliConcurrency ?? 2);
  drill.cliEnv = childProcessEnv({ ...drill.vars, FLOW_NOTIFY_FROM_SOURCE: '1' }); // the code as it is, not a stale dist/
}

/** The worker as a child process, restarted when it exits on its own. */
async function startWorkerProcess(drill: Drill): Promise<void> {
  drill.worker = await WorkerProcess.start({
    vars: drill.vars,
    trustCa: drill.push.ca,
    onUnexpectedExit: (exit) => {
      drill.log(
        `drill: the worker exited on its own (${exit.signal ?? exit.code}):\n${exit.tail.slice(-1500)}`,
      );
      if (!drill.stopping) void withWorker(drill, (w) => startUntilReady(drill, w)).catch(() => undefined);
    },
  });
  drill.cleanup.push(() => drill.worker.stop());
}

function withWorker(drill: Drill, task: (w: WorkerProcess) => Promise<void>): Promise<void> {
  const next = drill.workerLock.then(() => task(drill.worker));
  drill.workerLock = next.catch(() => undefined);
  return next;
}

async function startUntilReady(drill: Drill, w: WorkerProcess): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await w.start();
      return;
    } catch (err) {
      drill.log(`drill: worker start ${attempt} failed: ${String(err).split('\n')[0]}`);
      if (attempt >= 20) throw err;
      await sleep(1000);
    }
  }
}

/**
 * Teams, users, endpoints. Each team: two owners (2 and 1 endpoints), a watcher who chose team-wide scope, a
 * bystander who did not (owed nothing), and a person per escalation rung (owed only the rung's push). Team 0 also
 * has a crowd of 24 team-wide endpoints, wider than the fan-out, so kills catch full lanes in flight.
 */
async function subscribeTeams(drill: Drill): Promise<void> {
  const teamCount = Math.max(1, Math.ceil(drill.options.runs / 5));
  drill.teams = [];
  for (let t = 0; t < teamCount; t++) {
    const id = `team${t}-${drill.suffix}`;
    const users: [string, number, boolean][] = [
      [`t${t}-owner-a`, 2, false],
      [`t${t}-owner-b`, 1, false],
      [`t${t}-watcher`, 1, true],
      [`t${t}-bystander`, 1, false],
      ...(t === 0 ? [[`t${t}-crowd`, 24, true] as [string, number, boolean]] : []),
      ...rungUsersOf(t).map((user) => [user, 1, false] as [string, number, boolean]),
    ];
    const team: TeamPlan = {
      id,
      owners: [users[0][0], users[1][0]],
      endpoints: new Map(),
      teamWide: [],
      rungUsers: rungUsersOf(t),
    };
    for (const [user, count, teamWide] of users) {
      const as = drill.anonymous.as(user, id);
      const subs = Array.from({ length: count }, (_, i) => drill.push.endpoint(`${user}-${i}`));
      for (const sub of subs) {
        const res = await call(as, 'POST', '/api/v1/notifications/push/subscriptions', sub);
        if (res.status !== 201) throw new Error(`subscribe: ${res.status} ${res.text}`);
      }
      team.endpoints.set(user, subs);
      if (teamWide) {
        team.teamWide.push(user);
        const res = await call(as, 'PUT', '/api/v1/notifications/prefs', { scope: 'team' });
        if (res.status !== 200) throw new Error(`prefs: ${res.status} ${res.text}`);
      }
    }
    drill.teams.push(team);
  }
}

/** Which team and owner each run has, whether it asks for a callback, how it ends, and whether it reports. */
function planRuns(drill: Drill): void {
  const { teams, options } = drill;
  const ends: EndKind[] = ['complete', 'fail', 'complete', 'cancel'];
  drill.runs = Array.from({ length: options.runs }, (_, index) => ({
    index,
    team: teams[index % teams.length],
    owner: teams[index % teams.length].owners[Math.floor(index / teams.length) % 2],
    withCallback: index % 3 !== 2,
    end: ends[index % ends.length],
    routeError: index % 5 === 0,
  }));
  drill.totalSteps = options.runs * Math.max(1, options.episodesPerRun);
}

const progress = (drill: Drill): number => drill.stepsDone / drill.totalSteps;

// ---------------------------------------------------------------------------------------------------------------
// The drive: every run through its pauses to its end, while the faults land

async function driveRunsThroughFaults(drill: Drill): Promise<void> {
  const { push, callbacks, opsWebhook, kills, tally } = drill;
  const runSlot = semaphore(drill.options.runConcurrency ?? 10);
  const driveStarted = Date.now();
  const ticker = setInterval(() => {
    drill.log(
      `drill: ${drill.stepsDone}/${drill.totalSteps} steps, ${push.received().length} pushes, ` +
        `${callbacks.received.length} callbacks, ${opsWebhook.received.length} alerts, ${kills.length} kills`,
    );
  }, 10_000);
  const faultLoops = Promise.all([killWorkers(drill), faultServers(drill)]);
  try {
    await Promise.all(
      drill.runs.map((run) =>
        runSlot(() => driveRun(drill, run)).catch((err: unknown) => {
          const reason = `run ${run.index} (${run.id}): ${err instanceof Error ? err.message : String(err)}`;
          tally.runErrors.push(reason);
          drill.log(`drill: DRIVE ERROR: ${reason}`);
        }),
      ),
    );
  } finally {
    drill.driveDone = true;
    clearInterval(ticker);
    await faultLoops;
  }
  drill.driveSeconds = (Date.now() - driveStarted) / 1000;
  drill.log(`drill: drive done in ${drill.driveSeconds.toFixed(1)} s; settling`);
}

/** One run: created, through its pauses (each emitted three times, its push settled), to its end. */
async function driveRun(drill: Drill, run: RunPlan): Promise<void> {
  const { options, episodes } = drill;
  // Staggered, so the runs are at different steps when faults land.
  await sleep((run.index % (options.runConcurrency ?? 10)) * 300);
  const as = drill.anonymous.as(run.owner, run.team.id);
  const created = await call(as, 'POST', '/api/v1/runs', {
    title: `Drill run ${run.index}`,
    ...(run.withCallback ? { callback: { url: drill.callbacks.url } } : {}),
    // The runs that do not climb their team's ladder opt out at launch.
    ...(escalates(run) ? {} : { escalation: { rungs: [] } }),
  });
  if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`);
  run.id = created.body.id as string;
  run.secret = created.body.callback?.secret as string | undefined;
  const runId = run.id;

  for (let step = 0; step < options.episodesPerRun - 1; step++) {
    let episodeId: string;
    if (step % 2 === 0) {
      const answer = answerWay(run, step);
      const paused = await transition(
        as,
        runId,
        'pause',
        {
          prompt: `Approve step ${step} of run ${run.index}?`,
          ...(answer === 'choice' ? { choices: DRILL_CHOICES } : {}),
        },
        (r) => r.status === 'paused' && r.pause?.reason === 'human_input' && r.pause.seq === step + 1,
      );
      const interactionId = paused.pause?.interactionId;
      episodeId = `${runId}:input:${interactionId}`;
      const episode: EpisodePlan = { episodeId, run, kind: 'input', interactionId, answer };
      episodes.push(episode);
      await emitTwiceMore(drill, run);
      await pushSettled(drill, episodeId);
      if (escalates(run)) await rungsSettled(drill, episode);
      try {
        await answerQuestion(drill, episode, call, () =>
          transition(
            as,
            runId,
            `interactions/${interactionId}/answer`,
            { answer: 'yes' },
            (r) => r.status === 'running',
          ),
        );
      } catch (err) {
        // The run cannot be answered any more (seen after a Mongo restart before the engine's answer became
        // retry-safe: the answer was stored, the transition was not, and the retry was refused as "already
        // answered"). Counted as a violation, and the run is cancelled so the drill goes on.
        const reason = err instanceof Error ? err.message : String(err);
        drill.tally.stuckRuns.push(reason);
        drill.log(`drill: STUCK RUN: ${reason}`);
        run.end = 'cancel';
        drill.stepsDone += options.episodesPerRun - 1 - step;
        break;
      }
    } else {
      const parked = await transition(
        as,
        runId,
        'park',
        { wall: 'monthly_usd' },
        (r) => r.status === 'paused' && r.pause?.reason === 'usage_park' && r.pause.seq === step + 1,
      );
      episodeId = `${runId}:park:${parked.pause?.wall}:${parked.pause?.seq}`;
      episodes.push({ episodeId, run, kind: 'park' });
      await emitTwiceMore(drill, run);
      await pushSettled(drill, episodeId);
      await transition(as, runId, 'resume', {}, (r) => r.status === 'running');
    }
    drill.stepsDone++;
  }

  const endBody =
    run.end === 'complete'
      ? { finalAnswer: `Run ${run.index} done.` }
      : run.end === 'fail'
        ? { error: { code: run.index % 8 === 1 ? 'database' : 'tool_crashed', message: 'boom' } }
        : {};
  await transition(as, runId, run.end, endBody, (r) =>
    ['finished', 'failed', 'cancelled'].includes(r.status),
  );
  episodes.push({ episodeId: `${runId}:end`, run, kind: 'end' });
  const reports = run.routeError
    ? Array.from({ length: 3 }, () =>
        call(as, 'POST', `/api/v1/runs/${runId}/route-decision-errors`, {
          decisionId: 'd1',
          error: { code: 'no_route', message: 'no model matched' },
        }),
      )
    : [];
  await Promise.all([emitTwiceMore(drill, run), ...reports]);
  drill.stepsDone++;
}

/** One API call, retried while the API answers 5xx or cannot be reached (a server is restarting). */
async function call(as: ApiClient, method: string, route: string, body?: unknown) {
  for (let attempt = 1; ; attempt++) {
    try {
      const res = await as.request(method, route, body);
      if (res.status < 500) return res;
      if (attempt >= 60) throw new Error(`${method} ${route}: ${res.status} ${res.text}`);
    } catch (err) {
      if (attempt >= 60) throw err;
    }
    await sleep(500);
  }
}

/** A run transition; a 409 after a retried call may mean an earlier try already applied it. */
async function transition(
  as: ApiClient,
  runId: string,
  op: string,
  body: unknown,
  applied: (run: ApiRun) => boolean,
): Promise<ApiRun & { interactionId?: string }> {
  const res = await call(as, 'POST', `/api/v1/runs/${runId}/${op}`, body);
  if (res.status === 200) return (res.body.run ?? res.body) as ApiRun;
  const run = (await call(as, 'GET', `/api/v1/runs/${runId}`)).body as ApiRun;
  if (res.status === 409 && applied(run)) return run;
  throw new Error(`${op} of ${runId}: ${res.status} ${res.text}`);
}

/**
 * Emits: the API engine's own (inside each transition), then two more at once: this process's emitter and the
 * runner CLI.
 */
async function emitTwiceMore(drill: Drill, run: RunPlan): Promise<void> {
  const { inProcess } = drill.tally;
  await Promise.all([
    drill.emitter.emitRunOutcome(run.id!).then(
      (result) => void (result?.started ? inProcess.started++ : inProcess.refused++),
      (err: unknown) => {
        inProcess.failed++;
        drill.log(`drill: in-process emit for ${run.id} failed: ${String(err).split('\n')[0]}`);
      },
    ),
    emitFromRunnerCli(drill, run),
  ]);
}

/** `bin/flow-notify emit ... --disposition ack` as a child process, as a runner would call it. */
function emitFromRunnerCli(drill: Drill, run: RunPlan): Promise<void> {
  const { cli } = drill.tally;
  return drill.cliSlot(
    () =>
      new Promise<void>((resolve) => {
        const child = spawn(
          path.join(PROJECT_ROOT, 'bin/flow-notify'),
          ['emit', '--run', run.id!, '--team', run.team.id, '--disposition', 'ack'],
          { cwd: PROJECT_ROOT, env: drill.cliEnv, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        liveChildren.add(child);
        let out = '';
        let err = '';
        child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
        child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
        child.on('exit', (code) => {
          liveChildren.delete(child);
          if (code !== 0) {
            cli.failed++;
            drill.log(`drill: runner CLI for ${run.id} exited ${code}: ${err.trim().split('\n').pop()}`);
          } else {
            try {
              const result = JSON.parse(out.trim().split('\n').pop() ?? '') as {
                emitted: boolean;
                started?: boolean;
              };
              if (!result.emitted) cli.notEmitted++;
              else if (result.started) cli.started++;
              else cli.refused++;
            } catch {
              cli.failed++;
            }
          }
          resolve();
        });
      }),
  );
}

/** Waits until the episode's push claim is settled: the run only moves on from a pause once it is. */
async function pushSettled(drill: Drill, episodeId: string): Promise<void> {
  const settled = await waitUntil(
    `the push of ${episodeId} settled`,
    async () => (await drill.observer.use((d) => claimsOf(d).findOne({ _id: episodeId })))?.delivered,
    // An error is Mongo restarting.
    { timeoutMs: drill.options.stepTimeoutMs ?? 240_000, intervalMs: 250, errorsMeanNotYet: true },
  ).then(
    () => true,
    () => false,
  );
  if (settled) return;
  drill.tally.stuckSteps++;
  drill.log(`drill: the push of ${episodeId} did not settle in time; moving on`);
}

// ---------------------------------------------------------------------------------------------------------------
// Faults, driven by the drive's progress so they land mid-drive whatever the machine's speed

function killWorkerOnce(drill: Drill): Promise<void> {
  return withWorker(drill, async (w) => {
    await w.kill();
    const at = Date.now();
    drill.kills.push(at);
    drill.windows.push({ kind: 'kill', from: at - 3000, to: at + 1000 });
    drill.log(
      `drill: worker SIGKILLed (kill ${drill.kills.length}, ${Math.round(progress(drill) * 100)} % driven)`,
    );
    await startUntilReady(drill, w);
  });
}

/** Worker SIGKILLs: every few seconds until 85 % of the drive, or a given number spread over it. */
async function killWorkers(drill: Drill): Promise<void> {
  const { faults } = drill;
  if (faults.workerKills === Infinity) {
    const [min, max] = faults.killEverySeconds ?? [3, 6];
    while (!drill.driveDone && progress(drill) < 0.85) {
      await sleep(between(min, max) * 1000);
      if (drill.driveDone || progress(drill) >= 0.85) break;
      await killWorkerOnce(drill);
    }
    return;
  }
  for (let k = 0; k < faults.workerKills; k++) {
    const at = 0.15 + (0.7 * (k + 0.5)) / faults.workerKills;
    while (!drill.driveDone && progress(drill) < at) await sleep(100);
    if (drill.driveDone) break;
    // Aim for the middle of a fan-out: a moment when the push service has just accepted a message.
    // Not for ever: with no such moment in 15 s, the kill lands anyway.
    await waitUntil(
      'a push just accepted',
      () => {
        const last = drill.push.received().at(-1);
        return last && Date.now() - last.at.getTime() < 15;
      },
      { timeoutMs: 15_000, intervalMs: 2 },
    ).catch(() => undefined);
    await killWorkerOnce(drill);
  }
}

async function restartServer(
  drill: Drill,
  kind: 'temporal' | 'mongo',
  server: ServerProcess | undefined,
): Promise<void> {
  if (!server) {
    drill.log(`drill: no ${kind} server process to restart (external server); skipped`);
    return;
  }
  const from = Date.now();
  await server.restart();
  drill.windows.push({ kind, from: from - 1000, to: Date.now() + (kind === 'temporal' ? 15_000 : 6000) });
  if (kind === 'temporal') drill.tally.temporalRestarts++;
  else drill.tally.mongoRestarts++;
  drill.log(
    `drill: ${kind} restarted in ${Date.now() - from} ms (${Math.round(progress(drill) * 100)} % driven)`,
  );
}

/**
 * The Mongo restart lands while a callback is retrying: the receiver refuses the next few attempts, and the
 * restart begins right after the first refusal, while that callback's branch holds its claim and waits on its
 * retry timer (its next attempt reads the run from the restarting store). Without receiver failures, or if no
 * callback comes within a step's timeout, it restarts anyway (and the counts say so). Not a fixed minute: in a
 * small drill the first callbacks come with the first run ends, late in the drive, and a loaded machine (the
 * suites run side by side) can take longer than that to get there.
 */
async function restartMongoWhileCallbackRetries(drill: Drill): Promise<void> {
  const { callbacks, tally } = drill;
  if (drill.faults.receiverFailures && drill.stack.mongoServer) {
    // Refusals still queued from an earlier fault refuse the next attempt as well: more queued on top of them could
    // all fall on one callback and outlast its schedule (7 attempts), which the drill counts as lost.
    if (!callbacks.pendingAnswers) {
      drill.scripted.push({ receiver: callbacks, from: callbacks.received.length, count: 4 });
      callbacks.answer({ status: 503 }, { status: 503 }, { status: 503 }, { status: 503 });
    }
    const from = callbacks.received.length;
    const waitMs = drill.options.stepTimeoutMs ?? 240_000;
    tally.mongoRestartDuringCallbackRetry = await waitUntil(
      'a callback attempt refused',
      () => callbacks.received.length > from,
      { timeoutMs: waitMs, intervalMs: 20 },
    ).catch(() => false);
    drill.log(
      tally.mongoRestartDuringCallbackRetry
        ? 'drill: a callback attempt was just refused (its branch is retrying): restarting Mongo'
        : `drill: no callback came within ${waitMs / 1000} s: restarting Mongo without one retrying`,
    );
  }
  await restartServer(drill, 'mongo', drill.stack.mongoServer);
}

/**
 * At half the drive the operator webhook goes down (503) until an alert is retrying, the worker is SIGKILLed
 * meanwhile, and the webhook comes back a few seconds after.
 */
async function opsOutageWithWorkerKill(drill: Drill): Promise<void> {
  const { opsWebhook, tally } = drill;
  const from = opsWebhook.received.length;
  opsWebhook.answerAlways({ status: 503 });
  drill.log('drill: operator webhook down (503)');
  // Alerts come with failed ends and router reports; wait for one to be refused (it is then retrying).
  // Not for ever: with no alert by then, the kill lands anyway (and the counts say so).
  await waitUntil('an alert refused', () => opsWebhook.received.length > from || drill.driveDone, {
    timeoutMs: 90_000,
    intervalMs: 200,
  }).catch(() => undefined);
  tally.opsOutage.refusedBeforeKill = opsWebhook.received.length - from;
  await killWorkerOnce(drill);
  await sleep(5000);
  // Every POST the outage saw was refused; registering them and lifting it is one synchronous step.
  const count = opsWebhook.received.length - from;
  drill.scripted.push({ receiver: opsWebhook, from, count });
  opsWebhook.answerAlways({ status: 204 });
  tally.opsOutage.refused = count;
  drill.log(
    `drill: operator webhook back after ${count} refused alert POSTs ` +
      `(${tally.opsOutage.refusedBeforeKill} before the worker kill)`,
  );
}

/**
 * Push service failures, receiver failures, server restarts, the operator outage and the endpoints' faults
 * (test/drill/endpoints.ts), each at its point.
 */
async function faultServers(drill: Drill): Promise<void> {
  const { faults, push, callbacks, opsWebhook, scripted } = drill;
  const plan: [number, () => unknown][] = [
    [0.1, () => faults.push500Ratio > 0 && push.failRatio(faults.push500Ratio, 500)],
    [
      0.2,
      () => {
        if (!faults.receiverFailures) return;
        scripted.push({ receiver: callbacks, from: callbacks.received.length, count: 3 });
        callbacks.answer({ status: 503 }, { status: 500 }, { status: 429, headers: { 'retry-after': '1' } });
        scripted.push({ receiver: opsWebhook, from: opsWebhook.received.length, count: 2 });
        opsWebhook.answer({ status: 500 }, { status: 502 });
      },
    ],
    [0.3, () => faults.temporalRestarts > 0 && restartServer(drill, 'temporal', drill.stack.temporalServer)],
    [
      0.45,
      () => {
        if (faults.push429Ratio > 0) push.failRatio(faults.push429Ratio, 429, { 'retry-after': '1' });
        else push.failRatio(0);
      },
    ],
    [0.5, () => faults.opsOutageKill && opsOutageWithWorkerKill(drill)],
    [0.6, () => faults.mongoRestarts > 0 && restartMongoWhileCallbackRetries(drill)],
    [
      0.65,
      () => {
        // None while earlier refusals are queued (see restartMongoWhileCallbackRetries).
        if (!faults.receiverFailures || callbacks.pendingAnswers) return;
        scripted.push({ receiver: callbacks, from: callbacks.received.length, count: 2 });
        callbacks.answer({ status: 500 }, { status: 503 });
      },
    ],
    [0.75, () => push.failRatio(0)],
    ...endpointFaults(drill),
  ];
  plan.sort(([a], [b]) => a - b);
  // Each fault starts at its point of the drive and runs on its own: one that waits for its moment (the
  // operator outage waits for a refused alert) never holds back the ones after it.
  const started: Promise<unknown>[] = [];
  for (const [at, fault] of plan) {
    while (!drill.driveDone && progress(drill) < at) await sleep(100);
    if (drill.driveDone) break;
    started.push(Promise.resolve(fault()));
  }
  await Promise.all(started);
}

// ---------------------------------------------------------------------------------------------------------------
// Settle: faults off, a live worker, and sweeps until every owed claim is delivered and nothing is running

async function settle(drill: Drill): Promise<void> {
  const { observer, log } = drill;
  drill.push.failRatio(0);
  const settleStarted = Date.now();
  await withWorker(drill, async (w) => {
    if (!w.running) await startUntilReady(drill, w);
  });
  const settleDeadline = Date.now() + (drill.options.settleTimeoutMs ?? 300_000);
  let lastSweep = Date.now();
  for (;;) {
    let unsettled = -1;
    let open = -1;
    let pending = -1;
    try {
      const keys = owedClaimKeys(drill.episodes);
      const delivered = await observer.use((d) =>
        claimsOf(d).countDocuments({ _id: { $in: keys }, delivered: true }),
      );
      unsettled = keys.length - delivered;
      pending = await observer.use((d) => claimsOf(d).countDocuments({ delivered: false }));
      open = await openEpisodes(drill);
    } catch (err) {
      log(`drill: settle check failed: ${String(err)}`);
    }
    if (unsettled === 0 && open === 0 && pending === 0) break;
    if (Date.now() > settleDeadline) {
      log(`drill: settle timed out: ${unsettled} owed claims unsettled, ${open} open, ${pending} pending`);
      break;
    }
    if (Date.now() - lastSweep > 15_000) {
      log(`drill: settling: ${unsettled} owed claims unsettled, ${open} episodes open; sweeping`);
      await sweep(drill);
      lastSweep = Date.now();
    }
    await sleep(1000);
  }
  drill.finalSweep = await sweep(drill);
  // Let the run-health workflows reap (HEALTH_REAP_SECONDS) and the sweep's own schedule finish its pass.
  await sleep(4000);
  drill.settleSeconds = (Date.now() - settleStarted) / 1000;
}

/** The claim of every family each episode owes: its push, its callback, its operator alerts. */
function owedClaimKeys(episodes: EpisodePlan[]): string[] {
  return episodes.flatMap((e) => [
    e.episodeId,
    ...(e.kind === 'end' && e.run.withCallback ? [`cb|${e.episodeId}`] : []),
    ...(e.kind === 'end' && e.run.end === 'fail' ? [`ops|${e.episodeId}`] : []),
    ...(e.kind === 'end' && e.run.routeError ? [`ops|route:${e.run.id}:d1`] : []),
  ]);
}

async function sweep(drill: Drill): Promise<SweepReport | undefined> {
  try {
    return (await Promise.race([
      drill.client.workflow.execute(sweepWorkflow, {
        taskQueue: drill.config.temporalTaskQueue,
        workflowId: `drill-sweep-${Date.now()}`,
      }),
      sleep(60_000).then(() => undefined),
    ])) as SweepReport | undefined;
  } catch (err) {
    drill.log(`drill: sweep failed: ${String(err)}`);
    return undefined;
  }
}

async function openEpisodes(drill: Drill): Promise<number> {
  let open = 0;
  for await (const _ of drill.client.workflow.list({
    query: `TaskQueue = "${drill.config.temporalTaskQueue}" AND ExecutionStatus = "Running" AND WorkflowType IN ("episodeWorkflow", "operatorAlertWorkflow", "interactionWorkflow", "teamEventWorkflow")`,
  }))
    open++;
  return open;
}

/** Stops what the drill started, in reverse, and leaves the servers running for whoever uses them next. */
async function tearDown(drill: Drill): Promise<void> {
  drill.stopping = true;
  for (const child of liveChildren) child.kill('SIGKILL');
  for (const step of drill.cleanup.reverse()) {
    try {
      await step();
    } catch (err) {
      drill.log(`drill: cleanup: ${String(err)}`);
    }
  }
  for (const server of [drill.stack.temporalServer, drill.stack.mongoServer]) {
    if (server && !server.running) await server.start().catch(() => undefined);
  }
}

/**
 * A Mongo connection for the drill's own reads: a client that fails server selection is dropped and a new one is
 * made on the next use, so a wedged client in the drill never passes for a fault of the system under test (after
 * a Mongo-wire restart a MongoClient could stay wedged; store/mongo.ts failWritesOnDeadSockets fixes that for
 * every client in the process, this one included, and the reconnect stays as a belt and braces).
 */
function observingDb(url: string, dbName: string, log: (line: string) => void) {
  let pending: Promise<MongoClient> | undefined;
  const get = (): Promise<MongoClient> => {
    pending ??= new MongoClient(url, { serverSelectionTimeoutMS: 3000, connectTimeoutMS: 3000 })
      .connect()
      .catch((err: unknown) => {
        pending = undefined;
        throw err;
      });
    return pending;
  };
  return {
    async use<T>(read: (db: Db) => Promise<T>): Promise<T> {
      const current = get();
      const client = await current;
      try {
        return await read(client.db(dbName));
      } catch (err) {
        if (err instanceof MongoServerSelectionError && pending === current) {
          log(`drill: the observer's Mongo client failed server selection (${err.message}); reconnecting`);
          pending = undefined;
          void client.close().catch(() => undefined);
        }
        throw err;
      }
    },
    async close(): Promise<void> {
      const current = pending;
      pending = undefined;
      await (await current?.catch(() => undefined))?.close();
    },
  };
}
