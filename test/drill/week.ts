// The week drill: a model of several teams' week, run on Temporal's time-skipping server with the real workflows,
// the real activities and stores (FerretDB), a push service stand-in that verifies VAPID and decrypts, and
// loopback receivers. Each simulated hour the model draws (from its seed) run starts, pauses, answers and ends,
// bursts, quiet hours and do-not-disturb, outages of the push service, the callback receiver and the operator
// webhook; a sweep pass runs, then the server skips an hour (its timers fire: digests,
// callback retries, released pushes). After the week everything comes back and two more days pass. The oracle,
// from the model alone, lists what was owed: every push to every recipient of every episode, every callback of
// an ended run, every operator alert of a failed run; and counts each as delivered (a push, or held then sent in
// a digest), given up visibly (a digest's holds, the callback's attempt log), missing, or repeated.
//
// The activities read the server's clock (the time an attempt was scheduled, or the last one read), so quiet
// hours, do-not-disturb and burst windows are decided in simulated time. The sweep runs as a workflow each hour
// (the time-skipping server runs no schedules), and the API's runs service is called in-process on that clock.
import { randomBytes } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { InternalConnectionOptionsSymbol } from '@temporalio/client/lib/connection';
import { msToTs, tsToMs } from '@temporalio/common/lib/time';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import webpush from 'web-push';
import type { Db } from 'mongodb';
import { createActivities } from '../../activities';
import { activityContext } from '../../activities/activityContext';
import { digestPrefsChanged } from '../../client/digest';
import { createOutcomeEmitter, episodeOptions } from '../../client/emitter';
import { loadConfig, type Config } from '../../config';
import type { PushPayload } from '../../domain/push';
import { pushSenderFor } from '../../delivery/push/sender';
import { createRunsService, type RunsService } from '../../runs/service';
import { createStores, ensureAllIndexes, type Stores } from '../../store';
import { connectMongo, type Mongo } from '../../store/mongo';
import { sweepWorkflow } from '../../workflows/sweep';
import { CallbackReceiver } from '../support/callbackReceiver';
import { startPushService, type PushService, type SubscriptionJSON } from '../support/pushService';
import { random } from '../support/seeded';
import { TEST_JWT_SECRET } from '../support/stack';
import { workflowBundle } from '../support/workflowBundle';

export interface WeekDrillOptions {
  env: TestWorkflowEnvironment;
  temporalAddress: string;
  mongoUrl: string;
  seed: number;
  days: number;
  teams: number;
  peoplePerTeam: number;
  log?: (line: string) => void;
}

/** One family's count over the week: what was owed, and how each ended. */
export interface FamilyCount {
  owed: number;
  delivered: number;
  /** Pushes: held for a digest, then sent in one. */
  viaDigest?: number;
  /** Pushes: a pause answered before its push could go out (no longer owed). */
  answeredFirst?: number;
  givenUpVisibly: number;
  missing: number;
  repeated: number;
}

export interface WeekReport {
  seed: number;
  days: number;
  runs: number;
  episodes: number;
  push: FamilyCount;
  callback: FamilyCount;
  ops: FamilyCount;
  faults: { pushOutages: number; receiverOutages: number; opsOutages: number };
  holds: number;
  digests: number;
  /** What went wrong, one line each: missing deliveries, repeats past the bound. */
  violations: string[];
}

const HOUR = 3600_000;
const ZONES = ['UTC', 'America/New_York', 'Europe/Berlin', 'Asia/Tokyo'];

interface ModelRun {
  runId: string;
  teamId: string;
  ownerId: string;
  status: 'running' | 'paused' | 'ended';
  hasCallback: boolean;
  /** Each pause on a person's input: its interaction, whether it was answered, and whether the push service was
   * down at some hour while it waited (its push may then never go out before the answer). */
  pauses: { interactionId: string; answered: boolean; pushDown: boolean }[];
  end?: 'complete' | 'fail' | 'cancel';
}

/** A span of simulated hours during which a stand-in is down. */
interface Outage {
  until: number;
}

export async function runWeekDrill(options: WeekDrillOptions): Promise<WeekReport> {
  const { env, seed, days } = options;
  // A connection of its own: the environment's client unlocks time skipping while it waits on a result (the server
  // then leaps to its next timer; here time moves only when the drill skips an hour), and its keep-alive pings
  // every 30 s, which the test server answers with GOAWAY ("excess pings") after some minutes: a week-long run
  // stalled on one. This one pings every 10 minutes.
  const connection = await Connection.connect({
    address: options.temporalAddress,
    channelArgs: { 'grpc.keepalive_time_ms': 600_000, 'grpc.keepalive_permit_without_calls': 0 },
    // What the testing package passes for its own connection: the test service's methods (the clock, the skip).
    ...({ [InternalConnectionOptionsSymbol]: { supportsTestService: true } } as object),
  });
  const testService = connection.testService!;
  const client = new Client({ connection, namespace: 'default' });
  const serverTime = async () => tsToMs((await testService.getCurrentTime({})).time);
  const draw = random(seed);
  const chance = (p: number) => draw() < p;
  const pick = <T>(items: readonly T[]): T => items[Math.floor(draw() * items.length)];
  const log = options.log ?? (() => undefined);

  // The simulated clock: the server's time as last read, moved on by real time since, and never behind the
  // scheduled time of the activity attempt reading it (a timer may have just skipped hours ahead).
  let serverMs = await serverTime();
  let readAt = Date.now();
  const syncClock = async () => {
    serverMs = await serverTime();
    readAt = Date.now();
  };
  const now = (): Date => {
    const scheduled = activityContext()?.info.currentAttemptScheduledTimestampMs ?? 0;
    return new Date(Math.max(serverMs + (Date.now() - readAt), scheduled));
  };

  const push = await startPushService();
  const receiver = await CallbackReceiver.start();
  const opsHook = await CallbackReceiver.start();
  const vapid = webpush.generateVAPIDKeys();
  const config: Config = loadConfig({
    MONGO_URL: options.mongoUrl,
    MONGO_DB: `week_${seed}_${randomBytes(3).toString('hex')}`,
    TEMPORAL_ADDRESS: options.temporalAddress,
    TEMPORAL_TASK_QUEUE: `flow-notify-week-${seed}-${randomBytes(3).toString('hex')}`,
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    VAPID_SUBJECT: 'mailto:ops@flow.test',
    PUSH_ALLOW_PRIVATE: '1',
    CALLBACK_ALLOW_PRIVATE: '1',
    OPS_ALERT_WEBHOOK_URL: opsHook.url,
    SWEEP_INTERVAL_SECONDS: '3600',
  });
  const mongo: Mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureAllIndexes(mongo.db);
  const stores: Stores = createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds, now });
  const pushSender = pushSenderFor(config, { ca: push.ca });
  const bundle = await workflowBundle();
  // One worker for the week. Worker kills are the fault drill's (test/drill/scenario.ts, on the dev server): on the
  // time-skipping server a stopped worker's outstanding polls still take tasks, which then wait out their
  // start-to-close timeouts (ten minutes for a fan-out) while time is locked, and a week stalled on day one.
  const startWorker = async () => {
    const worker = await Worker.create({
      connection: env.nativeConnection,
      namespace: config.temporalNamespace,
      taskQueue: config.temporalTaskQueue,
      workflowBundle: bundle,
      activities: createActivities({ config, stores, client, pushSender, now, log: () => undefined }),
    });
    return { worker, running: worker.run() };
  };
  const worker = await startWorker();
  const runs: RunsService = createRunsService({
    ...stores,
    emitter: createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    }),
    now,
  });

  const report: WeekReport = {
    seed,
    days,
    runs: 0,
    episodes: 0,
    push: {
      owed: 0,
      delivered: 0,
      viaDigest: 0,
      answeredFirst: 0,
      givenUpVisibly: 0,
      missing: 0,
      repeated: 0,
    },
    callback: { owed: 0, delivered: 0, givenUpVisibly: 0, missing: 0, repeated: 0 },
    ops: { owed: 0, delivered: 0, givenUpVisibly: 0, missing: 0, repeated: 0 },
    faults: { pushOutages: 0, receiverOutages: 0, opsOutages: 0 },
    holds: 0,
    digests: 0,
    violations: [],
  };

  try {
    // The teams: everyone hears every run of their team (team-wide scope), one device each; a third keep quiet
    // hours in a zone of their own.
    const people = new Map<
      string,
      { teamId: string; userId: string; device: SubscriptionJSON; dndUntil?: number }
    >();
    const teams = Array.from({ length: options.teams }, (_, t) => `team${t}`);
    for (const teamId of teams) {
      for (let p = 0; p < options.peoplePerTeam; p++) {
        const userId = `p${p}`;
        const device = push.endpoint(`${teamId}-${userId}`);
        await stores.pushSubscriptions.upsert({ userId, teamId }, device, now());
        await stores.notificationPrefs.set(
          userId,
          teamId,
          {
            scope: 'team',
            ...(chance(1 / 3) ? { quietHours: { start: '22:00', end: '07:00', timeZone: pick(ZONES) } } : {}),
          },
          now(),
        );
        people.set(`${teamId}/${userId}`, { teamId, userId, device });
      }
    }

    const model: ModelRun[] = [];
    const outages: Record<'push' | 'receiver' | 'ops', Outage | undefined> = {
      push: undefined,
      receiver: undefined,
      ops: undefined,
    };
    const setDown = (what: 'push' | 'receiver' | 'ops', down: boolean) => {
      if (what === 'push') push.failRatio(down ? 1 : 0, 500);
      else (what === 'receiver' ? receiver : opsHook).answerAlways({ status: down ? 503 : 204 });
    };
    /** Every pause waiting now waited through a push service outage. */
    const pushWentDown = () => {
      for (const run of model) if (run.status === 'paused') run.pauses.at(-1)!.pushDown = true;
    };
    const caller = (run: ModelRun) => ({ userId: run.ownerId, teamId: run.teamId });
    const newRun = async (teamId: string): Promise<ModelRun> => {
      const ownerId = `p${Math.floor(draw() * options.peoplePerTeam)}`;
      const hasCallback = chance(0.6);
      const run = await runs.create(
        { userId: ownerId, teamId },
        { title: `Job ${report.runs}`, ...(hasCallback ? { callback: { url: receiver.url } } : {}) },
      );
      report.runs++;
      const entry: ModelRun = { runId: run._id, teamId, ownerId, status: 'running', hasCallback, pauses: [] };
      model.push(entry);
      return entry;
    };
    const end = async (run: ModelRun) => {
      const how = draw() < 0.6 ? 'complete' : draw() < 0.6 ? 'fail' : 'cancel';
      if (how === 'complete') await runs.complete(caller(run), run.runId, 'done');
      else if (how === 'fail')
        await runs.fail(caller(run), run.runId, { code: 'drill', message: 'it broke' });
      else await runs.cancel(caller(run), run.runId);
      run.status = 'ended';
      run.end = how;
      report.episodes++;
    };

    const hour = async (h: number, drive: boolean) => {
      if (drive) {
        if (outages.push) pushWentDown();
        for (const teamId of teams) {
          const starts = Math.floor(draw() * 3);
          for (let i = 0; i < starts; i++) await newRun(teamId);
          // A burst: a team ends eight runs at once (past the default bound of 5 pushes in 10 minutes).
          if (chance(0.03)) for (let i = 0; i < 8; i++) await end(await newRun(teamId));
        }
        for (const run of model) {
          if (run.status === 'running') {
            if (chance(0.3)) {
              const paused = await runs.pause(caller(run), run.runId, 'Approve the next step?');
              run.status = 'paused';
              run.pauses.push({
                interactionId: paused.interactionId,
                answered: false,
                pushDown: outages.push !== undefined,
              });
              report.episodes++;
            } else if (chance(0.3)) await end(run);
          } else if (run.status === 'paused' && chance(0.5)) {
            const pause = run.pauses.at(-1)!;
            await runs.answer(caller(run), run.runId, pause.interactionId, 'yes');
            pause.answered = true;
            run.status = 'running';
          }
        }
        for (const person of people.values()) {
          const at = now().getTime();
          if (person.dndUntil === undefined && chance(0.02)) {
            person.dndUntil = at + (1 + draw() * 29) * HOUR;
            await setDnd(person, new Date(person.dndUntil));
          } else if (person.dndUntil !== undefined && (person.dndUntil < at || chance(0.1))) {
            person.dndUntil = undefined;
            await setDnd(person, null);
          }
        }
        for (const what of ['push', 'receiver', 'ops'] as const) {
          const outage = outages[what];
          if (outage && outage.until <= h) {
            outages[what] = undefined;
            setDown(what, false);
          } else if (!outage && chance(0.02)) {
            const hours =
              what === 'receiver' ? 1 + draw() * 9 : what === 'push' ? 1 + draw() * 5 : 1 + draw() * 2;
            outages[what] = { until: h + Math.ceil(hours) };
            setDown(what, true);
            if (what === 'push') pushWentDown();
            report.faults[`${what === 'push' ? 'push' : what === 'receiver' ? 'receiver' : 'ops'}Outages`]++;
          }
        }
      }
      await client.workflow.execute(sweepWorkflow, {
        taskQueue: config.temporalTaskQueue,
        workflowId: `sweep-${config.temporalTaskQueue}-${h}`,
      });
      const before = await serverTime();
      await testService.unlockTimeSkippingWithSleep({ duration: msToTs(HOUR) });
      await syncClock();
      if (serverMs - before > 1.5 * HOUR)
        log(`hour ${h}: the server's clock moved ${(serverMs - before) / HOUR} h`);
    };
    const setDnd = async (person: { teamId: string; userId: string }, until: Date | null) => {
      await stores.notificationPrefs.set(
        person.userId,
        person.teamId,
        { scope: 'team', doNotDisturbUntil: until },
        now(),
      );
      await digestPrefsChanged(client, person.teamId, person.userId);
    };

    for (let h = 0; h < days * 24; h++) {
      await hour(h, true);
      if (h % 24 === 23) log(`day ${(h + 1) / 24}: ${report.runs} runs, ${report.episodes} episodes`);
    }
    // Everything comes back; two more days let digests, callback schedules and replays finish.
    for (const what of ['push', 'receiver', 'ops'] as const) setDown(what, false);
    for (const person of people.values())
      if (person.dndUntil !== undefined) {
        person.dndUntil = undefined;
        await setDnd(person, null);
      }
    for (let h = days * 24; h < (days + 2) * 24; h++) await hour(h, false);
    await countWeek(report, { model, people, push, receiver, opsHook, db: mongo.db, stores });
    return report;
  } finally {
    worker.worker.shutdown();
    await worker.running.catch(() => undefined);
    pushSender?.close();
    await connection.close();
    await mongo.client.close();
    await push.close();
    await receiver.close().catch(() => undefined);
    await opsHook.close().catch(() => undefined);
  }
}

/** The oracle: what the model says was owed, against what every receiver got and what the store says. */
async function countWeek(
  report: WeekReport,
  seen: {
    model: ModelRun[];
    people: Map<string, { teamId: string; userId: string; device: SubscriptionJSON }>;
    push: PushService;
    receiver: CallbackReceiver;
    opsHook: CallbackReceiver;
    db: Db;
    stores: Stores;
  },
): Promise<void> {
  const { model, people, push, receiver, opsHook, db } = seen;
  const miss = (line: string) => report.violations.push(line);

  // Pushes: per person, per run, the distinct episodes that reached their device, or were held and then sent in
  // a digest (or the digest gave up on them).
  const holds = await db.collection('push_holds').find({}).toArray();
  report.holds = holds.length;
  const digestsSent = new Set<string>();
  for (const person of people.values()) {
    const received = push.received(person.device).map((r) => r.payload as PushPayload);
    const perEpisode = new Map<string, number>();
    for (const payload of received) {
      if (payload.kind === 'digest') digestsSent.add(payload.episodeId);
      // A question's close (kind answered) carries the question's episode id: counted as its own delivery.
      const key = payload.kind === 'answered' ? `close|${payload.episodeId}` : payload.episodeId;
      perEpisode.set(key, (perEpisode.get(key) ?? 0) + 1);
    }
    for (const times of perEpisode.values()) if (times > 1) report.push.repeated += times - 1;
    const theirs = holds.filter((h) => h.teamId === person.teamId && h.userId === person.userId);
    const reachedIds = new Set([
      ...perEpisode.keys(),
      ...theirs
        .filter((h) => h.digestSentAt && digestsSent.has(h.digestId))
        .map((h) => h.episodeId as string),
    ]);
    for (const run of model.filter((r) => r.teamId === person.teamId)) {
      // The end is owed for good; a pause's push only while it waits: one answered while the push service was down
      // is no longer owed (its push may never have had a chance), and is counted apart.
      const episodes = [
        ...run.pauses.map((p) => ({
          id: `${run.runId}:input:${p.interactionId}`,
          answeredFirst: p.answered && p.pushDown,
        })),
        ...(run.end ? [{ id: `${run.runId}:end`, answeredFirst: false }] : []),
      ];
      for (const { id, answeredFirst } of episodes) {
        const hold = theirs.find((h) => h.episodeId === id);
        if (perEpisode.has(id)) report.push.delivered++;
        else if (reachedIds.has(id)) report.push.viaDigest! += 1;
        else if (hold?.digestGaveUpAt) report.push.givenUpVisibly++;
        else if (answeredFirst) {
          report.push.answeredFirst! += 1;
          continue;
        } else {
          report.push.missing++;
          const state = hold
            ? `held (${hold.reason}), ${hold.digestId ? `taken by ${hold.digestId}` : 'no digest took it'}`
            : 'never pushed nor held';
          miss(`push: ${person.teamId}/${person.userId} never got ${id}: ${state}`);
        }
        report.push.owed++;
      }
    }
  }
  report.digests = digestsSent.size;

  // Callbacks: each ended run with a callback, by its webhook-id among the answers that took it.
  const taken = (
    hook: CallbackReceiver,
    id: (body: Record<string, unknown>, headers: Record<string, unknown>) => string,
  ) => {
    const counts = new Map<string, number>();
    for (const r of hook.received.filter((r) => r.status >= 200 && r.status < 300)) {
      const key = id(JSON.parse(r.body) as Record<string, unknown>, r.headers);
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
    return counts;
  };
  const callbacks = taken(receiver, (_body, headers) => String(headers['webhook-id']));
  for (const run of model.filter((r) => r.status === 'ended' && r.hasCallback)) {
    report.callback.owed++;
    const times = callbacks.get(`${run.runId}:end`) ?? 0;
    if (times >= 1) report.callback.delivered++;
    if (times > 1) report.callback.repeated += times - 1;
    if (times === 0) {
      const attempts = await seen.stores.callbackAttempts.listForEpisode(`${run.runId}:end`, 1000);
      if (attempts.some((a) => a.gaveUp)) report.callback.givenUpVisibly++;
      else {
        report.callback.missing++;
        miss(`callback: ${run.runId} never taken (${attempts.length} attempt(s) logged)`);
      }
    }
  }

  // Operator alerts: one run_failed alert per failed run.
  const alerts = taken(opsHook, (body) => `${String(body.kind)}|${String(body.runId)}`);
  for (const run of model.filter((r) => r.end === 'fail')) {
    report.ops.owed++;
    const times = alerts.get(`run_failed|${run.runId}`) ?? 0;
    if (times >= 1) report.ops.delivered++;
    if (times > 1) report.ops.repeated += times - 1;
    if (times === 0) {
      report.ops.missing++;
      miss(`ops: no run_failed alert for ${run.runId}`);
    }
  }
  // No crash in the week: nothing may arrive twice.
  const repeats = report.push.repeated + report.callback.repeated + report.ops.repeated;
  if (repeats > 0) miss(`repeated ${repeats} deliveries (no crash allows one)`);
}

export function formatWeek(r: WeekReport): string {
  const family = (name: string, c: FamilyCount) =>
    `  ${name.padEnd(9)} owed ${c.owed}, delivered ${c.delivered}` +
    (c.viaDigest !== undefined ? ` (+${c.viaDigest} via digest)` : '') +
    (c.answeredFirst !== undefined ? `, answered before their push ${c.answeredFirst}` : '') +
    `, given up visibly ${c.givenUpVisibly}, missing ${c.missing}, repeated ${c.repeated}`;
  return [
    `week drill, seed ${r.seed}: ${r.days} day(s), ${r.runs} runs, ${r.episodes} episodes, ${r.holds} holds, ${r.digests} digests`,
    family('push', r.push),
    family('callback', r.callback),
    family('ops', r.ops),
    `  faults: ${r.faults.pushOutages} push service outages, ${r.faults.receiverOutages} receiver outages, ` +
      `${r.faults.opsOutages} operator webhook outages`,
    ...r.violations.map((v) => `  VIOLATION ${v}`),
  ].join('\n');
}
