// The fault drill, shared by `npm run drill` (test/drill/main.ts, full size, its own stack) and its small
// version in `npm test` (test/drill.test.ts, on a throwaway stack of its own).
//
// Runs are driven through the real API, each through a few pauses (human input, usage park) and an end
// (finished, failed, cancelled). Every outcome is emitted three times from two processes: once by the API's
// engine, once more by this (the API's) process through createOutcomeEmitter, and once by the runner CLI
// (`bin/flow-notify emit ... --disposition ack`) as a child process. Meanwhile, in turn and together: the worker
// process is SIGKILLed and restarted, the Temporal dev server and the Mongo-wire server are restarted, and the
// push service answers 500 to 30 % of requests for a while, then 429 with Retry-After to some. Afterwards the
// drill settles (sweeps included), then counts what every receiver got and checks the invariants.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import webpush from 'web-push';
import { PUSH_FAN_OUT_WIDTH } from '../../activities';
import type { SweepReport } from '../../activities/sweep';
import { startApi, type ApiHandle } from '../../api/server';
import { createOutcomeEmitter, episodeOptions } from '../../client/emitter';
import { sweepScheduleId } from '../../client/schedules';
import { loadConfig } from '../../config';
import type { OperatorAlert } from '../../domain/ops';
import type { PushPayload } from '../../domain/push';
import { PROJECT_ROOT, type ServerProcess } from '../../stack/embedded';
import { createStores } from '../../store';
import { MongoClient, MongoServerSelectionError, type Db } from 'mongodb';
import { connectMongo, type Mongo } from '../../store/mongo';
import {
  CallbackReceiver,
  childProcessEnv,
  startPushService,
  WorkerProcess,
  type PushService,
  type SubscriptionJSON,
} from '../support';
import { ApiClient } from '../support/harness';
import { TEST_JWT_SECRET } from '../support/stack';

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

interface FaultWindow {
  kind: 'kill' | 'temporal' | 'mongo';
  from: number;
  to: number;
}

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
}

type EndKind = 'complete' | 'fail' | 'cancel';

interface RunPlan {
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

interface EpisodePlan {
  episodeId: string;
  run: RunPlan;
  kind: 'input' | 'park' | 'end';
}

interface ApiRun {
  id: string;
  status: string;
  pause?: { reason: string; seq: number; interactionId?: string; wall?: string };
}

export async function runDrill(options: DrillOptions): Promise<DrillCounts> {
  const { stack, faults } = options;
  const log = options.log ?? (() => undefined);
  const started = Date.now();
  const suffix = randomBytes(4).toString('hex');
  const graceSeconds = 10;
  const cleanup: (() => Promise<unknown>)[] = [];
  const children = liveChildren;
  let stopping = false;

  try {
    const push: PushService = await startPushService();
    cleanup.push(() => push.close());
    const callbacks = await CallbackReceiver.start();
    cleanup.push(() => callbacks.close());
    const opsWebhook = await CallbackReceiver.start();
    cleanup.push(() => opsWebhook.close());

    const vapid = webpush.generateVAPIDKeys();
    const vars: Record<string, string> = {
      MONGO_URL: stack.mongoUrl,
      MONGO_DB: `drill_${suffix}`,
      TEMPORAL_ADDRESS: stack.temporalAddress,
      TEMPORAL_TASK_QUEUE: `flow-notify-drill-${suffix}`,
      AUTH_JWT_SECRET: TEST_JWT_SECRET,
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:drill@flow.test',
      PUSH_ALLOW_PRIVATE: '1',
      // The crowd user stands for a team's many devices (24 endpoints): above the default 20 per user.
      PUSH_MAX_SUBSCRIPTIONS_PER_USER: '32',
      CALLBACK_ALLOW_PRIVATE: '1',
      OPS_ALERT_WEBHOOK_URL: opsWebhook.url,
      STUDIO_URL: 'https://studio.flow.test',
      SWEEP_INTERVAL_SECONDS: '5',
      CLAIM_GRACE_SECONDS: String(graceSeconds),
      CALLBACK_RETRY_SECONDS: '1,1,2,2,4,8',
      CALLBACK_TIMEOUT_SECONDS: '5',
      HEALTH_REAP_SECONDS: '3',
      PORT: '0',
    };
    const config = loadConfig(vars);
    const taskQueue = config.temporalTaskQueue;

    const windows: FaultWindow[] = [];
    /**
     * Scripted receiver failures: a receiver answers its script in the order requests arrive, so the `count`
     * requests from index `from` on were the ones refused.
     */
    const scripted: { receiver: CallbackReceiver; from: number; count: number }[] = [];
    const refusedIndexes = (receiver: CallbackReceiver): Set<number> =>
      new Set(
        scripted
          .filter((s) => s.receiver === receiver)
          .flatMap((s) => Array.from({ length: s.count }, (_, i) => s.from + i))
          .filter((i) => i < receiver.received.length),
      );
    const kills: number[] = [];
    const counts = {
      apiEngineFailed: 0,
      inProcess: { started: 0, refused: 0, failed: 0 },
      cli: { started: 0, refused: 0, notEmitted: 0, failed: 0 },
      temporalRestarts: 0,
      mongoRestarts: 0,
      mongoRestartDuringCallbackRetry: false,
      opsOutage: { refused: 0, refusedBeforeKill: 0 },
      stuckSteps: 0,
      stuckRuns: [] as string[],
      runErrors: [] as string[],
    };

    // ----------------------------------------------------------------------------------------------------------
    // The system: the API in this process, the worker as a child process, the runner CLI as more children.
    const api: ApiHandle = await startApi(config, {
      log: (line) => {
        if (line.includes('outcome emit for')) counts.apiEngineFailed++;
      },
    });
    cleanup.push(() => api.close());
    // The in-process emitter reads runs like the API does, through the production connection.
    const mongo: Mongo = await connectMongo(config.mongoUrl, config.mongoDb);
    const db = mongo.db;
    cleanup.push(() => mongo.client.close());
    // The drill's own reads (claims) go through an observer that reconnects when its client stops selecting a
    // server, so a wedged client in the drill never passes for a fault of the system under test.
    const observer = observingDb(config.mongoUrl, config.mongoDb, log);
    cleanup.push(() => observer.close());
    type ClaimDoc = { _id: string; delivered: boolean; sent_at: Date; result?: string };
    const claimsOf = (d: Db) => d.collection<ClaimDoc>('sent_notifications');
    const stores = createStores(db, { claimGraceSeconds: graceSeconds });
    const connection = await Connection.connect({ address: config.temporalAddress });
    cleanup.push(() => connection.close());
    const client = new Client({ connection, namespace: config.temporalNamespace });
    cleanup.push(() =>
      client.schedule
        .getHandle(sweepScheduleId(taskQueue))
        .delete()
        .catch(() => undefined),
    );
    const emitter = createOutcomeEmitter({
      client,
      taskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    });

    // One lock for everything that stops or starts the worker, so a crash restart and a kill never overlap.
    let workerLock: Promise<void> = Promise.resolve();
    const withWorker = (task: (w: WorkerProcess) => Promise<void>): Promise<void> => {
      const next = workerLock.then(() => task(worker));
      workerLock = next.catch(() => undefined);
      return next;
    };
    const startUntilReady = async (w: WorkerProcess): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        try {
          await w.start();
          return;
        } catch (err) {
          log(`drill: worker start ${attempt} failed: ${String(err).split('\n')[0]}`);
          if (attempt >= 20) throw err;
          await sleep(1000);
        }
      }
    };
    const worker: WorkerProcess = await WorkerProcess.start({
      vars,
      trustCa: push.ca,
      onUnexpectedExit: (exit) => {
        log(`drill: the worker exited on its own (${exit.signal ?? exit.code}):\n${exit.tail.slice(-1500)}`);
        if (!stopping) void withWorker(startUntilReady).catch(() => undefined);
      },
    });
    cleanup.push(() => worker.stop());

    const api0 = new ApiClient(api.url);
    /** One API call, retried while the API answers 5xx or cannot be reached (a server is restarting). */
    const call = async (as: ApiClient, method: string, route: string, body?: unknown) => {
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
    };
    /** A run transition; a 409 after a retried call may mean an earlier try already applied it. */
    const transition = async (
      as: ApiClient,
      runId: string,
      op: string,
      body: unknown,
      applied: (run: ApiRun) => boolean,
    ): Promise<ApiRun & { interactionId?: string }> => {
      const res = await call(as, 'POST', `/api/v1/runs/${runId}/${op}`, body);
      if (res.status === 200) return (res.body.run ?? res.body) as ApiRun;
      const run = (await call(as, 'GET', `/api/v1/runs/${runId}`)).body as ApiRun;
      if (res.status === 409 && applied(run)) return run;
      throw new Error(`${op} of ${runId}: ${res.status} ${res.text}`);
    };

    // ----------------------------------------------------------------------------------------------------------
    // Teams, users, endpoints. Each team: two owners (2 and 1 endpoints), a watcher who chose team-wide scope,
    // and a bystander who did not (owed nothing). Team 0 also has a crowd of 24 team-wide endpoints, wider than
    // the fan-out, so kills catch full lanes in flight.
    const teamCount = Math.max(1, Math.ceil(options.runs / 5));
    const teams: TeamPlan[] = [];
    for (let t = 0; t < teamCount; t++) {
      const id = `team${t}-${suffix}`;
      const users: [string, number, boolean][] = [
        [`t${t}-owner-a`, 2, false],
        [`t${t}-owner-b`, 1, false],
        [`t${t}-watcher`, 1, true],
        [`t${t}-bystander`, 1, false],
        ...(t === 0 ? [[`t${t}-crowd`, 24, true] as [string, number, boolean]] : []),
      ];
      const team: TeamPlan = {
        id,
        owners: [users[0][0], users[1][0]],
        endpoints: new Map(),
        teamWide: [],
      };
      for (const [user, count, teamWide] of users) {
        const as = api0.as(user, id);
        const subs = Array.from({ length: count }, (_, i) => push.endpoint(`${user}-${i}`));
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
      teams.push(team);
    }
    const ends: EndKind[] = ['complete', 'fail', 'complete', 'cancel'];
    const runs: RunPlan[] = Array.from({ length: options.runs }, (_, index) => ({
      index,
      team: teams[index % teamCount],
      owner: teams[index % teamCount].owners[Math.floor(index / teamCount) % 2],
      withCallback: index % 3 !== 2,
      end: ends[index % ends.length],
      routeError: index % 5 === 0,
    }));
    const episodes: EpisodePlan[] = [];
    const totalSteps = options.runs * Math.max(1, options.episodesPerRun);
    let stepsDone = 0;
    const progress = () => stepsDone / totalSteps;

    // ----------------------------------------------------------------------------------------------------------
    // Emits: the API engine's own (inside each transition), then two more at once: this process's emitter
    // and the runner CLI.
    const cliSlot = semaphore(options.cliConcurrency ?? 2);
    const runSlot = semaphore(options.runConcurrency ?? 10);
    const cliEnv = childProcessEnv({ ...vars, FLOW_NOTIFY_FROM_SOURCE: '1' }); // the code as it is, not a stale dist/
    const runnerCli = (run: RunPlan) =>
      cliSlot(
        () =>
          new Promise<void>((resolve) => {
            const child = spawn(
              path.join(PROJECT_ROOT, 'bin/flow-notify'),
              ['emit', '--run', run.id!, '--team', run.team.id, '--disposition', 'ack'],
              { cwd: PROJECT_ROOT, env: cliEnv, stdio: ['ignore', 'pipe', 'pipe'] },
            );
            children.add(child);
            let out = '';
            let err = '';
            child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
            child.stderr!.on('data', (chunk: Buffer) => (err += chunk.toString()));
            child.on('exit', (code) => {
              children.delete(child);
              if (code !== 0) {
                counts.cli.failed++;
                log(`drill: runner CLI for ${run.id} exited ${code}: ${err.trim().split('\n').pop()}`);
              } else {
                try {
                  const result = JSON.parse(out.trim().split('\n').pop() ?? '') as {
                    emitted: boolean;
                    started?: boolean;
                  };
                  if (!result.emitted) counts.cli.notEmitted++;
                  else if (result.started) counts.cli.started++;
                  else counts.cli.refused++;
                } catch {
                  counts.cli.failed++;
                }
              }
              resolve();
            });
          }),
      );
    const emitTwiceMore = async (run: RunPlan): Promise<void> => {
      await Promise.all([
        emitter.emitRunOutcome(run.id!).then(
          (result) => void (result?.started ? counts.inProcess.started++ : counts.inProcess.refused++),
          (err: unknown) => {
            counts.inProcess.failed++;
            log(`drill: in-process emit for ${run.id} failed: ${String(err).split('\n')[0]}`);
          },
        ),
        runnerCli(run),
      ]);
    };

    /** Waits until the episode's push claim is settled: the run only moves on from a pause once it is. */
    const pushSettled = async (episodeId: string): Promise<void> => {
      const deadline = Date.now() + (options.stepTimeoutMs ?? 240_000);
      while (Date.now() < deadline) {
        try {
          const row = await observer.use((d) => claimsOf(d).findOne({ _id: episodeId }));
          if (row?.delivered) return;
        } catch {
          // Mongo is restarting
        }
        await sleep(250);
      }
      counts.stuckSteps++;
      log(`drill: the push of ${episodeId} did not settle in time; moving on`);
    };

    const driveRun = async (run: RunPlan): Promise<void> => {
      // Staggered, so the runs are at different steps when faults land.
      await sleep((run.index % (options.runConcurrency ?? 10)) * 300);
      const as = api0.as(run.owner, run.team.id);
      const created = await call(as, 'POST', '/api/v1/runs', {
        title: `Drill run ${run.index}`,
        ...(run.withCallback ? { callback: { url: callbacks.url } } : {}),
      });
      if (created.status !== 201) throw new Error(`create: ${created.status} ${created.text}`);
      run.id = created.body.id as string;
      run.secret = created.body.callback?.secret as string | undefined;
      const runId = run.id;

      for (let step = 0; step < options.episodesPerRun - 1; step++) {
        let episodeId: string;
        if (step % 2 === 0) {
          const paused = await transition(
            as,
            runId,
            'pause',
            { prompt: `Approve step ${step} of run ${run.index}?` },
            (r) => r.status === 'paused' && r.pause?.reason === 'human_input' && r.pause.seq === step + 1,
          );
          const interactionId = paused.pause?.interactionId;
          episodeId = `${runId}:input:${interactionId}`;
          episodes.push({ episodeId, run, kind: 'input' });
          await emitTwiceMore(run);
          await pushSettled(episodeId);
          try {
            await transition(
              as,
              runId,
              `interactions/${interactionId}/answer`,
              { answer: 'yes' },
              (r) => r.status === 'running',
            );
          } catch (err) {
            // The run cannot be answered any more (seen after a Mongo restart before the engine's answer became
            // retry-safe: the answer was stored, the transition was not, and the retry was refused as "already
            // answered"). Counted as a violation, and the run is cancelled so the drill goes on.
            const reason = err instanceof Error ? err.message : String(err);
            counts.stuckRuns.push(reason);
            log(`drill: STUCK RUN: ${reason}`);
            run.end = 'cancel';
            stepsDone += options.episodesPerRun - 1 - step;
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
          await emitTwiceMore(run);
          await pushSettled(episodeId);
          await transition(as, runId, 'resume', {}, (r) => r.status === 'running');
        }
        stepsDone++;
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
      await Promise.all([emitTwiceMore(run), ...reports]);
      stepsDone++;
    };

    // ----------------------------------------------------------------------------------------------------------
    // Faults, driven by the drive's progress so they land mid-drive whatever the machine's speed.
    let driveDone = false;
    const killOnce = () =>
      withWorker(async (w) => {
        await w.kill();
        const at = Date.now();
        kills.push(at);
        windows.push({ kind: 'kill', from: at - 3000, to: at + 1000 });
        log(`drill: worker SIGKILLed (kill ${kills.length}, ${Math.round(progress() * 100)} % driven)`);
        await startUntilReady(w);
      });
    const killLoop = async (): Promise<void> => {
      if (faults.workerKills === Infinity) {
        const [min, max] = faults.killEverySeconds ?? [3, 6];
        while (!driveDone && progress() < 0.85) {
          await sleep(between(min, max) * 1000);
          if (driveDone || progress() >= 0.85) break;
          await killOnce();
        }
        return;
      }
      for (let k = 0; k < faults.workerKills; k++) {
        const at = 0.15 + (0.7 * (k + 0.5)) / faults.workerKills;
        while (!driveDone && progress() < at) await sleep(100);
        if (driveDone) break;
        // Aim for the middle of a fan-out: a moment when the push service has just accepted a message.
        const aimUntil = Date.now() + 15_000;
        while (Date.now() < aimUntil) {
          const last = push.received().at(-1);
          if (last && Date.now() - last.at.getTime() < 15) break;
          await sleep(2);
        }
        await killOnce();
      }
    };
    const restart = async (kind: 'temporal' | 'mongo', server: ServerProcess | undefined) => {
      if (!server) {
        log(`drill: no ${kind} server process to restart (external server); skipped`);
        return;
      }
      const from = Date.now();
      await server.restart();
      windows.push({ kind, from: from - 1000, to: Date.now() + (kind === 'temporal' ? 15_000 : 6000) });
      if (kind === 'temporal') counts.temporalRestarts++;
      else counts.mongoRestarts++;
      log(`drill: ${kind} restarted in ${Date.now() - from} ms (${Math.round(progress() * 100)} % driven)`);
    };
    /**
     * The Mongo restart lands while a callback is retrying: the receiver refuses the next few attempts, and the
     * restart begins right after the first refusal, while that callback's branch holds its claim and waits on its
     * retry timer (its next attempt reads the run from the restarting store). Without receiver failures, or if no
     * callback comes within a minute, it restarts anyway (and the counts say so).
     */
    const restartMongoWhileCallbackRetries = async (): Promise<void> => {
      if (faults.receiverFailures && stack.mongoServer) {
        const from = callbacks.received.length + callbacks.pendingAnswers;
        scripted.push({ receiver: callbacks, from, count: 4 });
        callbacks.answer({ status: 503 }, { status: 503 }, { status: 503 }, { status: 503 });
        const deadline = Date.now() + 60_000;
        while (callbacks.received.length <= from && Date.now() < deadline) await sleep(20);
        counts.mongoRestartDuringCallbackRetry = callbacks.received.length > from;
        log(
          counts.mongoRestartDuringCallbackRetry
            ? 'drill: a callback attempt was just refused (its branch is retrying): restarting Mongo'
            : 'drill: no callback came within a minute: restarting Mongo without one retrying',
        );
      }
      await restart('mongo', stack.mongoServer);
    };
    const serverFaults = async (): Promise<void> => {
      const plan: [number, () => unknown][] = [
        [0.1, () => faults.push500Ratio > 0 && push.failRatio(faults.push500Ratio, 500)],
        [
          0.2,
          () => {
            if (!faults.receiverFailures) return;
            scripted.push({ receiver: callbacks, from: callbacks.received.length, count: 3 });
            callbacks.answer(
              { status: 503 },
              { status: 500 },
              { status: 429, headers: { 'retry-after': '1' } },
            );
            scripted.push({ receiver: opsWebhook, from: opsWebhook.received.length, count: 2 });
            opsWebhook.answer({ status: 500 }, { status: 502 });
          },
        ],
        [0.3, () => faults.temporalRestarts > 0 && restart('temporal', stack.temporalServer)],
        [
          0.45,
          () => {
            if (faults.push429Ratio > 0) push.failRatio(faults.push429Ratio, 429, { 'retry-after': '1' });
            else push.failRatio(0);
          },
        ],
        [
          0.5,
          async () => {
            if (!faults.opsOutageKill) return;
            const from = opsWebhook.received.length;
            opsWebhook.answerAlways({ status: 503 });
            log('drill: operator webhook down (503)');
            // Alerts come with failed ends and router reports; wait for one to be refused (it is then retrying).
            const aimUntil = Date.now() + 90_000;
            while (opsWebhook.received.length === from && Date.now() < aimUntil && !driveDone)
              await sleep(200);
            counts.opsOutage.refusedBeforeKill = opsWebhook.received.length - from;
            await killOnce();
            await sleep(5000);
            // Every POST the outage saw was refused; registering them and lifting it is one synchronous step.
            const count = opsWebhook.received.length - from;
            scripted.push({ receiver: opsWebhook, from, count });
            opsWebhook.answerAlways({ status: 204 });
            counts.opsOutage.refused = count;
            log(
              `drill: operator webhook back after ${count} refused alert POSTs ` +
                `(${counts.opsOutage.refusedBeforeKill} before the worker kill)`,
            );
          },
        ],
        [0.6, () => faults.mongoRestarts > 0 && restartMongoWhileCallbackRetries()],
        [
          0.65,
          () => {
            if (!faults.receiverFailures) return;
            scripted.push({ receiver: callbacks, from: callbacks.received.length, count: 2 });
            callbacks.answer({ status: 500 }, { status: 503 });
          },
        ],
        [0.75, () => push.failRatio(0)],
      ];
      // Each fault starts at its point of the drive and runs on its own: one that waits for its moment (the
      // operator outage waits for a refused alert) never holds back the ones after it.
      const started: Promise<unknown>[] = [];
      for (const [at, fault] of plan) {
        while (!driveDone && progress() < at) await sleep(100);
        if (driveDone) break;
        started.push(Promise.resolve(fault()));
      }
      await Promise.all(started);
    };

    const driveStarted = Date.now();
    const ticker = setInterval(() => {
      log(
        `drill: ${stepsDone}/${totalSteps} steps, ${push.received().length} pushes, ` +
          `${callbacks.received.length} callbacks, ${opsWebhook.received.length} alerts, ${kills.length} kills`,
      );
    }, 10_000);
    const faultLoops = Promise.all([killLoop(), serverFaults()]);
    try {
      await Promise.all(
        runs.map((run) =>
          runSlot(() => driveRun(run)).catch((err: unknown) => {
            const reason = `run ${run.index} (${run.id}): ${err instanceof Error ? err.message : String(err)}`;
            counts.runErrors.push(reason);
            log(`drill: DRIVE ERROR: ${reason}`);
          }),
        ),
      );
    } finally {
      driveDone = true;
      clearInterval(ticker);
      await faultLoops;
    }
    const driveSeconds = (Date.now() - driveStarted) / 1000;
    log(`drill: drive done in ${driveSeconds.toFixed(1)} s; settling`);

    // ----------------------------------------------------------------------------------------------------------
    // Settle: faults off, a live worker, and sweeps until every owed claim is delivered and nothing is running.
    push.failRatio(0);
    const settleStarted = Date.now();
    await withWorker(async (w) => {
      if (!w.running) await startUntilReady(w);
    });
    const owedKeys = (): string[] =>
      episodes.flatMap((e) => [
        e.episodeId,
        ...(e.kind === 'end' && e.run.withCallback ? [`cb|${e.episodeId}`] : []),
        ...(e.kind === 'end' && e.run.end === 'fail' ? [`ops|${e.episodeId}`] : []),
        ...(e.kind === 'end' && e.run.routeError ? [`ops|route:${e.run.id}:d1`] : []),
      ]);
    const sweep = async (): Promise<SweepReport | undefined> => {
      try {
        return (await Promise.race([
          client.workflow.execute('sweepWorkflow', {
            taskQueue,
            workflowId: `drill-sweep-${Date.now()}`,
          }),
          sleep(60_000).then(() => undefined),
        ])) as SweepReport | undefined;
      } catch (err) {
        log(`drill: sweep failed: ${String(err)}`);
        return undefined;
      }
    };
    const openEpisodes = async (): Promise<number> => {
      let open = 0;
      for await (const _ of client.workflow.list({
        query: `TaskQueue = "${taskQueue}" AND ExecutionStatus = "Running" AND WorkflowType IN ("episodeWorkflow", "operatorAlertWorkflow")`,
      }))
        open++;
      return open;
    };
    const settleDeadline = Date.now() + (options.settleTimeoutMs ?? 300_000);
    let lastSweep = Date.now();
    for (;;) {
      let unsettled = -1;
      let open = -1;
      let pending = -1;
      try {
        const keys = owedKeys();
        const delivered = await observer.use((d) =>
          claimsOf(d).countDocuments({ _id: { $in: keys }, delivered: true }),
        );
        unsettled = keys.length - delivered;
        pending = await observer.use((d) => claimsOf(d).countDocuments({ delivered: false }));
        open = await openEpisodes();
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
        await sweep();
        lastSweep = Date.now();
      }
      await sleep(1000);
    }
    const finalSweep = await sweep();
    // Let the run-health workflows reap (HEALTH_REAP_SECONDS) and the sweep's own schedule finish its pass.
    await sleep(4000);
    const settleSeconds = (Date.now() - settleStarted) / 1000;

    // ----------------------------------------------------------------------------------------------------------
    // Count.
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
    const byPair = new Map<string, ReturnType<PushService['received']>>();
    for (const received of push.received()) {
      const payload = received.payload as PushPayload;
      const key = `${payload.episodeId}|${received.endpointId}`;
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
      if (!owedPairs.has(key)) {
        pushCounts.unexpected += got.length;
        continue;
      }
      pushCounts.delivered++;
      const [first, ...repeats] = got;
      const firstPayload = first.payload as PushPayload;
      for (const repeat of repeats) {
        pushCounts.repeated++;
        const payload = repeat.payload as PushPayload;
        if (
          payload.tag !== firstPayload.tag ||
          payload.tag !== firstPayload.episodeId ||
          JSON.stringify(payload) !== JSON.stringify(firstPayload)
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

    // Callbacks: one per ended run that asked for one, every attempt under its episode's id, all verifiable.
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

    // Operator alerts: each failed run's, and each reported router decision's, exactly once.
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
      missing: 0,
      missingKeys: [],
      unexpected: 0,
    };
    /** How the dispatching workflow's activity attempts went, from its history. */
    const postAttempts = async (workflowId: string): Promise<string> => {
      try {
        const history = await client.workflow.getHandle(workflowId).fetchHistory();
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
    };
    const alertsByKey = new Map<string, number>();
    const alertTimes = new Map<string, Date[]>();
    const refusedAlerts = refusedIndexes(opsWebhook);
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
      alertCounts.byKind[alert.kind] = (alertCounts.byKind[alert.kind] ?? 0) + 1;
      if (!owedAlerts.has(alert.episodeKey)) alertCounts.unexpected++;
    }
    for (const key of owedAlerts) {
      const n = alertsByKey.get(key) ?? 0;
      if (n === 0) {
        alertCounts.missing++;
        alertCounts.missingKeys.push(key);
      } else if (n > 1) {
        alertCounts.duplicates += n - 1;
        // The evidence: when each copy arrived, and how far the first was from the nearest kill.
        const times = alertTimes.get(key) ?? [];
        const first = times[0]?.getTime() ?? 0;
        const nearest = kills.reduce(
          (best, k) => (Math.abs(k - first) < Math.abs(best - first) ? k : best),
          0,
        );
        const offset = nearest ? `; first copy ${((first - nearest) / 1000).toFixed(1)} s from a kill` : '';
        alertCounts.duplicateKeys.push(
          `${key} (at ${times.map((t) => t.toISOString()).join(', ')}${offset}; ` +
            `${await postAttempts(key.startsWith('route:') ? `ops|${key}` : key)})`,
        );
      }
    }

    // Claims and workflows.
    const pendingRows = await observer.use((d) => claimsOf(d).find({ delivered: false }).toArray());
    const claimCounts = {
      pending: pendingRows.length,
      pendingPastGrace: pendingRows.filter((r) => r.sent_at.getTime() < Date.now() - graceSeconds * 1000)
        .length,
    };
    const workflowCounts: DrillCounts['workflows'] = { total: 0, byStatus: {}, failed: [], running: [] };
    for await (const info of client.workflow.list({ query: `TaskQueue = "${taskQueue}"` })) {
      workflowCounts.total++;
      const status = info.status.name;
      workflowCounts.byStatus[status] = (workflowCounts.byStatus[status] ?? 0) + 1;
      if (['FAILED', 'TERMINATED', 'TIMED_OUT', 'CANCELLED'].includes(status)) {
        workflowCounts.failed.push(`${info.type}/${info.workflowId}: ${status}`);
      }
      if (status === 'RUNNING') workflowCounts.running.push(`${info.type}/${info.workflowId}`);
    }

    const answers = pushCounts.answers;
    const result: DrillCounts = {
      runs: options.runs,
      episodes: episodes.length,
      durationSeconds: {
        drive: driveSeconds,
        settle: settleSeconds,
        total: (Date.now() - started) / 1000,
      },
      push: pushCounts,
      callbacks: cbCounts,
      alerts: alertCounts,
      emits: {
        apiEngineFailed: counts.apiEngineFailed,
        inProcess: counts.inProcess,
        cli: counts.cli,
      },
      claims: claimCounts,
      stuckSteps: counts.stuckSteps,
      stuckRuns: counts.stuckRuns,
      runErrors: counts.runErrors,
      finalSweep,
      workflows: workflowCounts,
      faults: {
        workerKills: kills.length,
        workerStarts: worker.starts,
        unexpectedWorkerExits: worker.unexpectedExits.length,
        temporalRestarts: counts.temporalRestarts,
        mongoRestarts: counts.mongoRestarts,
        mongoRestartDuringCallbackRetry: counts.mongoRestartDuringCallbackRetry,
        push500Answers: answers['500'] ?? 0,
        push429Answers: answers['429'] ?? 0,
        receiverFailureAnswers: refusedIndexes(callbacks).size + refusedAlerts.size,
        opsOutage: counts.opsOutage,
      },
      violations: [],
    };
    result.violations = drillViolations(result, options);
    return result;
  } finally {
    stopping = true;
    for (const child of children) child.kill('SIGKILL');
    for (const step of cleanup.reverse()) {
      try {
        await step();
      } catch (err) {
        log(`drill: cleanup: ${String(err)}`);
      }
    }
    // Whatever happened, leave the servers running for whoever uses them next.
    for (const server of [stack.temporalServer, stack.mongoServer]) {
      if (server && !server.running) await server.start().catch(() => undefined);
    }
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

/** The issue's invariants over the counts; each violation is one line. */
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
  if (c.push.maxRepeatsPerKillAndEpisode > PUSH_FAN_OUT_WIDTH) {
    v.push(
      `one kill repeated ${c.push.maxRepeatsPerKillAndEpisode} sends of one episode (> ${PUSH_FAN_OUT_WIDTH})`,
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
      `duplicates ${c.alerts.duplicates}, missing ${c.alerts.missing}, unexpected ${c.alerts.unexpected}`,
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
