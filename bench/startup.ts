// npm run bench:startup: the worker's and the API's start-up time and idle memory, from the build (node dist/...)
// next to ts-node (what npm start runs), on the embedded servers (or MONGO_URL / TEMPORAL_ADDRESS).
// Builds dist/ first (npm run build). Per process and mode, STARTUP_REPS runs (default 5): time from spawn to
// the ready line, and the resident set (VmRSS) after STARTUP_IDLE_SECONDS of idling (default 5). Prints median
// and spread (min–max). Targets: worker ≤ 200 MB, API ≤ 120 MB idle from dist/.
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import webpush from 'web-push';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import { sourceEntryArgs } from '../scripts/sourceEntry';
import { childProcessEnv, startServers } from '../test/support';
import { median, uniqueName } from './support';

const REPS = Number(process.env.STARTUP_REPS ?? 5);
const IDLE_S = Number(process.env.STARTUP_IDLE_SECONDS ?? 5);

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1]);
  return kb / 1024;
}

async function once(
  args: string[],
  env: Record<string, string>,
  readyLine: string,
): Promise<{ readyMs: number; rssMb: number }> {
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: PROJECT_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  try {
    const readyMs = await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`not ready in 120 s:\n${output}`)), 120_000);
      const onData = (chunk: Buffer): void => {
        output += chunk.toString('utf8');
        if (output.includes(readyLine)) {
          clearTimeout(timer);
          resolve(performance.now() - started);
        }
      };
      child.stdout.on('data', onData);
      child.stderr.on('data', onData);
      child.once('exit', (code) => reject(new Error(`exited (${code}):\n${output}`)));
    });
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    return { readyMs, rssMb: rssMb(child.pid!) };
  } finally {
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await gone;
    clearTimeout(timer);
  }
}

const spread = (values: number[], digits = 0): string =>
  `${median(values).toFixed(digits)} (${Math.min(...values).toFixed(digits)}–${Math.max(...values).toFixed(digits)})`;

async function main(): Promise<void> {
  console.log('bench:startup: npm run build');
  execFileSync('npm', ['run', '-s', 'build'], { cwd: PROJECT_ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const stack = await startServers('bench-startup', { temporal: true });
  try {
    const vapid = webpush.generateVAPIDKeys();
    const base = {
      MONGO_URL: stack.mongoUrl,
      MONGO_DB: uniqueName('startup'),
      TEMPORAL_ADDRESS: stack.temporalAddress!,
      TEMPORAL_TASK_QUEUE: uniqueName('flow-notify-startup'),
      AUTH_JWT_SECRET: 'bench-startup-secret-0123456789abcdef',
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      SWEEP_INTERVAL_SECONDS: '3600',
    };
    const cases = [
      { name: 'worker', mode: 'dist', args: ['dist/worker.js'], ready: 'flow-notify worker: task queue' },
      {
        name: 'worker',
        mode: 'ts-node',
        args: sourceEntryArgs('worker.ts'),
        ready: 'flow-notify worker: task queue',
      },
      { name: 'api', mode: 'dist', args: ['dist/api/server.js'], ready: 'flow-notify api: listening' },
      {
        name: 'api',
        mode: 'ts-node',
        args: sourceEntryArgs('api/server.ts'),
        ready: 'flow-notify api: listening',
      },
    ];
    const rows: string[] = [];
    for (const c of cases) {
      const ready: number[] = [];
      const rss: number[] = [];
      for (let rep = 0; rep < REPS; rep++) {
        const env = childProcessEnv({ ...base, PORT: String(await freePort()) });
        const result = await once(c.args, env, c.ready);
        ready.push(result.readyMs);
        rss.push(result.rssMb);
      }
      const row = `| ${c.name} | ${c.mode} | ${spread(ready)} | ${spread(rss)} |`;
      console.log(row);
      rows.push(row);
    }
    console.log(
      [
        '',
        `start-up and idle memory, ${REPS} runs each, median (min–max); RSS after ${IDLE_S} s idle`,
        '',
        '| process | from | start → ready, ms | idle RSS, MB |',
        '|---|---|---|---|',
        ...rows,
        '',
        'targets from dist/: worker ≤ 200 MB, API ≤ 120 MB',
      ].join('\n'),
    );
  } finally {
    await stack.stop();
  }
}

main().catch((err) => {
  console.error(`bench:startup: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
