// bench:episodes: outcome episodes through the embedded dev server and one worker, against a bare
// workflow of the same shape on the same server, in the same run.
//
//   ours   500 runs created and completed through the real engine (createRunsService) before the clock starts,
//          each owing three pushes (the owner and two teammates who chose team-wide scope, one endpoint each, on
//          the loopback push service) and a signed callback (loopback receiver). The clock starts when the
//          outcome emitter (createOutcomeEmitter, as the engine calls it) is called for a run; episodes/s counts
//          until every episode workflow returned (all three families settled); latency is outcome emitted →
//          first push received (the push service's own clock).
//   bare   500 bareEpisodeWorkflow starts (bench/bareWorkflow.ts: one activity, then two branches of three,
//          all doing nothing) on their own worker and task queue; latency is start → first activity.
//
// Two regimes: a burst (LANES concurrent emitters or starters: throughput, and latency under saturation, which is
// queueing) and a paced phase (PACED episodes one per PACE_MS: the latency an episode sees when nothing queues
// ahead of it). The worker for ours is createWorker's, with its defaults, unless BENCH_WORKER_TUNING names a
// variant (see TUNINGS), which then applies to the bare worker too; "timed" also times every activity.
//
// BENCH_METRICS=1: the worker and the emitter record metrics (as with WORKER_METRICS_PORT), the SDK runs its own
// Prometheus exporter, and both are scraped every SCRAPE_MS while the bench runs: the figures then carry the cost
// of metrics (compare with a run without it), and the end prints what a scrape shows.
import { Client, Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { bundleWorkflowCode, NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import webpush from 'web-push';
import { createActivities } from '../activities';
import { createOutcomeEmitter, type OutcomeEmitter } from '../client/emitter';
import { loadConfig, type Config } from '../config';
import { createRunsService, type Caller } from '../runs/service';
import { pushSenderFor } from '../delivery/push/sender';
import { createStores, ensureAllIndexes, type Stores } from '../store';
import { connectMongo } from '../store/mongo';
import {
  CallbackReceiver,
  runScenario,
  startPushService,
  startServers,
  type PushService,
  type ServerStack,
  type Step,
} from '../test/support';
import type { PushPayload } from '../domain/push';
import type { EpisodeResult } from '../contract/workflows';
import { createWorker, WORKFLOWS_PATH } from '../worker';
import { Registry } from 'prom-client';
import { createMetrics, type Metrics } from '../platform/metrics';
import { freePort } from '../platform/embedded';
import type { BareActivities } from './bareWorkflow';
import {
  cdfPoints,
  commandLine,
  cpuMeter,
  inLanes,
  RoundTrips,
  installQuietRuntime,
  log,
  machineInfo,
  median,
  nowMs,
  percentile,
  quietLogger,
  round,
  runMain,
  sdkWarnings,
  table,
  uniqueName,
  writeResults,
  type Section,
  tearDownBench,
} from './support';

const EPISODES = Number(process.env.BENCH_EPISODES ?? 500);
const LANES = Number(process.env.BENCH_EPISODES_LANES ?? 50);
// Three reps, alternating which kind goes first: one burst on this VM swings by ±15 %.
const REPS = Number(process.env.BENCH_EPISODES_REPS ?? 3);
const WARMUP = Math.min(30, EPISODES);
/** The unsaturated phase: this many episodes of each kind, one every PACE_MS (well under either capacity). */
const PACED = Number(process.env.BENCH_EPISODES_PACED ?? 40);
const PACE_MS = Number(process.env.BENCH_EPISODES_PACE_MS ?? 1000);
const TEAMS = 20;
const TARGET_THROUGHPUT = 1;
const TARGET_P99 = 1.5;
const TARGET_PACED_P99 = 2;
/**
 * The burst bound's case (BENCH_EPISODES_BURST): `high` counts every push under a limit no episode reaches (as the
 * test stacks do), `default` is PUSH_BURST_LIMIT's default (each person's pushes past 5 in 10 minutes are held for
 * a digest, so most episodes send nothing), `off` is PUSH_BURST_LIMIT=0 (nothing counted).
 */
const BURST_CASES: Record<string, string | undefined> = { high: '100000', default: undefined, off: '0' };
const BURST_CASE = process.env.BENCH_EPISODES_BURST ?? 'high';
const BARE_QUEUE_SUFFIX = '-bare';
const METRICS = process.env.BENCH_METRICS === '1';
/** How often BENCH_METRICS scrapes both registries (Prometheus' usual interval is 15 s or more). */
const SCRAPE_MS = 5000;

/** Worker option variants to try (BENCH_WORKER_TUNING=name); "default" is createWorker as it is. */
const TUNINGS: Record<string, Partial<WorkerOptions>> = {
  default: {},
  // createWorker's options through Worker.create, with every activity timed (diagnostics: what dominates).
  timed: {},
  // More pollers than the default min(10, slots), so a burst of tasks is picked up without waiting for a poll.
  pollers: { maxConcurrentWorkflowTaskPolls: 20, maxConcurrentActivityTaskPolls: 20 },
  // Fewer activity slots: on 2 cores 100 concurrent activities mostly queue on FerretDB.
  narrow: { maxConcurrentActivityTaskExecutions: 20 },
  narrower: { maxConcurrentActivityTaskExecutions: 8 },
  // Few store calls at once, local ones included: SQLite (under FerretDB) serializes writers, and a crowd of them
  // spends its time in the busy handler's sleeps.
  narrowLocal: { maxConcurrentActivityTaskExecutions: 16, maxConcurrentLocalActivityExecutions: 8 },
  wide: {
    maxConcurrentWorkflowTaskExecutions: 100,
    maxConcurrentActivityTaskExecutions: 200,
    maxConcurrentWorkflowTaskPolls: 20,
    maxConcurrentActivityTaskPolls: 20,
  },
};

interface Phase {
  episodes: number;
  wallMs: number;
  perSecond: number;
  /** ours: outcome emitted → first push received; bare: start → first activity. */
  latencyMs: number[];
  /** ours: outcome emitted → workflow result; bare: start → workflow result. */
  completionMs: number[];
  /** bare only: start → step 2 (the activity at deliverPush's depth). */
  atPushDepthMs?: number[];
  /** Activity attempts that failed (and were retried by Temporal) during the phase, by type and error. */
  failedAttempts: Record<string, number>;
  /** CPU ms per episode over the phase, by process (the bench process holds both workers and the stand-ins). */
  cpuMsPerEpisode: Record<string, number>;
  /** ours: store commands per episode over the phase, by command and collection. */
  storeCommandsPerEpisode?: Record<string, number>;
  /** ours, paced: where each episode's time to its first push went (ms per segment, from its history). */
  segmentsMs?: Record<string, number[]>;
  /** ours: deliveries beyond one per endpoint / one callback per episode (at-least-once repeats). */
  repeats?: { pushes: number; callbacks: number };
}

/** A phase's totals (CPU ms, store commands) divided by its episodes. */
const perEpisode = (totals: Record<string, number>, n: number): Record<string, number> =>
  Object.fromEntries(Object.entries(totals).map(([name, total]) => [name, round(total / n, 1)]));

/** Wraps every activity to note how long it ran (by name). */
function timedActivities<T extends object>(activities: T, into: Map<string, number[]>): T {
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(activities)) {
    wrapped[name] = async (...args: unknown[]) => {
      const start = nowMs();
      let outcome = name;
      try {
        return await (fn as (...a: unknown[]) => Promise<unknown>)(...args);
      } catch (err) {
        outcome = `${name} (threw: ${String(err instanceof Error ? err.message : err).slice(-60)})`;
        throw err;
      } finally {
        const list = into.get(outcome) ?? [];
        list.push(nowMs() - start);
        into.set(outcome, list);
      }
    };
  }
  return wrapped as T;
}

export interface EpisodesBenchResult {
  throughputRatio: number;
  p99Ratio: number;
  met: { throughput: boolean; p99: boolean };
}

/** What the benchmark's steps share. Each step fills in what later steps use; the scenario below gives the order. */
interface EpisodesBench {
  tuningName: string;
  tuning: Partial<WorkerOptions>;
  temporalArgs: string[];
  mongoArgs: string[];
  /** BENCH_COUNT_COMMANDS=1: count the store commands each episode costs (monitoring has a cost of its own). */
  countCommands: boolean;
  /** Run in reverse order when the benchmark ends, whatever happened; then the servers stop. */
  cleanups: (() => Promise<unknown> | unknown)[];
  /** BENCH_METRICS=1: the registry the worker and emitter record into, and where the SDK's exporter listens. */
  metrics?: Metrics;
  sdkMetricsAddress?: string;

  stack: ServerStack;
  push: PushService;
  receiver: CallbackReceiver;
  config: Config;
  stores: Stores;
  roundTrips?: RoundTrips;
  connection: NativeConnection;
  client: Client;
  /** Activity durations by name, with the "timed" tuning. */
  activityMs: Map<string, number[]>;
  /** bare: when each workflow's first activity, and its activity at deliverPush's depth, ran. */
  firstActivityAt: Map<string, number>;
  pushDepthAt: Map<string, number>;
  bareQueue: string;
  /** Run owners (each with two teammates who chose team-wide scope). */
  owners: Caller[];
  emitter: OutcomeEmitter;
  engine: ReturnType<typeof createRunsService>;
  /** ours: when each run's outcome was emitted. */
  emittedAt: Map<string, number>;
  /** Phases so far (names the bare workflow ids and run titles apart). */
  batch: number;

  phases: { ours: Phase[]; bare: Phase[] };
  paced: { ours: Phase; bare: Phase };
  pacedSegments: Record<string, { p50: number; p99: number }>;
  comparison: Comparison;
  activityStats: Record<string, { count: number; p50: number; p99: number }>;
}

/** The benchmark, in order: set up, warm up, bursts, paced, compare, report. */
const EPISODES_SCENARIO: Step<EpisodesBench>[] = [
  startServersAndStandIns,
  configure,
  connectStoreAndTemporal,
  startBothWorkers,
  subscribeRecipients,
  prepareEngineAndEmitter,
  warmUp,
  runBursts,
  runPaced,
  compareWithBare,
  printComparison,
  printActivityDurations,
  writeSection,
];

export async function runEpisodesBench(): Promise<EpisodesBenchResult> {
  const sdkMetricsAddress = METRICS ? `127.0.0.1:${await freePort()}` : undefined;
  installQuietRuntime(sdkMetricsAddress);
  if (!(BURST_CASE in BURST_CASES))
    throw new Error(`BENCH_EPISODES_BURST must be one of ${Object.keys(BURST_CASES).join(', ')}`);
  const tuningName = process.env.BENCH_WORKER_TUNING ?? 'default';
  const tuning = TUNINGS[tuningName];
  if (!tuning) throw new Error(`BENCH_WORKER_TUNING must be one of ${Object.keys(TUNINGS).join(', ')}`);
  const bench = {
    tuningName,
    tuning,
    temporalArgs: (process.env.BENCH_TEMPORAL_ARGS ?? '').split(/\s+/).filter(Boolean),
    mongoArgs: (process.env.BENCH_MONGO_ARGS ?? '').split(/\s+/).filter(Boolean),
    countCommands: Boolean(process.env.BENCH_COUNT_COMMANDS),
    cleanups: [],
    metrics: METRICS ? createMetrics(new Registry()) : undefined,
    sdkMetricsAddress,
    activityMs: new Map(),
    firstActivityAt: new Map(),
    pushDepthAt: new Map(),
    emittedAt: new Map(),
    batch: 0,
    phases: { ours: [], bare: [] },
  } as unknown as EpisodesBench; // the steps fill in the rest, in the scenario's order
  await runScenario(bench, EPISODES_SCENARIO, tearDownBench);
  const { throughputRatio, p99Ratio, met } = bench.comparison;
  return { throughputRatio, p99Ratio, met };
}

// ---------------------------------------------------------------------------------------------------------------
// Set-up

async function startServersAndStandIns(bench: EpisodesBench): Promise<void> {
  const { temporalArgs, mongoArgs, cleanups } = bench;
  bench.stack = await startServers('bench-episodes', { temporal: true, temporalArgs, mongoArgs });
  bench.push = await startPushService();
  cleanups.push(() => bench.push.close());
  bench.receiver = await CallbackReceiver.start();
  cleanups.push(() => bench.receiver.close());
}

function configure(bench: EpisodesBench): void {
  const vapid = webpush.generateVAPIDKeys();
  bench.config = loadConfig({
    MONGO_URL: bench.stack.mongoUrl,
    MONGO_DB: uniqueName('bench_episodes'),
    TEMPORAL_ADDRESS: bench.stack.temporalAddress,
    TEMPORAL_TASK_QUEUE: uniqueName('flow-notify-bench'),
    AUTH_JWT_SECRET: 'bench-secret-for-flow-notify-32-bytes-or-more',
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: 'mailto:bench@flow.test',
    PUSH_ALLOW_PRIVATE: '1',
    ...(BURST_CASES[BURST_CASE] !== undefined ? { PUSH_BURST_LIMIT: BURST_CASES[BURST_CASE] } : {}),
    CALLBACK_ALLOW_PRIVATE: '1',
    STUDIO_URL: 'https://studio.flow.bench',
    SWEEP_INTERVAL_SECONDS: '86400',
  });
}

/** Both registries as one scrape would read them (BENCH_METRICS), or nothing. */
async function scrapeBoth(bench: EpisodesBench): Promise<string> {
  const { metrics, sdkMetricsAddress } = bench;
  if (!metrics || !sdkMetricsAddress) return '';
  const sdk = await (await fetch(`http://${sdkMetricsAddress}/metrics`)).text();
  return `${await metrics.registry.metrics()}\n${sdk}`;
}

async function connectStoreAndTemporal(bench: EpisodesBench): Promise<void> {
  const { config, cleanups } = bench;
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb, { monitorCommands: bench.countCommands });
  cleanups.push(() => mongo.client.close());
  bench.roundTrips = bench.countCommands ? new RoundTrips(mongo.client) : undefined;
  await ensureAllIndexes(mongo.db);
  const { metrics } = bench;
  bench.stores = createStores(mongo.db, {
    claimGraceSeconds: config.claimGraceSeconds,
    onClaimTakeover: metrics && ((key) => metrics.claimTakeover(key)),
  });
  if (metrics) {
    // Both registries scraped as Prometheus would (more often), so the scrape's own cost is in the figures.
    const scraper = setInterval(() => void scrapeBoth(bench).catch(() => undefined), SCRAPE_MS);
    cleanups.push(() => clearInterval(scraper));
  }

  bench.connection = await NativeConnection.connect({ address: config.temporalAddress });
  const clientConnection = await Connection.connect({ address: config.temporalAddress });
  cleanups.push(() => clientConnection.close());
  cleanups.push(() => bench.connection.close());
  bench.client = new Client({ connection: clientConnection, namespace: config.temporalNamespace });
}

/** Ours (createWorker, or Worker.create with the tuning) and the bare workflow's, on its own task queue. */
async function startBothWorkers(bench: EpisodesBench): Promise<void> {
  const { config, connection, client, stores, tuning, metrics } = bench;
  // Bundle once per worker kind, as the test harness does.
  const [bundle, bareBundle] = await Promise.all([
    bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietLogger }),
    bundleWorkflowCode({ workflowsPath: require.resolve('./bareWorkflow'), logger: quietLogger }),
  ]);
  const pushSender = pushSenderFor(config, { ca: bench.push.ca });
  bench.cleanups.push(() => pushSender?.close());
  const worker =
    bench.tuningName === 'default'
      ? await createWorker({
          config,
          connection,
          client,
          stores,
          pushSender,
          workflowBundle: bundle,
          log: () => undefined,
          metrics,
        })
      : await Worker.create({
          connection,
          namespace: config.temporalNamespace,
          taskQueue: config.temporalTaskQueue,
          workflowBundle: bundle,
          activities: timedActivities(
            createActivities({ config, stores, client, pushSender, log: () => undefined, metrics }),
            bench.activityMs,
          ),
          ...tuning,
        });
  const { firstActivityAt, pushDepthAt } = bench;
  const bareActivities: BareActivities = {
    async noop(workflowId, step) {
      if (step === 0 && !firstActivityAt.has(workflowId)) firstActivityAt.set(workflowId, Date.now());
      if (step === 2 && !pushDepthAt.has(workflowId)) pushDepthAt.set(workflowId, Date.now());
    },
  };
  bench.bareQueue = config.temporalTaskQueue + BARE_QUEUE_SUFFIX;
  const bareWorker = await Worker.create({
    connection,
    namespace: config.temporalNamespace,
    taskQueue: bench.bareQueue,
    workflowBundle: bareBundle,
    activities: bareActivities,
    ...tuning,
  });
  const running = [worker.run(), bareWorker.run()];
  bench.cleanups.push(async () => {
    for (const w of [worker, bareWorker]) if (w.getState() === 'RUNNING') w.shutdown();
    await Promise.allSettled(running);
  });
}

/** Recipients: TEAMS teams, each an owner and two teammates with team-wide scope, one endpoint each. */
async function subscribeRecipients(bench: EpisodesBench): Promise<void> {
  const { stores, push } = bench;
  const now = new Date();
  bench.owners = [];
  for (let t = 0; t < TEAMS; t++) {
    const teamId = `team_${t}`;
    for (let u = 0; u < 3; u++) {
      const userId = `user_${t}_${u}`;
      const endpoint = push.endpoint(userId);
      await stores.pushSubscriptions.upsert({ userId, teamId }, endpoint, now);
      if (u === 0) bench.owners.push({ userId, teamId });
      else await stores.notificationPrefs.setScope(userId, teamId, 'team', now);
    }
  }
}

/**
 * Runs are created and completed through the engine before the clock starts (their own writes are not the
 * episode); the timed part starts at the emitter, as the engine would call it right after the transition.
 */
function prepareEngineAndEmitter(bench: EpisodesBench): void {
  const { stores, config, client } = bench;
  bench.emitter = createOutcomeEmitter({
    client,
    taskQueue: config.temporalTaskQueue,
    runs: stores.runs,
    options: { callbackRetrySeconds: config.callbackRetrySeconds },
    metrics: bench.metrics,
    emitter: 'api',
  });
  bench.engine = createRunsService({
    runs: stores.runs,
    runTransitions: stores.runTransitions,
    events: stores.events,
    interactions: stores.interactions,
    actionTokens: stores.actionTokens,
    teamRemovals: stores.teamRemovals,
    claims: stores.claims,
    emitter: { emitRunOutcome: async () => undefined },
  });
}

// ---------------------------------------------------------------------------------------------------------------
// The phases

async function warmUp(bench: EpisodesBench): Promise<void> {
  const { stack, tuningName, temporalArgs } = bench;
  log(
    `bench:episodes — ${EPISODES} episodes × ${REPS} reps per kind, ${LANES} concurrent emitters, worker ` +
      `tuning "${tuningName}"${temporalArgs.length ? `, dev server ${temporalArgs.join(' ')}` : ''}; ` +
      `mongo ${stack.origin.mongo}, temporal ${stack.origin.temporal}`,
  );
  await barePhase(bench, WARMUP);
  await oursPhase(bench, WARMUP);
}

/** REPS bursts of EPISODES of each kind, alternating which goes first so neither always has the fresher server. */
async function runBursts(bench: EpisodesBench): Promise<void> {
  for (let rep = 0; rep < REPS; rep++) {
    const order = rep % 2 ? (['ours', 'bare'] as const) : (['bare', 'ours'] as const);
    for (const kind of order) {
      const phase = kind === 'ours' ? await oursPhase(bench, EPISODES) : await barePhase(bench, EPISODES);
      bench.phases[kind].push(phase);
      log(
        `  rep ${rep + 1} ${kind.padEnd(4)}: ${round(phase.perSecond, 1)}/s over ${round(phase.wallMs / 1000, 1)} s; ` +
          `latency p50 ${percentile(phase.latencyMs, 50)} ms p99 ${percentile(phase.latencyMs, 99)} ms; ` +
          `CPU ms each: ${Object.entries(phase.cpuMsPerEpisode)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')}` +
          (phase.storeCommandsPerEpisode
            ? `; store commands each: ${round(
                Object.values(phase.storeCommandsPerEpisode).reduce((a, b) => a + b, 0),
                1,
              )}`
            : '') +
          (phase.repeats
            ? `; repeats: ${phase.repeats.pushes} pushes, ${phase.repeats.callbacks} callbacks`
            : '') +
          (Object.keys(phase.failedAttempts).length
            ? `; failed activity attempts (retried): ${Object.entries(phase.failedAttempts)
                .map(([k, v]) => `${v}× ${k}`)
                .join('; ')}`
            : ''),
      );
    }
  }
}

/** Unsaturated: the latency an episode sees when nothing queues ahead of it. */
async function runPaced(bench: EpisodesBench): Promise<void> {
  const paced = {
    bare: await barePhase(bench, PACED, PACE_MS),
    ours: await oursPhase(bench, PACED, PACE_MS),
  };
  bench.paced = paced;
  for (const kind of ['bare', 'ours'] as const) {
    const phase = paced[kind];
    log(
      `  paced ${kind.padEnd(4)}: ${PACED} at ${round(1000 / PACE_MS, 2)}/s; latency p50 ` +
        `${percentile(phase.latencyMs, 50)} ms p99 ${percentile(phase.latencyMs, 99)} ms`,
    );
  }
  bench.pacedSegments = Object.fromEntries(
    Object.entries(paced.ours.segmentsMs ?? {}).map(([name, values]) => [
      name,
      { p50: round(percentile(values, 50), 1), p99: round(percentile(values, 99), 1) },
    ]),
  );
  log('  paced ours, outcome → first push by segment (ms):');
  log(
    table([
      ['segment', 'p50', 'p99'],
      ...Object.entries(bench.pacedSegments).map(([name, s]) => [`    ${name}`, s.p50, s.p99]),
    ]),
  );
}

/** Runs job(i) for i < n: LANES at a time (a burst), or each at start + i × paceMs (paced). */
async function drive(
  n: number,
  paceMs: number | undefined,
  job: (i: number) => Promise<void>,
): Promise<void> {
  if (!paceMs) return inLanes(n, LANES, job);
  await Promise.all(
    Array.from({ length: n }, (_, i) => new Promise((r) => setTimeout(r, i * paceMs)).then(() => job(i))),
  );
}

/** n runs completed through the engine, then their outcomes emitted (the clock) until every episode settled. */
async function oursPhase(bench: EpisodesBench, n: number, paceMs?: number): Promise<Phase> {
  const { engine, emitter, client, push, receiver, emittedAt, owners, roundTrips, stack } = bench;
  bench.batch++;
  const batch = bench.batch;
  const callers = Array.from({ length: n }, (_, i) => owners[i % owners.length]);
  const runIds: string[] = [];
  const prepStart = Date.now();
  for (let i = 0; i < n; i++) {
    const run = await engine.create(callers[i], {
      title: `Bench run ${batch}.${i}`,
      callback: { url: receiver.url },
    });
    await engine.complete(callers[i], run._id, `Answer ${i}: revenue grew 12% quarter over quarter.`);
    runIds.push(run._id);
  }
  if (n > WARMUP)
    log(
      `    (${n} runs created and completed through the engine in ${round((Date.now() - prepStart) / 1000, 0)} s)`,
    );
  push.reset();
  receiver.received.splice(0);
  sdkWarnings.clear();
  const doneAt: number[] = [];
  const results: Promise<EpisodeResult>[] = [];
  const cpu = cpuMeter(stack.pids);
  const start = Date.now();
  const emitAndSettle = async (): Promise<EpisodeResult[]> => {
    await drive(n, paceMs, async (i) => {
      emittedAt.set(runIds[i], Date.now());
      const emitted = await emitter.emitRunOutcome(runIds[i]);
      if (!emitted?.started) throw new Error(`the outcome of ${runIds[i]} started no episode`);
      results.push(
        client.workflow
          .getHandle(`${runIds[i]}:end`)
          .result()
          .then((r: EpisodeResult) => {
            doneAt[i] = Date.now();
            return r;
          }),
      );
    });
    let finished = 0;
    for (const r of results)
      void r.then(
        () => finished++,
        () => undefined,
      );
    const progress = setInterval(
      () => log(`    … ${finished}/${n} episodes settled after ${round((Date.now() - start) / 1000, 0)} s`),
      15_000,
    );
    return Promise.all(results).finally(() => clearInterval(progress));
  };
  const counted = roundTrips ? await roundTrips.count(emitAndSettle) : undefined;
  const settled = counted?.value ?? (await emitAndSettle());
  const wallMs = Date.now() - start;
  const cpuMs = cpu();
  const bad = settled.filter((r) => r.push !== 'delivered' || r.callback !== 'delivered');
  if (bad.length) throw new Error(`${bad.length} episodes did not deliver: ${JSON.stringify(bad[0])}`);
  const { received, firstPush } = checkEveryoneReached(bench, runIds);
  return {
    episodes: n,
    wallMs,
    perSecond: (n / wallMs) * 1000,
    ...(paceMs ? { segmentsMs: await segmentsToFirstPush(bench, runIds, firstPush) } : {}),
    latencyMs: runIds.filter((id) => firstPush.has(id)).map((id) => firstPush.get(id)! - emittedAt.get(id)!),
    completionMs: runIds.map((id, i) => doneAt[i] - emittedAt.get(id)!),
    failedAttempts: Object.fromEntries(sdkWarnings),
    cpuMsPerEpisode: perEpisode(cpuMs, n),
    ...(counted ? { storeCommandsPerEpisode: perEpisode(counted.byCommand, n) } : {}),
    repeats: { pushes: received.length - 3 * n, callbacks: receiver.received.length - n },
  };
}

/**
 * Every episode must reach its 3 endpoints and its callback receiver. Delivery is at least once: a push whose
 * delivery record failed (or whose attempt was retried) is sent again, with the same tag; those repeats are
 * counted, not failed on. Returns what the push service got, and each run's first push.
 */
function checkEveryoneReached(bench: EpisodesBench, runIds: string[]) {
  const { push, receiver } = bench;
  const received = push.received();
  const endpointsByRun = new Map<string, Set<string>>();
  const firstPush = new Map<string, number>();
  for (const r of received) {
    const runId = (r.payload as PushPayload).runId;
    const at = r.at.getTime();
    if (!firstPush.has(runId) || at < firstPush.get(runId)!) firstPush.set(runId, at);
    endpointsByRun.set(runId, (endpointsByRun.get(runId) ?? new Set()).add(r.endpointId));
  }
  // Under the default burst bound each person past it is held for a digest: an episode reaches 0 to 3 now.
  const short =
    BURST_CASE === 'default' ? [] : runIds.filter((id) => (endpointsByRun.get(id)?.size ?? 0) !== 3);
  const callbackRuns = new Set(
    receiver.received.map((c) => (JSON.parse(c.body) as { run: { id: string } }).run.id),
  );
  const noCallback = runIds.filter((id) => !callbackRuns.has(id));
  if (short.length || noCallback.length) {
    throw new Error(
      `${short.length} episodes did not reach all 3 endpoints and ${noCallback.length} got no callback ` +
        `(${received.length} pushes, ${receiver.received.length} callbacks received)`,
    );
  }
  return { received, firstPush };
}

/** Splits outcome → first push at the episode's history events (the server and this process share a clock). */
async function segmentsToFirstPush(
  bench: EpisodesBench,
  runIds: string[],
  firstPush: Map<string, number>,
): Promise<Record<string, number[]>> {
  const segments: Record<string, number[]> = {};
  const add = (name: string, ms: number) => (segments[name] ??= []).push(ms);
  const E = temporal.api.enums.v1.EventType;
  const ms = (event?: temporal.api.history.v1.IHistoryEvent) =>
    event?.eventTime ? Number(event.eventTime.seconds) * 1000 + (event.eventTime.nanos ?? 0) / 1e6 : NaN;
  for (const runId of runIds) {
    const events = (await bench.client.workflow.getHandle(`${runId}:end`).fetchHistory()).events ?? [];
    const first = (type: temporal.api.enums.v1.EventType) => events.find((e) => e.eventType === type);
    const pushScheduled = events.find(
      (e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'deliverPush',
    );
    const pushStartedEvent = events.find(
      (e) =>
        e.activityTaskStartedEventAttributes &&
        String(e.activityTaskStartedEventAttributes.scheduledEventId) === String(pushScheduled?.eventId),
    );
    const started = ms(first(E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED));
    const firstTask = ms(first(E.EVENT_TYPE_WORKFLOW_TASK_STARTED));
    const scheduled = ms(pushScheduled);
    const pushStarted = ms(pushStartedEvent);
    add('outcome → workflow started (emitter: run read, start)', started - bench.emittedAt.get(runId)!);
    add('→ first workflow task started', firstTask - started);
    add('→ deliverPush scheduled (claims, as local activities)', scheduled - firstTask);
    add('→ deliverPush started', pushStarted - scheduled);
    add('→ first push received (reads, render, encrypt, send)', firstPush.get(runId)! - pushStarted);
  }
  return segments;
}

/** n bare workflows started (the clock) until every one returned. */
async function barePhase(bench: EpisodesBench, n: number, paceMs?: number): Promise<Phase> {
  const { client, bareQueue, firstActivityAt, pushDepthAt, stack } = bench;
  bench.batch++;
  const batch = bench.batch;
  const ids = Array.from({ length: n }, (_, i) => `bare-${batch}-${i}`);
  const startedAt: number[] = [];
  const doneAt: number[] = [];
  const results: Promise<string>[] = [];
  sdkWarnings.clear();
  const cpu = cpuMeter(stack.pids);
  const start = Date.now();
  await drive(n, paceMs, async (i) => {
    startedAt[i] = Date.now();
    const handle = await client.workflow.start('bareEpisodeWorkflow', {
      taskQueue: bareQueue,
      workflowId: ids[i],
      args: [ids[i]],
    });
    results.push(
      handle.result().then((r: string) => {
        doneAt[i] = Date.now();
        return r;
      }),
    );
  });
  await Promise.all(results);
  const wallMs = Date.now() - start;
  const cpuMs = cpu();
  return {
    episodes: n,
    wallMs,
    perSecond: (n / wallMs) * 1000,
    latencyMs: ids.map((id, i) => firstActivityAt.get(id)! - startedAt[i]),
    completionMs: ids.map((_, i) => doneAt[i] - startedAt[i]),
    atPushDepthMs: ids.map((id, i) => pushDepthAt.get(id)! - startedAt[i]),
    failedAttempts: Object.fromEntries(sdkWarnings),
    cpuMsPerEpisode: perEpisode(cpuMs, n),
  };
}

// ---------------------------------------------------------------------------------------------------------------
// Comparison and report

function compareWithBare(bench: EpisodesBench): void {
  bench.comparison = comparison(bench.phases, bench.paced);
}

type Comparison = ReturnType<typeof comparison>;

/** Throughput (median of the reps) and latency percentiles of both kinds, and their ratios. */
function comparison(phases: EpisodesBench['phases'], paced: EpisodesBench['paced']) {
  const all = (kind: 'ours' | 'bare', f: (p: Phase) => number[] | undefined): number[] =>
    phases[kind].flatMap((p) => f(p) ?? []);
  const oursPerSecond = round(median(phases.ours.map((p) => p.perSecond)), 1);
  const barePerSecond = round(median(phases.bare.map((p) => p.perSecond)), 1);
  const oursLatency = all('ours', (p) => p.latencyMs);
  const bareLatency = all('bare', (p) => p.latencyMs);
  const barePushDepth = all('bare', (p) => p.atPushDepthMs);
  const stat = (values: number[]) => ({
    p50: percentile(values, 50),
    p90: percentile(values, 90),
    p99: percentile(values, 99),
    max: percentile(values, 100),
  });
  const latency = {
    oursOutcomeToFirstPush: stat(oursLatency),
    bareStartToFirstActivity: stat(bareLatency),
    bareStartToPushDepthActivity: stat(barePushDepth),
    oursOutcomeToSettled: stat(all('ours', (p) => p.completionMs)),
    bareStartToResult: stat(all('bare', (p) => p.completionMs)),
    pacedOursOutcomeToFirstPush: stat(paced.ours.latencyMs),
    pacedBareStartToFirstActivity: stat(paced.bare.latencyMs),
    pacedBareStartToPushDepthActivity: stat(paced.bare.atPushDepthMs ?? []),
  };
  const throughputRatio = round(oursPerSecond / barePerSecond, 2);
  const p99Ratio = round(latency.oursOutcomeToFirstPush.p99 / latency.bareStartToFirstActivity.p99, 2);
  return {
    oursPerSecond,
    barePerSecond,
    oursLatency,
    bareLatency,
    latency,
    throughputRatio,
    p50Ratio: round(latency.oursOutcomeToFirstPush.p50 / latency.bareStartToFirstActivity.p50, 2),
    p99Ratio,
    p99RatioAtDepth: round(latency.oursOutcomeToFirstPush.p99 / latency.bareStartToPushDepthActivity.p99, 2),
    pacedP50Ratio: round(
      latency.pacedOursOutcomeToFirstPush.p50 / latency.pacedBareStartToFirstActivity.p50,
      2,
    ),
    pacedP99Ratio: round(
      latency.pacedOursOutcomeToFirstPush.p99 / latency.pacedBareStartToFirstActivity.p99,
      2,
    ),
    pacedP99RatioAtDepth: round(
      latency.pacedOursOutcomeToFirstPush.p99 / latency.pacedBareStartToPushDepthActivity.p99,
      2,
    ),
    met: { throughput: throughputRatio >= TARGET_THROUGHPUT, p99: p99Ratio <= TARGET_P99 },
  };
}

function printComparison(bench: EpisodesBench): void {
  const c = bench.comparison;
  const { latency } = c;
  log('');
  log(
    table([
      ['', 'ours (episodes)', 'bare workflows', 'ratio'],
      ['per second (median of reps)', c.oursPerSecond, c.barePerSecond, c.throughputRatio],
      [
        'burst: p50 ms: outcome → first push | start → first activity',
        latency.oursOutcomeToFirstPush.p50,
        latency.bareStartToFirstActivity.p50,
        c.p50Ratio,
      ],
      [
        'burst: p99 ms: outcome → first push | start → first activity',
        latency.oursOutcomeToFirstPush.p99,
        latency.bareStartToFirstActivity.p99,
        c.p99Ratio,
      ],
      [
        'burst: p99 ms: … | start → 3rd activity (deliverPush depth)',
        latency.oursOutcomeToFirstPush.p99,
        latency.bareStartToPushDepthActivity.p99,
        c.p99RatioAtDepth,
      ],
      [
        `paced ${round(1000 / PACE_MS, 2)}/s, p50 ms: outcome → first push | start → first activity`,
        latency.pacedOursOutcomeToFirstPush.p50,
        latency.pacedBareStartToFirstActivity.p50,
        c.pacedP50Ratio,
      ],
      [
        `paced ${round(1000 / PACE_MS, 2)}/s, p99 ms: outcome → first push | start → first activity`,
        latency.pacedOursOutcomeToFirstPush.p99,
        latency.pacedBareStartToFirstActivity.p99,
        c.pacedP99Ratio,
      ],
      [
        'paced, p99 ms: … | start → 3rd activity (deliverPush depth)',
        latency.pacedOursOutcomeToFirstPush.p99,
        latency.pacedBareStartToPushDepthActivity.p99,
        c.pacedP99RatioAtDepth,
      ],
      [
        'burst: p50 / p99 ms to workflow result',
        `${latency.oursOutcomeToSettled.p50} / ${latency.oursOutcomeToSettled.p99}`,
        `${latency.bareStartToResult.p50} / ${latency.bareStartToResult.p99}`,
        '',
      ],
    ]),
  );
  log(
    `throughput ratio ${c.throughputRatio} (target ≥ ${TARGET_THROUGHPUT}: ${c.met.throughput ? 'met' : 'NOT met'}); ` +
      `p99 latency ratio ${c.p99Ratio} under the burst (target ≤ ${TARGET_P99}: ${c.met.p99 ? 'met' : 'NOT met'}), ` +
      `${c.pacedP99Ratio} paced (target ≤ ${TARGET_PACED_P99}: ${c.pacedP99Ratio <= TARGET_PACED_P99 ? 'met' : 'NOT met'}); ` +
      `burst bound: ${BURST_CASE} (BENCH_EPISODES_BURST)`,
  );
}

/** With the "timed" tuning: how long each activity ran, every phase included. */
function printActivityDurations(bench: EpisodesBench): void {
  const { activityMs } = bench;
  bench.activityStats = Object.fromEntries(
    [...activityMs].map(([name, values]) => [
      name,
      {
        count: values.length,
        p50: round(percentile(values, 50), 1),
        p99: round(percentile(values, 99), 1),
      },
    ]),
  );
  if (activityMs.size) {
    log('activity durations (ms, every phase incl. warm-up):');
    log(
      table([
        ['activity', 'count', 'p50', 'p99'],
        ...Object.entries(bench.activityStats).map(([name, s]) => [name, s.count, s.p50, s.p99]),
      ]),
    );
  }
}

/** The episodes section of bench/results (latest.json, latest.md, latency.svg). */
async function writeSection(bench: EpisodesBench): Promise<void> {
  const { phases, paced, comparison: c, tuningName, tuning } = bench;
  const { latency } = c;
  const section: Section = {
    title: `Episodes: ${EPISODES} outcome episodes vs bare workflows, one worker`,
    command: commandLine('episodes.ts'),
    machine: machineInfo(),
    stack: bench.stack.origin,
    headline: [
      {
        figure: `burst of ${EPISODES}, per second: episodes (3 pushes + callback, settled; burst bound ${BURST_CASE}) vs bare 7-activity workflows`,
        ours: String(c.oursPerSecond),
        baseline: String(c.barePerSecond),
        ratio: c.throughputRatio,
        target: `≥ ${TARGET_THROUGHPUT}`,
        met: c.met.throughput,
      },
      {
        figure: 'burst, p50 ms: outcome → first push vs bare start → first activity',
        ours: String(latency.oursOutcomeToFirstPush.p50),
        baseline: String(latency.bareStartToFirstActivity.p50),
        ratio: c.p50Ratio,
        target: '(reference)',
      },
      {
        figure: 'burst, p99 ms: outcome → first push vs bare start → first activity',
        ours: String(latency.oursOutcomeToFirstPush.p99),
        baseline: String(latency.bareStartToFirstActivity.p99),
        ratio: c.p99Ratio,
        target: `≤ ${TARGET_P99}`,
        met: c.met.p99,
      },
      {
        figure: `paced ${PACED} at ${round(1000 / PACE_MS, 2)}/s, p50 ms: outcome → first push vs start → first activity`,
        ours: String(latency.pacedOursOutcomeToFirstPush.p50),
        baseline: String(latency.pacedBareStartToFirstActivity.p50),
        ratio: c.pacedP50Ratio,
        target: '(reference)',
      },
      {
        figure: `paced ${PACED} at ${round(1000 / PACE_MS, 2)}/s, p99 ms: outcome → first push vs start → first activity`,
        ours: String(latency.pacedOursOutcomeToFirstPush.p99),
        baseline: String(latency.pacedBareStartToFirstActivity.p99),
        ratio: c.pacedP99Ratio,
        target: `≤ ${TARGET_PACED_P99}`,
        met: c.pacedP99Ratio <= TARGET_PACED_P99,
      },
      {
        figure: 'paced, p99 ms: outcome → first push vs bare start → 3rd activity (the depth of deliverPush)',
        ours: String(latency.pacedOursOutcomeToFirstPush.p99),
        baseline: String(latency.pacedBareStartToPushDepthActivity.p99),
        ratio: c.pacedP99RatioAtDepth,
        target: '(reference)',
      },
    ],
    figures: {
      episodes: EPISODES,
      reps: REPS,
      lanes: LANES,
      warmup: WARMUP,
      teams: TEAMS,
      workerTuning: { name: tuningName, options: tuning },
      temporalArgs: bench.temporalArgs,
      perSecond: { ours: c.oursPerSecond, bare: c.barePerSecond },
      perSecondByRep: {
        ours: phases.ours.map((p) => round(p.perSecond, 1)),
        bare: phases.bare.map((p) => round(p.perSecond, 1)),
      },
      latencyMs: latency,
      ...(bench.activityMs.size ? { activityMs: bench.activityStats } : {}),
      repeats: { burst: phases.ours.map((p) => p.repeats), paced: paced.ours.repeats },
      cpuMsPerEpisode: {
        ours: phases.ours.map((p) => p.cpuMsPerEpisode),
        bare: phases.bare.map((p) => p.cpuMsPerEpisode),
      },
      ...(bench.countCommands
        ? { storeCommandsPerEpisode: phases.ours.map((p) => p.storeCommandsPerEpisode) }
        : {}),
      failedActivityAttempts: {
        ours: phases.ours.map((p) => p.failedAttempts),
        bare: phases.bare.map((p) => p.failedAttempts),
        pacedOurs: paced.ours.failedAttempts,
        pacedBare: paced.bare.failedAttempts,
      },
      throughputRatio: c.throughputRatio,
      p50Ratio: c.p50Ratio,
      p99Ratio: c.p99Ratio,
      p99RatioAtDepth: c.p99RatioAtDepth,
      pacedP50Ratio: c.pacedP50Ratio,
      pacedP99Ratio: c.pacedP99Ratio,
      pacedP99RatioAtDepth: c.pacedP99RatioAtDepth,
      paced: { episodes: PACED, paceMs: PACE_MS, oursSegmentsMs: bench.pacedSegments },
      targets: { throughput: TARGET_THROUGHPUT, p99: TARGET_P99, pacedP99: TARGET_PACED_P99 },
    },
    cdf: [
      { label: `burst: ours, outcome → first push`, points: cdfPoints(c.oursLatency) },
      { label: `burst: bare, start → first activity`, points: cdfPoints(c.bareLatency) },
      { label: `paced: ours, outcome → first push`, points: cdfPoints(paced.ours.latencyMs) },
      { label: `paced: bare, start → first activity`, points: cdfPoints(paced.bare.latencyMs) },
    ],
    notes: [
      `Each episode: a run completed through createRunsService; the episode workflow records it, then pushes to 3 ` +
        `endpoints and sends 1 signed callback (7 activities). Bare: bench/bareWorkflow.ts, 7 no-op activities in ` +
        `the same shape, on its own worker and task queue on the same dev server.`,
      `Burst: ${LANES} concurrent emitters (bare: starters), ${REPS} rep(s) of ${EPISODES}; latency under a burst ` +
        'is mostly queueing behind the episodes emitted before. Paced: one episode (or bare start) per ' +
        `${PACE_MS} ms, ${PACED} of each. "Outcome" is the emitter call (its run read and the workflow start included).`,
      `Worker: ${tuningName === 'default' ? 'createWorker with SDK defaults' : `Worker.create, tuning "${tuningName}"`}. ` +
        "Failed activity attempts (retried by Temporal) are counted from the SDK's warnings and listed in the figures.",
      'The push service, the callback receiver, both workers and the driver share one Node process.',
    ],
  };
  if (bench.metrics) printScrape(await scrapeBoth(bench));
  writeResults(METRICS ? 'episodes+metrics' : 'episodes', section);
}

/** The flow_notify_* series (no process metrics, no buckets) and the SDK's workflow and activity counts. */
function printScrape(scraped: string): void {
  log('a scrape after the bench (flow_notify_* series but process metrics, and the SDK\'s with "workflow"):');
  const ours = /^flow_notify_(?!process_|nodejs_)\w+(_total|_count|_sum)?({|\s)/;
  const sdk =
    /^temporal_(workflow_completed|activity_execution_latency_count|workflow_task_execution_latency_count)/;
  for (const line of scraped.split('\n'))
    if ((ours.test(line) && !line.includes('_bucket')) || sdk.test(line)) log(`  ${line}`);
}

if (require.main === module) runMain(async () => void (await runEpisodesBench()));
