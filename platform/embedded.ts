// The embedded default: starts the Temporal CLI dev server and FerretDB as described by temporal-dev.yml.
// Used by `npm start` (fixed ports, data kept under .data/) and `npm test` (free ports, throwaway data).
import { ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { parse } from 'yaml';
import { freePort } from './freePort';

export { freePort };

export const PROJECT_ROOT = path.resolve(__dirname, '..');

interface ServerSpec {
  binaries: string[];
  host: string;
  port: number;
  args: string[];
  testArgs?: string[];
}

export interface StackSpec {
  namespace: string;
  taskQueue: string;
  temporal: ServerSpec & { uiPort: number; dataFile: string; searchAttributes: Record<string, string> };
  mongo: ServerSpec & { dataDir: string };
}

export function readStackSpec(file = path.join(PROJECT_ROOT, 'temporal-dev.yml')): StackSpec {
  return parse(readFileSync(file, 'utf8')) as StackSpec;
}

export interface LaunchOptions {
  /** Folder that holds the servers' data; relative data paths of the spec are taken from PROJECT_ROOT otherwise. */
  dataRoot?: string;
  /** Pick free loopback ports instead of the spec's fixed ones. */
  freePorts?: boolean;
  /** Test mode: add the spec's testArgs (e.g. no Web UI). */
  test?: boolean;
  log?: (line: string) => void;
}

function findBinary(spec: ServerSpec, what: string): string {
  for (const candidate of spec.binaries) {
    const full = path.resolve(PROJECT_ROOT, candidate);
    if (existsSync(full)) return full;
  }
  throw new Error(
    `${what} is not installed (looked for ${spec.binaries.join(', ')}); run scripts/install.sh`,
  );
}

function fill(template: string, values: Record<string, string | number>): string {
  return template.replace(/\{(\w+)\}/g, (whole, key: string) =>
    key in values ? String(values[key]) : whole,
  );
}

const live = new Set<ChildProcess>();
// A test run or launcher that dies must not leave servers behind.
process.once('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** One server process that can be stopped and started again on the same port and data. */
export class ServerProcess {
  private child?: ChildProcess;
  private stderrTail = '';

  constructor(
    readonly name: string,
    private readonly binary: string,
    private readonly args: string[],
    private readonly waitReady: (proc: ServerProcess, child: ChildProcess) => Promise<void>,
    private readonly log: (line: string) => void,
  ) {}

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  describeFailure(): string {
    return this.stderrTail.trim().split('\n').slice(-5).join('\n');
  }

  async start(): Promise<void> {
    if (this.running) return;
    const child = spawn(this.binary, this.args, { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    live.add(child);
    this.stderrTail = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString()).slice(-4000);
    });
    child.once('exit', (code, signal) => {
      live.delete(child);
      // Ctrl-C reaches the whole process group, so a clean exit while we stop is expected; report the rest.
      if (this.child === child && !this.stopping && code !== 0)
        this.log(`${this.name} exited (${signal ?? code})`);
    });
    const exited = new Promise<never>((_, reject) =>
      child.once('exit', (code, signal) =>
        reject(new Error(`${this.name} exited during start (${signal ?? code}): ${this.describeFailure()}`)),
      ),
    );
    exited.catch(() => undefined);
    await Promise.race([this.waitReady(this, child), exited]);
  }

  private stopping = false;

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || !this.running) return;
    this.stopping = true;
    const gone = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
    await gone;
    clearTimeout(timer);
    this.stopping = false;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }
}

async function waitFor<T>(what: string, timeoutMs: number, attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      return await attempt();
    } catch (err) {
      lastError = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`${what} did not become ready in ${timeoutMs / 1000}s: ${String(lastError)}`);
}

export async function launchMongo(
  spec: StackSpec,
  opts: LaunchOptions = {},
): Promise<{ server: ServerProcess; url: string }> {
  const log = opts.log ?? (() => undefined);
  const port = opts.freePorts ? await freePort() : spec.mongo.port;
  const dataDir = path.resolve(
    opts.dataRoot ?? PROJECT_ROOT,
    opts.dataRoot ? 'ferretdb' : spec.mongo.dataDir,
  );
  mkdirSync(dataDir, { recursive: true });
  const values = { host: spec.mongo.host, port, dataDir };
  const args = [...spec.mongo.args, ...(opts.test ? (spec.mongo.testArgs ?? []) : [])].map((a) =>
    fill(a, values),
  );
  const server = new ServerProcess(
    'ferretdb',
    findBinary(spec.mongo, 'FerretDB'),
    args,
    (_proc, child) =>
      new Promise<void>((resolve) => {
        let out = '';
        const onData = (chunk: Buffer): void => {
          out += chunk.toString();
          if (out.includes('ready ')) {
            child.stdout?.off('data', onData);
            child.stdout?.resume();
            resolve();
          }
        };
        child.stdout?.on('data', onData);
      }),
    log,
  );
  await server.start();
  return { server, url: `mongodb://${spec.mongo.host}:${port}/` };
}

export async function launchTemporal(
  spec: StackSpec,
  opts: LaunchOptions = {},
): Promise<{ server: ServerProcess; address: string; uiUrl?: string }> {
  const log = opts.log ?? (() => undefined);
  const port = opts.freePorts ? await freePort() : spec.temporal.port;
  const uiPort = opts.freePorts ? await freePort() : spec.temporal.uiPort;
  const dataFile = path.resolve(
    opts.dataRoot ?? PROJECT_ROOT,
    opts.dataRoot ? 'temporal.db' : spec.temporal.dataFile,
  );
  mkdirSync(path.dirname(dataFile), { recursive: true });
  const values = { host: spec.temporal.host, port, uiPort, dataFile };
  const args = [
    ...spec.temporal.args.map((a) => fill(a, values)),
    ...Object.entries(spec.temporal.searchAttributes).map(
      ([name, type]) => `--search-attribute=${name}=${type}`,
    ),
    ...(opts.test ? (spec.temporal.testArgs ?? []) : []),
  ];
  const address = `${spec.temporal.host}:${port}`;
  const server = new ServerProcess(
    'temporal',
    findBinary(spec.temporal, 'The Temporal CLI'),
    args,
    () =>
      waitFor('Temporal', 90_000, async () => {
        const connection = await Connection.connect({ address, connectTimeout: 1000 });
        try {
          await connection.workflowService.describeNamespace({ namespace: spec.namespace });
        } finally {
          await connection.close();
        }
      }),
    log,
  );
  await server.start();
  const headless = args.includes('--headless');
  return { server, address, uiUrl: headless ? undefined : `http://${spec.temporal.host}:${uiPort}` };
}

export interface RunningStack {
  mongoUrl: string;
  temporalAddress: string;
  /** Present when this process started the server (tests and drills that stop and restart it need it). */
  mongoServer?: ServerProcess;
  temporalServer?: ServerProcess;
  stop(): Promise<void>;
}

/**
 * A throwaway stack on free ports under dataRoot (tests, benchmarks, drills), or the servers the environment
 * names (MONGO_URL / TEMPORAL_ADDRESS) when it does.
 */
export async function startThrowawayStack(
  dataRoot: string,
  external: { mongoUrl?: string; temporalAddress?: string },
): Promise<RunningStack> {
  const spec = readStackSpec();
  const [mongo, temporal] = await Promise.all([
    external.mongoUrl ? undefined : launchMongo(spec, { dataRoot, freePorts: true, test: true }),
    external.temporalAddress ? undefined : launchTemporal(spec, { dataRoot, freePorts: true, test: true }),
  ]);
  return {
    mongoUrl: external.mongoUrl ?? mongo!.url,
    temporalAddress: external.temporalAddress ?? temporal!.address,
    mongoServer: mongo?.server,
    temporalServer: temporal?.server,
    async stop() {
      await Promise.all([mongo?.server.stop(), temporal?.server.stop()]);
    },
  };
}
