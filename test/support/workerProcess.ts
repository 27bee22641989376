// A real worker process (worker.ts from sources, as npm start runs it), for tests and drills that kill it: SIGKILL is a
// crash the in-process test worker cannot simulate (no finally blocks, no graceful shutdown, sockets cut).
//
// The child's environment is this process's, minus every configuration variable of the contract (so nothing
// leaks in from the shell), plus the variables given. A test push service's certificate is trusted through
// NODE_EXTRA_CA_CERTS, which Node reads at start-up: the sender's https agents pass no `ca` of their own, so
// they use the default store, which then includes it.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../platform/embedded';
import { sourceEntryArgs } from '../../scripts/sourceEntry';
import { sharedBundleDir } from './stack';

/** The line worker.ts prints once its Worker is created and about to poll. */
export const WORKER_READY_LINE = 'flow-notify worker: task queue';

const KNOWN_CONFIG_VARIABLES = [
  'HOST',
  'PORT',
  'MONGO_URL',
  'MONGO_DB',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'TEMPORAL_TASK_QUEUE',
  'AUTH_JWT_SECRET',
  'VAPID_PUBLIC_KEY',
  'VAPID_PRIVATE_KEY',
  'VAPID_SUBJECT',
  'STUDIO_URL',
  'CALLBACK_ALLOW_PRIVATE',
  'PUSH_ALLOW_PRIVATE',
  'PUSH_ENDPOINT_ALLOWLIST',
  'OPS_ALERT_WEBHOOK_URL',
  'SWEEP_INTERVAL_SECONDS',
  'CLAIM_GRACE_SECONDS',
  'STALL_AFTER_SECONDS',
  'CALLBACK_RETRY_SECONDS',
  'CALLBACK_TIMEOUT_SECONDS',
  'HEALTH_REAP_SECONDS',
  'NODE_EXTRA_CA_CERTS',
];

/** Every variable config.ts reads (read from its source, so one added later is stripped too). */
function configVariables(): string[] {
  let source = '';
  try {
    source = readFileSync(path.join(PROJECT_ROOT, 'config.ts'), 'utf8');
  } catch {
    // the known list is enough
  }
  const named = [...source.matchAll(/'([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)'/g)].map((m) => m[1]);
  return [...new Set([...KNOWN_CONFIG_VARIABLES, ...named])];
}

/** The environment for a child of this project: ours without any configuration variable, plus `vars`. */
export function childProcessEnv(vars: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [key, value] of Object.entries(process.env)) if (value !== undefined) env[key] = value;
  for (const name of configVariables()) delete env[name];
  return { ...env, ...vars };
}

export interface WorkerProcessOptions {
  /** The worker's configuration variables (MONGO_URL, TEMPORAL_ADDRESS, TEMPORAL_TASK_QUEUE, VAPID_*, ...). */
  vars: Record<string, string>;
  /** A PEM certificate the worker must trust (a loopback push service's), via NODE_EXTRA_CA_CERTS. */
  trustCa?: string;
  readyTimeoutMs?: number;
  /** Where the worker's output goes, line by line; dropped by default (the tail is kept for errors). */
  log?: (line: string) => void;
  /** Called when the worker exits without being asked to (a crash, a fatal error). */
  onUnexpectedExit?: (exit: WorkerExit) => void;
  /** What to run instead of worker.ts from sources in PROJECT_ROOT (e.g. a build's dist/worker.js). */
  command?: { cwd: string; args: string[] };
}

/** How a process ended: its exit code, or the signal that killed it. */
export interface ProcessEnd {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface WorkerExit extends ProcessEnd {
  pid: number | undefined;
  at: Date;
  /** The last lines the worker wrote. */
  tail: string;
}

const live = new Set<ChildProcess>();
// A test run or drill that dies must not leave workers behind, polling the task queue.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export class WorkerProcess {
  private child?: ChildProcess;
  private caDir?: string;
  private tail = '';
  private expectingExit = false;
  /** Exits nobody asked for, oldest first. */
  readonly unexpectedExits: WorkerExit[] = [];
  /** How many times this worker has been started. */
  starts = 0;

  private constructor(private readonly options: WorkerProcessOptions) {}

  /** Spawns the worker and resolves once it is ready (it printed its task-queue line). */
  static async start(options: WorkerProcessOptions): Promise<WorkerProcess> {
    const worker = new WorkerProcess(options);
    try {
      await worker.start();
    } catch (err) {
      await worker.stop();
      throw err;
    }
    return worker;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The last lines the worker wrote (stdout and stderr). */
  output(): string {
    return this.tail;
  }

  private env(): Record<string, string> {
    // From the sources, the workflows bundled once for the test run, not at every start.
    const bundleDir = this.options.command ? undefined : sharedBundleDir();
    const vars: Record<string, string> = {
      ...(bundleDir ? { WORKFLOW_BUNDLE_DIR: bundleDir } : {}),
      ...this.options.vars,
    };
    if (this.options.trustCa) {
      this.caDir ??= mkdtempSync(path.join(tmpdir(), 'flow-notify-worker-ca-'));
      const file = path.join(this.caDir, 'push-ca.pem');
      writeFileSync(file, this.options.trustCa);
      vars.NODE_EXTRA_CA_CERTS = file;
    }
    return childProcessEnv(vars);
  }

  async start(): Promise<void> {
    if (this.running) return;
    const command = this.options.command ?? {
      cwd: PROJECT_ROOT,
      args: sourceEntryArgs('worker.ts'),
    };
    const child = spawn(process.execPath, command.args, {
      cwd: command.cwd,
      env: this.env(),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.starts++;
    this.expectingExit = false;
    live.add(child);
    const timeoutMs = this.options.readyTimeoutMs ?? 90_000;

    await new Promise<void>((resolve, reject) => {
      let ready = false;
      const timer = setTimeout(() => {
        child.kill('SIGKILL');
        reject(new Error(`the worker was not ready within ${timeoutMs} ms:\n${this.tail}`));
      }, timeoutMs);
      const onLine = (line: string): void => {
        this.tail = (this.tail + line + '\n').slice(-8000);
        this.options.log?.(line);
        if (!ready && line.includes(WORKER_READY_LINE)) {
          ready = true;
          clearTimeout(timer);
          resolve();
        }
      };
      lines(child.stdout!, onLine);
      lines(child.stderr!, onLine);
      child.once('exit', (code, signal) => {
        live.delete(child);
        const exit = { pid: child.pid, code, signal, at: new Date(), tail: this.tail };
        if (!ready) {
          clearTimeout(timer);
          reject(new Error(`the worker exited before it was ready (${signal ?? code}):\n${this.tail}`));
        }
        // A start that failed is reported by start() itself; this is for a worker that was up and went away.
        if (ready && !this.expectingExit && this.child === child) {
          this.unexpectedExits.push(exit);
          this.options.onUnexpectedExit?.(exit);
        }
      });
    });
  }

  /** SIGKILL: no shutdown, no finally, in-flight activities and sockets cut. Resolves once it is gone. */
  async kill(): Promise<void> {
    await this.signal('SIGKILL');
  }

  /** Kills the worker (SIGKILL) and starts a new one; resolves once the new one is ready. */
  async restart(): Promise<void> {
    await this.kill();
    await this.start();
  }

  /**
   * A graceful stop (SIGTERM, then SIGKILL after the timeout), and the CA file is removed. Resolves with how the
   * worker exited (undefined when none was running): code 0 and no signal is a shutdown of its own.
   */
  async stop(timeoutMs = 10_000): Promise<ProcessEnd | undefined> {
    const child = this.child;
    let end: ProcessEnd | undefined;
    if (child && this.running) {
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      end = await this.signal('SIGTERM');
      clearTimeout(timer);
    }
    if (this.caDir) rmSync(this.caDir, { recursive: true, force: true });
    this.caDir = undefined;
    return end;
  }

  private async signal(signal: NodeJS.Signals): Promise<ProcessEnd | undefined> {
    const child = this.child;
    if (!child || !this.running) return undefined;
    this.expectingExit = true;
    const gone = new Promise<ProcessEnd>((resolve) =>
      child.once('exit', (code, killedBy) => resolve({ code, signal: killedBy })),
    );
    child.kill(signal);
    return gone;
  }
}

function lines(stream: NodeJS.ReadableStream, onLine: (line: string) => void): void {
  let buffer = '';
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => {
    buffer += chunk;
    let newline: number;
    while ((newline = buffer.indexOf('\n')) >= 0) {
      onLine(buffer.slice(0, newline));
      buffer = buffer.slice(newline + 1);
    }
  });
  stream.on('end', () => {
    if (buffer) onLine(buffer);
    buffer = '';
  });
}
