// npm run bench:escalation: a ladder at the size, timed. BENCH_ESCALATION_PAUSES (200) runs launched at once
// with a first rung at 5 s to carol (the loopback push service, which verifies VAPID and decrypts), nobody
// answering: from each pause's request to carol's rung push, the slowest against the target (every rung within
// 10 s of its pause), and each rung exactly once; beside it, from the request to the question's own push to its
// owner's device (alice's, as a real pause has). Then as many pauses answered within ±1 s of their rung's instant
// (offsets spread evenly): every rung that reached carol is replaced by the close on her device, and how many
// were still on the wire when the answer's response returned. Both at a few pauses: test/escalation.test.ts.
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import webpush from 'web-push';
import { interactionClaimKeys } from '../domain/interaction';
import type { PushPayload } from '../domain/push';
import { PROJECT_ROOT } from '../platform/embedded';
import { sourceEntryArgs } from '../scripts/sourceEntry';
import { startFamilyStack, startPushService, type FamilyStack } from '../test/support';
import type { ApiClient } from '../test/support/harness';
import { processStackVars } from '../test/support/processStack';
import { startWorkerProcessStack } from '../test/support/workerProcessStack';
import type { PushService, SubscriptionJSON } from '../test/support/pushService';
import { waitUntil } from '../test/support/waitUntil';
import { RUNG_STEP, type BareActivities } from './bareWorkflow';
import {
  commandLine,
  serversForFamilyStacks,
  installQuietRuntime,
  log,
  machineInfo,
  percentile,
  quietLogger,
  round,
  runMain,
  table,
  uniqueName,
  writeResults,
} from './support';

const PAUSES = Number(process.env.BENCH_ESCALATION_PAUSES ?? 200);
const RUNG_SECONDS = 5;
const TARGET_MAX_MS = 10_000;
const RACE_SPREAD_MS = 1000;
const LADDER = [{ afterSeconds: RUNG_SECONDS, to: ['carol'], via: 'push' }];

/** What the bench reads and drives: the stores, Temporal, the API; stopped in reverse. */
type System = Pick<FamilyStack, 'config' | 'stores' | 'client' | 'anonymous' | 'stop'>;

interface Bench {
  family: System;
  push: PushService;
  owner: ApiClient;
  /** The owner's device: each pause's question is pushed to it. */
  alice: SubscriptionJSON;
  carol: SubscriptionJSON;
}

interface Paused {
  runId: string;
  interactionId: string;
  /** When the pause was requested (epoch ms). */
  atMs: number;
}

const pushesTo = (bench: Bench, device: SubscriptionJSON, runId: string) =>
  bench.push.received(device).filter((r) => (r.payload as PushPayload).runId === runId);
const rungPushes = (bench: Bench, runId: string) => pushesTo(bench, bench.carol, runId);

/** Whether the device has received a push for every paused run. */
function everyRunPushed(bench: Bench, device: SubscriptionJSON, paused: Paused[]): boolean {
  const reached = new Set(bench.push.received(device).map((r) => (r.payload as PushPayload).runId));
  return paused.every((p) => reached.has(p.runId));
}

/** Waits until every claim is settled, reading only those still open, twice a second: a light load beside the run. */
async function claimsSettled(bench: Bench, what: string, keys: string[]): Promise<void> {
  const open = new Set(keys);
  await waitUntil(
    what,
    async () => {
      const settled = await Promise.all([...open].map((key) => bench.family.stores.claims.wasDelivered(key)));
      [...open].forEach((key, i) => settled[i] && open.delete(key));
      return open.size === 0;
    },
    { timeoutMs: 120_000 + PAUSES * 500, intervalMs: 500 },
  );
}

async function pauses(bench: Bench): Promise<Paused[]> {
  return Promise.all(
    Array.from({ length: PAUSES }, async () => {
      const created = await bench.owner.post('/api/v1/runs', {
        title: 'Deploy',
        escalation: { rungs: LADDER },
      });
      if (created.status !== 201) throw new Error(`launch: ${created.status} ${created.text}`);
      const runId = created.body.id as string;
      const atMs = Date.now();
      const res = await bench.owner.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Ship it?' });
      if (res.status !== 200) throw new Error(`pause: ${res.status} ${res.text}`);
      return { runId, interactionId: res.body.interactionId as string, atMs };
    }),
  );
}

/** Nobody answers: ms from each pause to carol's rung push, and how many pushes each rung made. */
async function unanswered(bench: Bench): Promise<{
  lateMs: number[];
  ownerPushMs: number[];
  repeats: number;
  storedMs: number[];
  afterDueMs: number[];
}> {
  const paused = await pauses(bench);
  // Waits on the push service's arrivals, in memory: reading 200 claims from the store every 100 ms added more store
  // commands than the system under test sent, on the same two cores. The claims are read once the pushes are in.
  await waitUntil(
    'every question and every rung pushed',
    () => everyRunPushed(bench, bench.alice, paused) && everyRunPushed(bench, bench.carol, paused),
    { timeoutMs: 120_000 + PAUSES * 500 },
  );
  await claimsSettled(
    bench,
    'every rung settled',
    paused.map((p) => interactionClaimKeys.rung(p.interactionId, 0)),
  );
  const lateMs = paused.map((p) => rungPushes(bench, p.runId)[0].at.getTime() - p.atMs);
  const ownerPushMs = paused.map((p) => pushesTo(bench, bench.alice, p.runId)[0].at.getTime() - p.atMs);
  const repeats = paused.reduce((sum, p) => sum + rungPushes(bench, p.runId).length - 1, 0);
  // Where the time went: the pause request until its question was stored (the rung's clock starts there), and the
  // rung's due time until its push.
  const asked = await Promise.all(
    paused.map(async (p) =>
      (await bench.family.stores.interactions.get(p.runId, p.interactionId))!.createdAt.getTime(),
    ),
  );
  const storedMs = paused.map((p, i) => asked[i] - p.atMs);
  const afterDueMs = paused.map(
    (p, i) => rungPushes(bench, p.runId)[0].at.getTime() - (asked[i] + RUNG_SECONDS * 1000),
  );
  return { lateMs, ownerPushMs, repeats, storedMs, afterDueMs };
}

/**
 * The same pauses on bare Temporal, in the same run and on the same server: one workflow each, at its barest
 * (bareLadderWorkflow: an activity where the question's push goes beside the rung's timer, then an activity where
 * the rung's push goes; the activities do nothing), all started at once, on a worker of their own in this process
 * (scheduled activities, where ours are local where they can be; run first, on a server that has served no
 * workflow of the bench yet). The floor
 * Temporal alone on these cores leaves the target, without our store, pushes, API or run health: from each start
 * to its rung's activity, and to its question's.
 */
async function bareFloor(system: System): Promise<{ rungMs: number[]; questionMs: number[] }> {
  const { config, client } = system;
  const rungAt = new Map<string, number>();
  const questionAt = new Map<string, number>();
  const activities: BareActivities = {
    async noop(id, step) {
      const at = Date.now();
      const seen = step === RUNG_STEP ? rungAt : questionAt;
      if (!seen.has(id)) seen.set(id, at);
    },
  };
  const taskQueue = `${config.temporalTaskQueue}-bare`;
  const workflowBundle = await bundleWorkflowCode({
    workflowsPath: require.resolve('./bareWorkflow'),
    logger: quietLogger,
  });
  const connection = await NativeConnection.connect({ address: config.temporalAddress });
  try {
    const worker = await Worker.create({
      connection,
      namespace: config.temporalNamespace,
      taskQueue,
      workflowBundle,
      activities,
    });
    const batch = Date.now().toString(36);
    // The worker runs until every bare pause is done (and its failure fails this).
    const started = await worker.runUntil(async () => {
      const pauses = await Promise.all(
        Array.from({ length: PAUSES }, async (_, i) => {
          const id = `bare-${batch}-${i}`;
          const atMs = Date.now();
          const handle = await client.workflow.start('bareLadderWorkflow', {
            taskQueue,
            workflowId: id,
            args: [id, RUNG_SECONDS],
          });
          return { id, atMs, handle };
        }),
      );
      await Promise.all(pauses.map(({ handle }) => handle.result()));
      return pauses;
    });
    return {
      rungMs: started.map(({ id, atMs }) => rungAt.get(id)! - atMs),
      questionMs: started.map(({ id, atMs }) => questionAt.get(id)! - atMs),
    };
  } finally {
    await connection.close();
  }
}

/**
 * Each pause answered at its rung's instant plus an offset in ±RACE_SPREAD_MS: the rungs that reached carol before
 * and after the answer's response (a send that read the question open may still be on the wire), and those the
 * close did not replace on her device (none may be).
 */
async function raced(bench: Bench): Promise<{ rungsBefore: number; rungsAfter: number; unreplaced: number }> {
  const paused = await pauses(bench);
  const answeredAt = await Promise.all(
    paused.map(async (p, i) => {
      const offsetMs = -RACE_SPREAD_MS + (2 * RACE_SPREAD_MS * i) / Math.max(1, PAUSES - 1);
      const waitMs = p.atMs + RUNG_SECONDS * 1000 + offsetMs - Date.now();
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, waitMs)));
      const res = await bench.owner.post(`/api/v1/runs/${p.runId}/interactions/${p.interactionId}/answer`, {
        answer: 'y',
      });
      if (res.status !== 200) throw new Error(`answer: ${res.status} ${res.text}`);
      return Date.now();
    }),
  );
  await claimsSettled(
    bench,
    'every close settled',
    paused.map((p) => interactionClaimKeys.answered(p.interactionId)),
  );
  // Every workflow ended: no rung can still come.
  await Promise.all(
    paused.map((p) => bench.family.client.workflow.getHandle(`interaction|${p.interactionId}`).result()),
  );
  const counted = { rungsBefore: 0, rungsAfter: 0, unreplaced: 0 };
  paused.forEach((p, i) => {
    const got = rungPushes(bench, p.runId);
    const rungs = got.filter((r) => (r.payload as PushPayload).kind === 'human_input_requested');
    for (const rung of rungs) counted[rung.at.getTime() > answeredAt[i] ? 'rungsAfter' : 'rungsBefore']++;
    if (rungs.length && (got.at(-1)!.payload as PushPayload).kind !== 'answered') counted.unreplaced++;
  });
  return counted;
}

/**
 * Where the worker runs (BENCH_ESCALATION_WORKER): `process` (the default), its own process as `npm start` runs it,
 * apart from the API, the push service and the bench's clients in this one; `inline`, all in this process (one
 * event loop for everything: what the bench measured before).
 */
const WORKER_PLACE = process.env.BENCH_ESCALATION_WORKER ?? 'process';

async function startSystem(vars: Record<string, string>, push: PushService): Promise<System> {
  if (WORKER_PLACE === 'inline') return startFamilyStack(vars, { push });
  if (WORKER_PLACE !== 'process') throw new Error('BENCH_ESCALATION_WORKER must be process or inline');
  const profileDir = process.env.BENCH_CPU_PROFILE;
  return startWorkerProcessStack(
    processStackVars({ db: 'bench_escalation', queue: 'bench-escalation' }, vars),
    {
      trustCa: push.ca,
      // The worker's CPU profile, written where BENCH_CPU_PROFILE says when it stops.
      ...(profileDir
        ? {
            command: {
              cwd: PROJECT_ROOT,
              args: ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, ...sourceEntryArgs('worker.ts')],
            },
          }
        : {}),
    },
  );
}

async function setUp(push: PushService): Promise<Bench> {
  const vapid = webpush.generateVAPIDKeys();
  const family = await startSystem(
    {
      MONGO_DB: uniqueName('bench_escalation'),
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:bench@flow.test',
      PUSH_ALLOW_PRIVATE: '1',
      // Every rung is measured as sent: none folded into a digest by the burst bound.
      PUSH_BURST_LIMIT: '100000',
      RUN_CREATE_RATE_LIMIT: String(2 * PAUSES + 10),
      SWEEP_INTERVAL_SECONDS: '86400',
      // The worker's task slots, when set in the bench's environment (the SDK's defaults otherwise).
      ...Object.fromEntries(
        ['WORKER_MAX_CONCURRENT_ACTIVITIES', 'WORKER_MAX_CONCURRENT_WORKFLOW_TASKS'].flatMap((name) =>
          process.env[name] ? [[name, process.env[name]!]] : [],
        ),
      ),
    },
    push,
  );
  const owner = family.anonymous.as('alice', 'bench');
  const [alice, carol] = [push.endpoint('alice'), push.endpoint('carol')];
  for (const [user, device] of [
    ['alice', alice],
    ['carol', carol],
  ] as const) {
    const res = await family.anonymous
      .as(user, 'bench')
      .post('/api/v1/notifications/push/subscriptions', device);
    if (res.status !== 201) throw new Error(`subscribe: ${res.status} ${res.text}`);
  }
  return { family, push, owner, alice, carol };
}

export async function runEscalationBench(): Promise<{ met: boolean }> {
  installQuietRuntime();
  const servers = await serversForFamilyStacks('bench-escalation');
  const push = await startPushService();
  let bench: Bench | undefined;
  try {
    bench = await setUp(push);
    log(
      `bench:escalation — ${PAUSES} pauses at once, a rung at ${RUNG_SECONDS} s to another person; ` +
        `mongo ${servers.origin.mongo}, temporal ${servers.origin.temporal}, worker ${WORKER_PLACE}`,
    );
    // Bare first, while our worker is idle: the floor the same cores and server leave.
    const bare = await bareFloor(bench.family);
    const bareMaxMs = Math.max(...bare.rungMs);
    const { lateMs, ownerPushMs, repeats, storedMs, afterDueMs } = await unanswered(bench);
    const { rungsBefore, rungsAfter, unreplaced } = await raced(bench);
    const maxMs = Math.max(...lateMs);
    const met = maxMs <= TARGET_MAX_MS && repeats === 0 && unreplaced === 0;
    log('');
    log(
      table([
        ['figure', 'value', 'target', 'met'],
        [
          `pause → rung push, p50 / p95 / max over ${PAUSES}`,
          `${percentile(lateMs, 50)} / ${percentile(lateMs, 95)} / ${maxMs} ms`,
          `max ≤ ${TARGET_MAX_MS} ms`,
          maxMs <= TARGET_MAX_MS ? 'met' : 'NOT MET',
        ],
        [
          `bare Temporal (same run): start → the rung's activity, p50 / p95 / max`,
          `${percentile(bare.rungMs, 50)} / ${percentile(bare.rungMs, 95)} / ${bareMaxMs} ms`,
          `ours / bare, max: ${round(maxMs / bareMaxMs, 2)}`,
          '',
        ],
        [
          "  bare: start → the question's activity, p50 / max",
          `${percentile(bare.questionMs, 50)} / ${Math.max(...bare.questionMs)} ms`,
          '',
          '',
        ],
        [
          "pause → the question's push to its owner, p50 / p95 / max",
          `${percentile(ownerPushMs, 50)} / ${percentile(ownerPushMs, 95)} / ${Math.max(...ownerPushMs)} ms`,
          '',
          '',
        ],
        [
          '  of which: pause request → question stored, p50 / max',
          `${percentile(storedMs, 50)} / ${Math.max(...storedMs)} ms`,
          '',
          '',
        ],
        [
          '  of which: rung due → rung push, p50 / max',
          `${percentile(afterDueMs, 50)} / ${Math.max(...afterDueMs)} ms`,
          '',
          '',
        ],
        ['rung pushes beyond one per pause', repeats, '0', repeats === 0 ? 'met' : 'NOT MET'],
        [
          `answered within ±${RACE_SPREAD_MS} ms of the rung: rungs before / after the answer's response`,
          `${rungsBefore} / ${rungsAfter}`,
          '–',
          '',
        ],
        ['  of which left unreplaced by the close', unreplaced, '0', unreplaced === 0 ? 'met' : 'NOT MET'],
      ]),
    );
    writeResults('escalation', {
      title: 'Escalation at size',
      command: commandLine('escalation.ts'),
      machine: machineInfo(),
      stack: servers.origin,
      headline: [
        {
          figure: `pause → rung push (${RUNG_SECONDS} s rung), max over ${PAUSES} pauses at once`,
          ours: `${maxMs} ms (p50 ${percentile(lateMs, 50)})`,
          baseline: `${bareMaxMs} ms bare Temporal (p50 ${percentile(bare.rungMs, 50)})`,
          ratio: round(maxMs / bareMaxMs, 2),
          target: `≤ ${TARGET_MAX_MS} ms, each once`,
          met: maxMs <= TARGET_MAX_MS && repeats === 0,
        },
        {
          figure: `answered within ±${RACE_SPREAD_MS} ms of the rung: rungs sent / left unreplaced by the close`,
          ours: `${rungsBefore + rungsAfter} / ${unreplaced}`,
          baseline: '–',
          ratio: NaN,
          target: 'none unreplaced',
          met: unreplaced === 0,
        },
      ],
      figures: {
        pauses: PAUSES,
        bareRungMs: bare.rungMs,
        bareQuestionMs: bare.questionMs,
        lateMs,
        ownerPushMs,
        storedMs,
        afterDueMs,
        repeats,
        rungsBefore,
        rungsAfter,
        unreplaced,
      },
      notes: [
        'The clock starts at each pause request; the rung is due 5 s after the question is stored.',
        'Bare: per pause, one bareLadderWorkflow (bench/bareWorkflow.ts: an activity, the rung timer, an activity; ' +
          'activities that do nothing), all started at once on a worker in the bench process; run first, on the same server.',
      ],
    });
    return { met };
  } finally {
    await bench?.family.stop();
    await push.close();
    await servers.stop();
  }
}

if (require.main === module) runMain(async () => void (await runEscalationBench()));
