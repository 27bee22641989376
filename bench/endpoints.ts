// npm run bench:endpoints: what a team's endpoints cost beside a run's own callback. ENDPOINTS (20) endpoints of
// one team, each on its own loopback receiver and subscribed to run.finished, and RUNS (100) runs launched with a
// callback URL on another receiver; the runs are then completed through the API at a steady RATE a second, so each
// completion is one event for every endpoint and one for the run's callback. The figure is the p99 from the
// completion request to each endpoint's first attempt against the p99 to the run callback's first attempt, both
// read off the receivers' clocks in the same run (target ≤ 1.5×), and the CPU per delivered event (endpoint
// deliveries and callbacks). Worker, API and receivers share the bench process (startFamilyStack), so that CPU is
// an upper bound on the worker's own. BENCH_REPS (1) repetitions, each with fresh runs.
import { adminOf } from '../test/support/admin';
import type { ApiClient } from '../test/support/harness';
import { waitUntil } from '../test/support/waitUntil';
import { CallbackReceiver, startFamilyStack, type FamilyStack, type ServerStack } from '../test/support';
import {
  commandLine,
  serversForFamilyStacks,
  installQuietRuntime,
  log,
  machineInfo,
  median,
  percentile,
  round,
  runMain,
  table,
  uniqueName,
  writeResults,
} from './support';
import { endpointPhases, phaseLines } from './endpointPhases';

const ENDPOINTS = Number(process.env.BENCH_ENDPOINTS_ENDPOINTS ?? 20);
const RUNS = Number(process.env.BENCH_ENDPOINTS_RUNS ?? 100);
const RATE = Number(process.env.BENCH_ENDPOINTS_RATE ?? 2);
const REPS = Number(process.env.BENCH_REPS ?? 1);
const TARGET_P99_RATIO = 1.5;
/** A repetition whose deliveries are not all in by then failed (a bound on a hang, not a figure). */
const SETTLE_TIMEOUT_MS = 10 * 60_000;
const TEAM = 'bench';

interface Rep {
  endpointMs: number[];
  callbackMs: number[];
  cpuMsPerDelivery: number;
  wallMs: number;
  /** When each run's completion was asked for (the bench's clock). */
  completedAt: Map<string, number>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** When a receiver first heard of each run (its body names the run by its id), on the receiver's clock. */
function firstArrivals(receiver: CallbackReceiver): Map<string, number> {
  const first = new Map<string, number>();
  for (const call of receiver.received) {
    const runId = /"(run_[0-9a-f]{32})"/.exec(call.body)?.[1] ?? '';
    const at = call.at.getTime();
    if (!first.has(runId) || at < first.get(runId)!) first.set(runId, at);
  }
  return first;
}

async function rep(
  owner: ApiClient,
  endpoints: CallbackReceiver[],
  callback: CallbackReceiver,
): Promise<Rep> {
  const runIds: string[] = [];
  for (let i = 0; i < RUNS; i++) {
    const res = await owner.post('/api/v1/runs', {
      title: `Bench run ${i}`,
      callback: { url: callback.url },
    });
    if (res.status !== 201) throw new Error(`launch: ${res.status} ${res.text}`);
    runIds.push(res.body.id as string);
  }
  const completedAt = new Map<string, number>();
  const cpu0 = process.cpuUsage();
  const start = Date.now();
  // A fixed schedule: a slow answer does not make the next completions a burst.
  await Promise.all(
    runIds.map(async (runId, i) => {
      await sleep(start + (i * 1000) / RATE - Date.now());
      completedAt.set(runId, Date.now());
      const res = await owner.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'done' });
      if (res.status >= 300) throw new Error(`complete: ${res.status} ${res.text}`);
    }),
  );
  const receivers = [...endpoints, callback];
  const heard = (r: CallbackReceiver) => runIds.filter((id) => firstArrivals(r).has(id)).length;
  await waitUntil(
    'every endpoint and callback heard of every run',
    () => receivers.every((r) => heard(r) === RUNS),
    {
      timeoutMs: SETTLE_TIMEOUT_MS,
    },
  );
  const wallMs = Date.now() - start;
  const cpu = process.cpuUsage(cpu0);
  const latencies = (r: CallbackReceiver) => {
    const first = firstArrivals(r);
    return runIds.map((id) => first.get(id)! - completedAt.get(id)!);
  };
  const deliveries = receivers.reduce((sum, r) => sum + r.received.length, 0);
  const measured = {
    endpointMs: endpoints.flatMap(latencies),
    callbackMs: latencies(callback),
    cpuMsPerDelivery: (cpu.user + cpu.system) / 1000 / deliveries,
    wallMs,
    completedAt,
  };
  for (const r of receivers) r.received.splice(0);
  return measured;
}

export async function runEndpointsBench(): Promise<{ p99Ratio: number; met: boolean }> {
  installQuietRuntime();
  const servers = await serversForFamilyStacks('bench-endpoints');
  const receivers: CallbackReceiver[] = [];
  let family: FamilyStack | undefined;
  try {
    family = await startFamilyStack({
      MONGO_DB: uniqueName('bench_endpoints'),
      CALLBACK_ALLOW_PRIVATE: '1',
      RUN_CREATE_RATE_LIMIT: String(RUNS * (REPS + 1)),
      SWEEP_INTERVAL_SECONDS: '86400',
    });
    const admin = adminOf(family.anonymous, 'ada', TEAM);
    const owner = family.anonymous.as('alice', TEAM);
    const endpoints: CallbackReceiver[] = [];
    for (let i = 0; i < ENDPOINTS; i++) {
      const receiver = await CallbackReceiver.start();
      receivers.push(receiver);
      const res = await admin.post('/api/v1/endpoints', { url: receiver.url, eventTypes: ['run.finished'] });
      if (res.status !== 201) throw new Error(`endpoint: ${res.status} ${res.text}`);
      endpoints.push(receiver);
    }
    const callback = await CallbackReceiver.start();
    receivers.push(callback);
    log(
      `bench:endpoints — ${ENDPOINTS} endpoints of one team and a run callback, ${RUNS} runs completed at ` +
        `${RATE}/s, ${REPS} rep(s); mongo ${servers.origin.mongo}, temporal ${servers.origin.temporal}`,
    );
    const reps: Rep[] = [];
    for (let r = 0; r < REPS; r++) {
      const done = await rep(owner, endpoints, callback);
      reps.push(done);
      const phases = await endpointPhases(family.client, done.completedAt);
      log(
        `  rep ${r + 1}: endpoints p50/p99 ${percentile(done.endpointMs, 50)}/${percentile(done.endpointMs, 99)} ms, ` +
          `callback p50/p99 ${percentile(done.callbackMs, 50)}/${percentile(done.callbackMs, 99)} ms, ` +
          `${round(done.cpuMsPerDelivery, 2)} ms CPU per delivery, wall ${round(done.wallMs / 1000, 1)} s; ` +
          'the path, off the histories:',
      );
      for (const line of phaseLines(phases)) log(line);
    }
    return report(servers, reps);
  } finally {
    await family?.stop();
    for (const receiver of receivers) await receiver.close();
    await servers.stop();
  }
}

function report(servers: ServerStack, reps: Rep[]): { p99Ratio: number; met: boolean } {
  const endpointP99 = median(reps.map((r) => percentile(r.endpointMs, 99)));
  const callbackP99 = median(reps.map((r) => percentile(r.callbackMs, 99)));
  const ratios = reps.map((r) => percentile(r.endpointMs, 99) / percentile(r.callbackMs, 99));
  const ratio = median(ratios);
  const cpuPerDelivery = round(median(reps.map((r) => r.cpuMsPerDelivery)), 2);
  const met = ratio <= TARGET_P99_RATIO;
  log('');
  log(
    table([
      ['figure', 'endpoints', 'run callback', 'ratio (median of reps)', 'target', 'met'],
      [
        'p99 completion → first attempt (ms)',
        endpointP99,
        callbackP99,
        round(ratio, 2),
        `≤ ${TARGET_P99_RATIO}`,
        met ? 'met' : 'NOT MET',
      ],
      ['CPU per delivered event (ms, bench process)', cpuPerDelivery, '', '', 'reported', ''],
    ]),
  );
  log(`p99 ratio per rep: ${ratios.map((r) => round(r, 2)).join(', ')}`);
  writeResults('endpoints', {
    title: 'Team endpoints beside a run callback',
    command: commandLine('endpoints.ts'),
    machine: machineInfo(),
    stack: servers.origin,
    headline: [
      {
        figure: `p99 completion → first attempt at each of ${ENDPOINTS} endpoints`,
        ours: `${endpointP99} ms`,
        baseline: `${callbackP99} ms (the run's callback)`,
        ratio: round(ratio, 2),
        target: `≤ ${TARGET_P99_RATIO}`,
        met,
      },
      {
        figure: 'CPU per delivered event (worker, API and receivers: one process)',
        ours: `${cpuPerDelivery} ms`,
        baseline: '–',
        ratio: NaN,
        target: 'reported',
      },
    ],
    figures: {
      endpoints: ENDPOINTS,
      runs: RUNS,
      ratePerSecond: RATE,
      reps: reps.map((r) => ({
        endpointP50: percentile(r.endpointMs, 50),
        endpointP99: percentile(r.endpointMs, 99),
        callbackP50: percentile(r.callbackMs, 50),
        callbackP99: percentile(r.callbackMs, 99),
        cpuMsPerDelivery: round(r.cpuMsPerDelivery, 2),
        wallMs: r.wallMs,
      })),
    },
    notes: [
      'Each completion is one run.finished for every endpoint and one callback for the run; latencies are from the ' +
        'completion request to the first attempt each receiver saw.',
      'Worker, API and the loopback receivers share the bench process: the CPU per delivery is an upper bound on the worker’s.',
    ],
  });
  return { p99Ratio: round(ratio, 2), met };
}

if (require.main === module) runMain(async () => void (await runEndpointsBench()));
