// The test stack: mocha's global fixture starts a real Temporal dev server and a real FerretDB on free ports
// with throwaway data (or uses MONGO_URL / TEMPORAL_ADDRESS when set), and stops them after the last suite.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { NativeConnection, Runtime } from '@temporalio/worker';
import { launcherEnv, loadConfig, type Config } from '../../config';
import { startThrowawayStack, type RunningStack } from '../../platform/embedded';
import { processCpuMs } from './processes';
import { quietLogger, workflowBundle, workflowBundleDir } from './workflowBundle';

interface TestStack extends RunningStack {
  dataRoot: string;
  /** The prebuilt workflow bundles worker processes load (WORKFLOW_BUNDLE_DIR). */
  bundleDir: string;
}

let stack: TestStack | undefined;

/** Where a worker process of `mocha --parallel` finds the servers the main process started. */
const SHARED_STACK_VARIABLE = 'FLOW_NOTIFY_TEST_STACK';

export function testStack(): TestStack {
  if (!stack) {
    // A parallel worker: the main process ran the global setup (and will stop the servers); use its servers.
    const shared = process.env[SHARED_STACK_VARIABLE];
    if (!shared) throw new Error('the test stack is not started (run tests through npm test / mocha)');
    const { mongoUrl, temporalAddress, dataRoot, bundleDir } = JSON.parse(shared) as TestStack;
    stack = { mongoUrl, temporalAddress, dataRoot, bundleDir, stop: async () => undefined };
    try {
      Runtime.install({ logger: quietLogger });
    } catch {
      // already in use in this process: its logger stays
    }
  }
  return stack;
}

/** The run's prebuilt workflow bundles, where a test stack runs (benchmarks start their own servers: none). */
export function sharedBundleDir(): string | undefined {
  if (stack) return stack.bundleDir;
  const shared = process.env[SHARED_STACK_VARIABLE];
  return shared ? (JSON.parse(shared) as TestStack).bundleDir : undefined;
}

export const TEST_JWT_SECRET = 'test-secret-for-flow-notify-32-bytes-or-more';

const unique = (prefix: string): string => `${prefix}_${randomBytes(4).toString('hex')}`;

/**
 * For a suite that pushes one person more than the burst bound lets through (PUSH_BURST_LIMIT, 5 in 10 minutes by
 * default) and is about something else: it says why where it sets this. Every other suite runs with the default.
 */
export const TEST_PUSH_BURST_LIMIT = '100000';

/** A config for one suite: its own database and task queue on the shared servers, plus any overrides. */
export function testConfig(overrides: Record<string, string> = {}): Config {
  const s = testStack();
  return loadConfig({
    MONGO_URL: s.mongoUrl,
    MONGO_DB: unique('t'),
    TEMPORAL_ADDRESS: s.temporalAddress,
    TEMPORAL_TASK_QUEUE: unique('flow-notify-test'),
    AUTH_JWT_SECRET: TEST_JWT_SECRET,
    PORT: '0',
    ...overrides,
  });
}

/** A worker's connection: to the shared test stack, or to the Temporal a suite's config names. */
export async function nativeConnection(address = testStack().temporalAddress): Promise<NativeConnection> {
  return NativeConnection.connect({ address });
}

export async function mochaGlobalSetup(): Promise<void> {
  Runtime.install({ logger: quietLogger });
  const dataRoot = mkdtempSync(path.join(tmpdir(), 'flow-notify-test-'));
  const started = Date.now();
  // The bundles are built while the servers start, before the suites' processes, which then only load them.
  const [running, bundleDir] = await Promise.all([
    startThrowawayStack(dataRoot, launcherEnv()),
    workflowBundleDir(),
    workflowBundle(),
    workflowBundle({ fastRetries: true }),
  ]);
  stack = { ...running, dataRoot, bundleDir };
  // `mocha --parallel` starts its workers after this, with this environment.
  process.env[SHARED_STACK_VARIABLE] = JSON.stringify({
    mongoUrl: stack.mongoUrl,
    temporalAddress: stack.temporalAddress,
    dataRoot,
    bundleDir,
  });
  console.log(
    `test stack: mongo ${stack.mongoUrl} temporal ${stack.temporalAddress} (ready in ${Date.now() - started} ms)`,
  );
}

export async function mochaGlobalTeardown(): Promise<void> {
  if (!stack) return;
  // The shared servers' part of the suite's CPU (the per-file figures leave it out).
  const servers = [stack.mongoServer, stack.temporalServer].flatMap((server) => {
    const ms = server?.pid === undefined ? undefined : processCpuMs(server.pid);
    return server && ms !== undefined ? [`${server.name} ${(ms / 1000).toFixed(0)} s`] : [];
  });
  if (servers.length) console.log(`CPU of the shared servers: ${servers.join(', ')}`);
  await stack.stop();
  rmSync(stack.dataRoot, { recursive: true, force: true });
}
