// bench:fairness: whether one team's burst holds every other team's pushes behind it on the shared task queue.
//
//   with the noisy team   ten teams end their runs at once: nine quiet teams RUNS each, one noisy team
//                         NOISY_FACTOR × RUNS, emitted together by LANES concurrent emitters (each round a run of
//                         every quiet team among NOISY_FACTOR of the noisy team's);
//   baseline              the nine quiet teams' runs alone, the same way, in the same run on the same servers.
//
// The figure is the quiet teams' p99 from outcome (the emitter call) to first push (the push service's clock),
// against the baseline's, per repetition (alternating which phase goes first); the target is ≤ 1.5×. Runs are
// created and ended through the engine before the clock starts. The worker is createWorker's, with its defaults;
// the dev server runs as temporal-dev.yml says (BENCH_TEMPORAL_ARGS adds arguments: e.g.
// --dynamic-config-value=matching.enableFairness=false measures the queue without fairness).
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, bundleWorkflowCode } from '@temporalio/worker';
import webpush from 'web-push';
import { createOutcomeEmitter, episodeOptions, type OutcomeEmitter } from '../client/emitter';
import { loadConfig, type Config } from '../config';
import type { PushPayload } from '../domain/push';
import { pushSenderFor } from '../delivery/push/sender';
import { createRunsService, type Caller } from '../runs/service';
import { createStores, ensureAllIndexes, type Stores } from '../store';
import { connectMongo } from '../store/mongo';
import {
  runScenario,
  startPushService,
  startServers,
  type PushService,
  type ServerStack,
  type Step,
} from '../test/support';
import { createWorker, WORKFLOWS_PATH } from '../worker';
import {
  commandLine,
  inLanes,
  installQuietRuntime,
  log,
  machineInfo,
  median,
  percentile,
  quietLogger,
  round,
  runMain,
  table,
  uniqueName,
  writeResults,
  tearDownBench,
} from './support';

const RUNS = Number(process.env.BENCH_FAIRNESS_RUNS ?? 20);
const REPS = Number(process.env.BENCH_FAIRNESS_REPS ?? 3);
const LANES = Number(process.env.BENCH_FAIRNESS_LANES ?? 50);
const QUIET_TEAMS = 9;
const NOISY_FACTOR = 10;
const TARGET_P99_RATIO = 1.5;
/**
 * The worker's task slots (WORKER_MAX_CONCURRENT_ACTIVITIES and _WORKFLOW_TASKS); unset: the SDK's defaults. The
 * queue orders only what waits in it: a worker with more slots than the machine runs at once takes the burst in
 * and serves it in arrival order.
 */
const WORKER_SLOTS = process.env.BENCH_FAIRNESS_WORKER_SLOTS;
const POLL_MS = 200;
/** A phase whose pushes are not all in by then failed (a bound on a hang, not a figure). */
const SETTLE_TIMEOUT_MS = 30 * 60_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Phase {
  /** Quiet teams' outcome → first push (ms). */
  quietMs: number[];
  /** The noisy team's, in the phase with it. */
  noisyMs: number[];
  wallMs: number;
}

interface Rep {
  baseline: Phase;
  noisy: Phase;
  ratio: number;
}

interface FairnessBench {
  temporalArgs: string[];
  cleanups: (() => Promise<unknown> | unknown)[];
  stack: ServerStack & { temporalAddress: string };
  push: PushService;
  config: Config;
  stores: Stores;
  client: Client;
  quiet: Caller[];
  noisy: Caller;
  emitter: OutcomeEmitter;
  engine: ReturnType<typeof createRunsService>;
  batch: number;
  reps: Rep[];
}

const SCENARIO: Step<FairnessBench>[] = [setUp, startWorker, subscribeTeams, warmUp, runReps, report];

export async function runFairnessBench(): Promise<{ p99Ratio: number; met: boolean }> {
  installQuietRuntime();
  const bench = {
    temporalArgs: (process.env.BENCH_TEMPORAL_ARGS ?? '').split(/\s+/).filter(Boolean),
    cleanups: [],
    batch: 0,
    reps: [],
  } as unknown as FairnessBench; // the steps fill in the rest, in the scenario's order
  await runScenario(bench, SCENARIO, tearDownBench);
  const p99Ratio = median(bench.reps.map((r) => r.ratio));
  return { p99Ratio: round(p99Ratio, 2), met: p99Ratio <= TARGET_P99_RATIO };
}

async function setUp(bench: FairnessBench): Promise<void> {
  const { cleanups } = bench;
  bench.stack = await startServers('bench-fairness', { temporal: true, temporalArgs: bench.temporalArgs });
  bench.push = await startPushService();
  cleanups.push(() => bench.push.close());
  const vapid = webpush.generateVAPIDKeys();
  bench.config = loadConfig({
    MONGO_URL: bench.stack.mongoUrl,
    MONGO_DB: uniqueName('bench_fairness'),
    TEMPORAL_ADDRESS: bench.stack.temporalAddress,
    TEMPORAL_TASK_QUEUE: uniqueName('flow-notify-bench'),
    AUTH_JWT_SECRET: 'bench-secret-for-flow-notify-32-bytes-or-more',
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: 'mailto:bench@flow.test',
    PUSH_ALLOW_PRIVATE: '1',
    // Every episode's push is measured as sent: none folded into a digest by the burst bound.
    PUSH_BURST_LIMIT: '100000',
    STUDIO_URL: 'https://studio.flow.bench',
    SWEEP_INTERVAL_SECONDS: '86400',
    ...(WORKER_SLOTS
      ? { WORKER_MAX_CONCURRENT_ACTIVITIES: WORKER_SLOTS, WORKER_MAX_CONCURRENT_WORKFLOW_TASKS: WORKER_SLOTS }
      : {}),
  });
  const { config } = bench;
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  cleanups.push(() => mongo.client.close());
  await ensureAllIndexes(mongo.db);
  bench.stores = createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds });
  const connection = await Connection.connect({ address: config.temporalAddress });
  cleanups.push(() => connection.close());
  bench.client = new Client({ connection, namespace: config.temporalNamespace });
  bench.emitter = createOutcomeEmitter({
    client: bench.client,
    taskQueue: config.temporalTaskQueue,
    runs: bench.stores.runs,
    options: episodeOptions(config),
  });
  bench.engine = createRunsService({
    runs: bench.stores.runs,
    runTransitions: bench.stores.runTransitions,
    events: bench.stores.events,
    interactions: bench.stores.interactions,
    actionTokens: bench.stores.actionTokens,
    teamRemovals: bench.stores.teamRemovals,
    claims: bench.stores.claims,
    emitter: { emitRunOutcome: async () => undefined },
  });
}

async function startWorker(bench: FairnessBench): Promise<void> {
  const { config, client, stores, cleanups } = bench;
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  cleanups.push(() => connection.close());
  const pushSender = pushSenderFor(config, { ca: bench.push.ca });
  cleanups.push(() => pushSender?.close());
  const worker = await createWorker({
    config,
    connection,
    client,
    stores,
    pushSender,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger }),
    log: () => undefined,
  });
  const running = worker.run();
  cleanups.push(async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
  });
}

/** Ten teams, each an owner with one endpoint (the push the figure times). */
async function subscribeTeams(bench: FairnessBench): Promise<void> {
  const now = new Date();
  const owner = async (teamId: string): Promise<Caller> => {
    const userId = `${teamId}_owner`;
    await bench.stores.pushSubscriptions.upsert({ userId, teamId }, bench.push.endpoint(userId), now);
    return { userId, teamId };
  };
  bench.quiet = [];
  for (let t = 0; t < QUIET_TEAMS; t++) bench.quiet.push(await owner(`quiet_${t}`));
  bench.noisy = await owner('noisy');
}

async function warmUp(bench: FairnessBench): Promise<void> {
  log(
    `bench:fairness — ${QUIET_TEAMS} quiet teams × ${RUNS} runs, one noisy team × ${NOISY_FACTOR * RUNS}, ` +
      `${LANES} concurrent emitters, ${REPS} rep(s), worker slots ${WORKER_SLOTS ?? 'SDK defaults'}` +
      (bench.temporalArgs.length ? `, dev server ${bench.temporalArgs.join(' ')}` : ''),
  );
  await phase(bench, false, Math.max(1, Math.floor(RUNS / 4)));
}

async function runReps(bench: FairnessBench): Promise<void> {
  for (let rep = 0; rep < REPS; rep++) {
    const noisyFirst = rep % 2 === 1;
    const first = await phase(bench, noisyFirst);
    const second = await phase(bench, !noisyFirst);
    const [baseline, noisy] = noisyFirst ? [second, first] : [first, second];
    const ratio = percentile(noisy.quietMs, 99) / percentile(baseline.quietMs, 99);
    bench.reps.push({ baseline, noisy, ratio });
    log(
      `  rep ${rep + 1}: quiet p99 ${percentile(baseline.quietMs, 99)} ms alone, ` +
        `${percentile(noisy.quietMs, 99)} ms beside the noisy team (${round(ratio, 2)}×); noisy team p99 ` +
        `${percentile(noisy.noisyMs, 99)} ms; walls ${round(baseline.wallMs / 1000, 1)} s / ` +
        `${round(noisy.wallMs / 1000, 1)} s`,
    );
  }
}

/**
 * One burst: runs ended through the engine before the clock, then every outcome emitted at once (a quiet run
 * after every NOISY_FACTOR noisy ones) until every episode settled.
 */
async function phase(bench: FairnessBench, withNoisy: boolean, runs = RUNS): Promise<Phase> {
  const { engine, emitter, client, push } = bench;
  const batch = ++bench.batch;
  // Each round: a run of every quiet team, each after one of the noisy team's NOISY_FACTOR.
  const callers: Caller[] = [];
  for (let i = 0; i < runs; i++)
    for (let k = 0; k < NOISY_FACTOR; k++) {
      if (withNoisy) callers.push(bench.noisy);
      if (k < QUIET_TEAMS) callers.push(bench.quiet[k]);
    }
  const runIds: string[] = [];
  for (const [i, caller] of callers.entries()) {
    const run = await engine.create(caller, { title: `Bench run ${batch}.${i}` });
    await engine.complete(caller, run._id, 'done');
    runIds.push(run._id);
  }
  push.reset();
  const emittedAt = new Map<string, number>();
  const start = Date.now();
  await inLanes(runIds.length, LANES, async (i) => {
    emittedAt.set(runIds[i], Date.now());
    const emitted = await emitter.emitRunOutcome(runIds[i]);
    if (!emitted?.started) throw new Error(`the outcome of ${runIds[i]} started no episode`);
  });
  const firstPush = await firstPushes(push, runIds.length);
  const wallMs = Date.now() - start;
  // The next phase starts on an idle queue: every episode of this one closed.
  const open = `TaskQueue = "${bench.config.temporalTaskQueue}" AND ExecutionStatus = "Running"`;
  while ((await client.workflow.count(open)).count > 0) await sleep(POLL_MS);
  const latency = (i: number) => firstPush.get(runIds[i])! - emittedAt.get(runIds[i])!;
  const indexes = callers.map((_, i) => i);
  return {
    quietMs: indexes.filter((i) => callers[i] !== bench.noisy).map(latency),
    noisyMs: indexes.filter((i) => callers[i] === bench.noisy).map(latency),
    wallMs,
  };
}

/** Each run's first push (the push service's clock), once every one of `runs` has had one. */
async function firstPushes(push: PushService, runs: number): Promise<Map<string, number>> {
  const deadline = Date.now() + SETTLE_TIMEOUT_MS;
  for (;;) {
    const firstPush = new Map<string, number>();
    for (const r of push.received()) {
      const runId = (r.payload as PushPayload).runId;
      const at = r.at.getTime();
      if (!firstPush.has(runId) || at < firstPush.get(runId)!) firstPush.set(runId, at);
    }
    if (firstPush.size >= runs) return firstPush;
    if (Date.now() > deadline) throw new Error(`${runs - firstPush.size} of ${runs} runs got no push`);
    await sleep(POLL_MS);
  }
}

function report(bench: FairnessBench): void {
  const { reps } = bench;
  const ratio = median(reps.map((r) => r.ratio));
  const met = ratio <= TARGET_P99_RATIO;
  const p99 = (phases: Phase[], pick: (p: Phase) => number[]) =>
    round(median(phases.map((p) => percentile(pick(p), 99))), 0);
  const spread = `${round(Math.min(...reps.map((r) => r.ratio)), 2)}–${round(Math.max(...reps.map((r) => r.ratio)), 2)}`;
  const quietAlone = p99(
    reps.map((r) => r.baseline),
    (p) => p.quietMs,
  );
  const quietBeside = p99(
    reps.map((r) => r.noisy),
    (p) => p.quietMs,
  );
  log('');
  log(
    table([
      ['figure', 'with the noisy team', 'baseline (alone)', 'ratio (median of reps)', 'target', 'met'],
      [
        `quiet teams' p99 outcome → first push (ms)`,
        quietBeside,
        quietAlone,
        `${round(ratio, 2)} (${spread})`,
        `≤ ${TARGET_P99_RATIO}`,
        met ? 'met' : 'NOT MET',
      ],
    ]),
  );
  writeResults('fairness', {
    title: 'Fairness between teams',
    command: commandLine('fairness.ts'),
    machine: machineInfo(),
    stack: bench.stack.origin,
    headline: [
      {
        figure: `quiet teams' p99 outcome → first push, beside a team ending ${NOISY_FACTOR}× their runs`,
        ours: `${quietBeside} ms`,
        baseline: `${quietAlone} ms (the quiet teams alone)`,
        ratio: round(ratio, 2),
        target: `≤ ${TARGET_P99_RATIO}`,
        met,
      },
    ],
    figures: {
      runsPerQuietTeam: RUNS,
      quietTeams: QUIET_TEAMS,
      noisyFactor: NOISY_FACTOR,
      lanes: LANES,
      workerSlots: WORKER_SLOTS ?? 'SDK defaults',
      temporalArgs: bench.temporalArgs,
      reps: reps.map((r) => ({
        ratio: round(r.ratio, 2),
        quietAloneP50: percentile(r.baseline.quietMs, 50),
        quietAloneP99: percentile(r.baseline.quietMs, 99),
        quietBesideP50: percentile(r.noisy.quietMs, 50),
        quietBesideP99: percentile(r.noisy.quietMs, 99),
        noisyP99: percentile(r.noisy.noisyMs, 99),
        wallMs: { alone: r.baseline.wallMs, beside: r.noisy.wallMs },
      })),
    },
    notes: [
      `Each repetition runs both phases, alternating which goes first; the ratio is paired per repetition.`,
      'The push service, the worker and the driver share one Node process.',
    ],
  });
}

if (require.main === module) runMain(async () => void (await runFairnessBench()));
