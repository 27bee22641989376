// npm run bench:memory: the worker's and the API's resident memory from the build (node dist/...), idle after
// every family was driven through them. Targets: worker ≤ 200 MB, API ≤ 120 MB.
//
// Builds dist/ first (npm run build; BENCH_MEMORY_BUILD=0 uses the dist/ there is), starts its own FerretDB and
// Temporal dev server (or uses MONGO_URL / TEMPORAL_ADDRESS), a loopback push service, a callback receiver and an
// operator webhook. Each repetition (BENCH_REPS, default 3) starts a fresh worker and API from dist/ as child
// processes, configured and flagged as production runs them (docs/configuration.md, docs/production.md: the
// worker with --max-semi-space-size=4; *_ALLOW_PRIVATE for the loopback stand-ins), on
// their own database and task queue, and drives BENCH_MEMORY_ROUNDS rounds (default 5), each:
//
//   push       a run paused for a human → its owner's device gets the push
//   callback   a run with a callback URL completed → the signed run.finished callback arrives
//   operator   a run with a callback URL failed → the run.failed callback and the run_failed alert arrive
//   health     a run with a budget reports usage past 80 % → the budget_warning alert arrives
//
// waiting on each delivery (never a sleep). Then both idle BENCH_MEMORY_SETTLE_SECONDS (default 20) and are
// sampled BENCH_MEMORY_SAMPLES times (default 5, one a second): VmRSS from /proc, the repetition's figure is
// the median of its samples (production gives no --expose-gc, so nothing forces a collection), and a goal is met
// when every repetition's figure is within it. Also printed:
// RSS right after start, the peak (VmHWM), and the idle RSS split into anonymous memory (heaps, native
// allocations) and file-backed pages (the node binary, the Temporal core library, mapped code).
//
// BENCH_MEMORY_NODE_ARGS: extra node flags for both children (e.g. to compare a flag); BENCH_MEMORY_SNAPSHOTS=dir:
// after the samples, a V8 heap snapshot of each (--heapsnapshot-signal=SIGUSR2) is written to that folder, for
// the DevTools Memory tab.
import { execFileSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import webpush from 'web-push';
import { mintToken } from '../api/auth';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import {
  CallbackReceiver,
  childProcessEnv,
  startProcess,
  startPushService,
  startServers,
  terminate,
  WorkerProcess,
  type PushService,
} from '../test/support';
import {
  commandLine,
  log,
  machineInfo,
  median,
  round,
  runMain,
  uniqueName,
  writeResults,
  type HeadlineRow,
} from './support';

const REPS = Number(process.env.BENCH_REPS ?? 3);
const ROUNDS = Number(process.env.BENCH_MEMORY_ROUNDS ?? 5);
const SETTLE_S = Number(process.env.BENCH_MEMORY_SETTLE_SECONDS ?? 20);
const SAMPLES = Number(process.env.BENCH_MEMORY_SAMPLES ?? 5);
const NODE_ARGS = (process.env.BENCH_MEMORY_NODE_ARGS ?? '').split(/\s+/).filter(Boolean);
/** The worker's flags as production runs it (docs/production.md, the Dockerfile): its young generation bounded. */
const WORKER_NODE_ARGS = ['--max-semi-space-size=4'];
const SNAPSHOTS = process.env.BENCH_MEMORY_SNAPSHOTS;
const DELIVERY_TIMEOUT_MS = 60_000;
const GOALS = { worker: 200, api: 120 } as const;
const SECRET = 'bench-memory-secret-0123456789abcdef';

type Name = keyof typeof GOALS;

/** Memory of a live process from /proc/<pid>/status, in MB (MiB, as `ps` and the issue count them). */
function memoryOf(pid: number): { rss: number; anon: number; file: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const mb = (field: string): number =>
    Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN) / 1024;
  return { rss: mb('VmRSS'), anon: mb('RssAnon'), file: mb('RssFile') + mb('RssShmem'), peak: mb('VmHWM') };
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `ready()` holds, checking every 50 ms; rejects with `what` after the timeout. */
async function until(what: string, ready: () => boolean, timeoutMs = DELIVERY_TIMEOUT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error(`not delivered within ${timeoutMs} ms: ${what}`);
    await delay(50);
  }
}

const spread = (values: number[], digits = 0): string =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

interface RepResult {
  atStart: Record<Name, number>;
  idle: Record<Name, number>;
  anon: Record<Name, number>;
  file: Record<Name, number>;
  peak: Record<Name, number>;
  samples: Record<Name, number[]>;
}

/** A heap snapshot of a child started with --heapsnapshot-signal=SIGUSR2, once its file is written. */
async function heapSnapshot(pid: number, dir: string, label: string): Promise<string> {
  const before = new Set(readdirSync(dir));
  process.kill(pid, 'SIGUSR2');
  let file: string | undefined;
  let lastSize = -1;
  await until(
    `heap snapshot of the ${label}`,
    () => {
      file ??= readdirSync(dir).find((f) => !before.has(f) && f.endsWith('.heapsnapshot'));
      if (!file) return false;
      // Written in one go: done once its size holds still between two checks.
      const size = statSync(path.join(dir, file)).size;
      const done = size > 0 && size === lastSize;
      lastSize = size;
      return done;
    },
    120_000,
  );
  return path.join(dir, file!);
}

async function rep(
  index: number,
  push: PushService,
  stack: { mongoUrl: string; temporalAddress: string },
): Promise<RepResult> {
  const callbacks = await CallbackReceiver.start();
  const opsHook = await CallbackReceiver.start();
  const vapid = webpush.generateVAPIDKeys();
  const port = await freePort();
  const vars = {
    MONGO_URL: stack.mongoUrl,
    MONGO_DB: uniqueName('memory'),
    TEMPORAL_ADDRESS: stack.temporalAddress,
    TEMPORAL_TASK_QUEUE: uniqueName('flow-notify-memory'),
    AUTH_JWT_SECRET: SECRET,
    VAPID_PUBLIC_KEY: vapid.publicKey,
    VAPID_PRIVATE_KEY: vapid.privateKey,
    PUSH_ALLOW_PRIVATE: '1',
    CALLBACK_ALLOW_PRIVATE: '1',
    OPS_ALERT_WEBHOOK_URL: opsHook.url,
    // The sweep's schedule stays out of the idle window (it would wake the worker once a pass).
    SWEEP_INTERVAL_SECONDS: '3600',
    PORT: String(port),
  };
  const nodeArgs = [...NODE_ARGS, ...(SNAPSHOTS ? ['--heapsnapshot-signal=SIGUSR2'] : [])];
  let worker: WorkerProcess | undefined;
  let api: { child: ChildProcess; output: () => string } | undefined;
  try {
    worker = await WorkerProcess.start({
      vars,
      trustCa: push.ca,
      command: {
        cwd: SNAPSHOTS ?? PROJECT_ROOT,
        args: [...WORKER_NODE_ARGS, ...nodeArgs, path.join(PROJECT_ROOT, 'dist/worker.js')],
      },
    });
    api = await startProcess(
      SNAPSHOTS ?? PROJECT_ROOT,
      [...nodeArgs, path.join(PROJECT_ROOT, 'dist/api/server.js')],
      childProcessEnv(vars),
      'flow-notify api: listening',
    );
    const pids: Record<Name, number> = { worker: worker.pid!, api: api.child.pid! };
    const atStart = { worker: memoryOf(pids.worker).rss, api: memoryOf(pids.api).rss };

    const base = `http://127.0.0.1:${port}/api/v1`;
    const token = await mintToken(SECRET, 'alice', 'acme');
    const call = async (method: string, route: string, body?: unknown): Promise<Record<string, unknown>> => {
      const res = await fetch(`${base}${route}`, {
        method,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${text}`);
      return text ? (JSON.parse(text) as Record<string, unknown>) : {};
    };
    const device = push.endpoint(`memory-${index}`);
    await call('POST', '/notifications/push/subscriptions', device);
    const alerts = (kind: string) =>
      opsHook.received.filter((r) => (JSON.parse(r.body) as { kind?: string }).kind === kind).length;
    const callbacksOf = (type: string) =>
      callbacks.received.filter((r) => (JSON.parse(r.body) as { type?: string }).type === type).length;

    for (let round = 1; round <= ROUNDS; round++) {
      // push: a pause for a human reaches the owner's device.
      const pushesBefore = push.received(device).length;
      const asking = await call('POST', '/runs', { title: `asks ${round}` });
      await call('POST', `/runs/${String(asking.id)}/pause`, { prompt: 'Ship it?' });
      await until('the pause push', () => push.received(device).length > pushesBefore);
      // callback: a finished run's signed callback.
      const finishing = await call('POST', '/runs', {
        title: `ends ${round}`,
        callback: { url: callbacks.url },
      });
      await call('POST', `/runs/${String(finishing.id)}/complete`, { finalAnswer: 'done' });
      await until('the run.finished callback', () => callbacksOf('run.finished') >= round);
      // operator: a failed run's alert (and its callback).
      const failing = await call('POST', '/runs', {
        title: `fails ${round}`,
        callback: { url: callbacks.url },
      });
      await call('POST', `/runs/${String(failing.id)}/fail`, { error: { code: 'E', message: 'boom' } });
      await until('the run_failed alert', () => alerts('run_failed') >= round);
      await until('the run.failed callback', () => callbacksOf('run.failed') >= round);
      // health: usage past 80 % of the run's budget.
      const spending = await call('POST', '/runs', { title: `spends ${round}`, budget: { limit: 10 } });
      await call('POST', `/runs/${String(spending.id)}/events`, { type: 'usage', spent: 9 });
      await until('the budget_warning alert', () => alerts('budget_warning') >= round);
    }

    await delay(SETTLE_S * 1000);
    const samples: Record<Name, number[]> = { worker: [], api: [] };
    const last: Record<Name, ReturnType<typeof memoryOf>> = {} as Record<Name, ReturnType<typeof memoryOf>>;
    for (let s = 0; s < SAMPLES; s++) {
      if (s) await delay(1000);
      for (const name of ['worker', 'api'] as const) {
        last[name] = memoryOf(pids[name]);
        samples[name].push(last[name].rss);
      }
    }
    if (SNAPSHOTS) {
      for (const name of ['worker', 'api'] as const)
        log(`  ${name} heap snapshot: ${await heapSnapshot(pids[name], SNAPSHOTS, name)}`);
    }
    return {
      atStart,
      idle: { worker: median(samples.worker), api: median(samples.api) },
      anon: { worker: last.worker.anon, api: last.api.anon },
      file: { worker: last.worker.file, api: last.api.file },
      peak: { worker: last.worker.peak, api: last.api.peak },
      samples,
    };
  } finally {
    if (api) await terminate(api.child);
    await worker?.stop(20_000);
    await callbacks.close();
    await opsHook.close();
  }
}

runMain(async () => {
  if (process.env.BENCH_MEMORY_BUILD !== '0') {
    log('bench:memory: npm run build');
    execFileSync('npm', ['run', '-s', 'build'], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
  if (SNAPSHOTS) mkdirSync(SNAPSHOTS, { recursive: true });
  const stack = await startServers('bench-memory', { temporal: true });
  const push = await startPushService();
  const results: RepResult[] = [];
  const origin = stack.origin;
  try {
    for (let i = 0; i < REPS; i++) {
      const result = await rep(i, push, stack);
      results.push(result);
      log(
        `rep ${i + 1}/${REPS}: idle RSS worker ${round(result.idle.worker, 0)} MB, api ${round(result.idle.api, 0)} MB ` +
          `(samples ${result.samples.worker.map((v) => round(v, 0)).join('/')} · ` +
          `${result.samples.api.map((v) => round(v, 0)).join('/')})`,
      );
    }
  } finally {
    await push.close();
    await stack.stop();
  }

  const of = (name: Name, key: keyof Omit<RepResult, 'samples'>) => results.map((r) => r[key][name]);
  const rows = (['worker', 'api'] as const).map((name) => {
    const idle = of(name, 'idle');
    // Met when every rep is: idle memory is bimodal (V8 may not have shrunk its heaps yet), and a median of
    // reps would pass a process that sometimes sits over its goal.
    const met = Math.max(...idle) <= GOALS[name];
    return {
      name,
      idle,
      met,
      line:
        `| ${name} | ${spread(of(name, 'atStart'))} | **${spread(idle)}** | ${spread(of(name, 'anon'))} | ` +
        `${spread(of(name, 'file'))} | ${spread(of(name, 'peak'))} | ≤ ${GOALS[name]} | ` +
        `${met ? 'yes' : '**no**'} |`,
    };
  });
  const title =
    `idle RSS from dist/ after ${ROUNDS} rounds of every family (push, callback, operator, health), ` +
    `${REPS} reps, median (min–max); MB = MiB`;
  log(
    [
      '',
      title,
      '',
      '| process | after start | idle (goal) | of it anonymous | of it file-backed | peak | goal | met |',
      '|---|---|---|---|---|---|---|---|',
      ...rows.map((r) => r.line),
      '',
      `idle: median of ${SAMPLES} samples a second apart after ${SETTLE_S} s idle, per rep; met: every rep ≤ goal` +
        (NODE_ARGS.length ? `; node ${NODE_ARGS.join(' ')}` : ''),
    ].join('\n'),
  );
  const headline: HeadlineRow[] = rows.map((r) => ({
    figure: `${r.name}: idle RSS from dist/ after every family, MB`,
    ours: spread(r.idle),
    baseline: `goal ${GOALS[r.name]}`,
    ratio: round(median(r.idle) / GOALS[r.name], 2),
    target: `≤ ${GOALS[r.name]} MB, every rep`,
    met: r.met,
  }));
  writeResults('memory', {
    title: 'Idle memory (worker and API from dist/)',
    command: commandLine('memory.ts'),
    machine: machineInfo(),
    stack: origin,
    headline,
    figures: {
      reps: REPS,
      rounds: ROUNDS,
      settleSeconds: SETTLE_S,
      samples: SAMPLES,
      nodeArgs: NODE_ARGS,
      perRep: results.map((r) => ({
        atStart: r.atStart,
        idle: r.idle,
        anonymous: r.anon,
        fileBacked: r.file,
        peak: r.peak,
        samples: r.samples,
      })),
    },
    notes: [title],
  });
});
