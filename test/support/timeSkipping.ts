// Temporal's time-skipping test server, for workflow logic whose timers are long. The SDK would download its
// binary from outside; scripts/install.sh fetches the Java build from Maven Central instead (tools/test-server).
// It is started here rather than by the SDK: the SDK gives an ephemeral server 5 s to listen, and a JVM on a
// busy 2-core machine can take longer than that.
import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { SearchAttributeType } from '@temporalio/common';
import { temporal } from '@temporalio/proto';
import { TestWorkflowEnvironment } from '@temporalio/testing';
import { freePort } from '../../platform/freePort';
import { PROJECT_ROOT } from '../../platform/embedded';
import { searchAttributes } from '../../contract/searchAttributes';
import { waitUntil } from './waitUntil';

export const TEST_SERVER_PATH = path.join(PROJECT_ROOT, 'tools', 'test-server', 'temporal-test-server');

const START_TIMEOUT_MS = 60_000;

/** The types of the project's search attributes (all keywords), as the operator service names them. */
const KEYWORD = {
  [SearchAttributeType.KEYWORD]: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
};

const accepts = (port: number): Promise<boolean> =>
  new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

/** The SDK's own constructor for an environment on a server it did not start, with time skipping on. */
type EnvironmentFactory = {
  create(opts: {
    server: { type: 'existing' };
    address: string;
    namespace: string;
    supportsTimeSkipping: boolean;
  }): Promise<TestWorkflowEnvironment>;
};

export interface TimeSkipping {
  env: TestWorkflowEnvironment;
  stop(): Promise<void>;
}

export async function startTimeSkipping(): Promise<TimeSkipping> {
  const port = await freePort();
  const child = spawn(TEST_SERVER_PATH, [String(port)], { stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGTERM');
    await exited;
  };
  try {
    await waitUntil(
      'the time-skipping test server to listen',
      async () => {
        if (child.exitCode !== null)
          throw new Error(`the time-skipping test server exited (${child.exitCode})`);
        return accepts(port);
      },
      { timeoutMs: START_TIMEOUT_MS, intervalMs: 200 },
    );
    const env = await (TestWorkflowEnvironment as unknown as EnvironmentFactory).create({
      server: { type: 'existing' },
      address: `127.0.0.1:${port}`,
      namespace: 'default',
      supportsTimeSkipping: true,
    });
    // The test server starts with no custom search attribute and lists none (no ListSearchAttributes): register
    // the project's, as the embedded dev server has them from its command line, so workflows that set them start.
    await env.connection.operatorService.addSearchAttributes({
      namespace: 'default',
      searchAttributes: Object.fromEntries(
        Object.values(searchAttributes).map((key) => [key.name, KEYWORD[key.type]]),
      ),
    });
    return {
      env,
      stop: async () => {
        await env.teardown();
        await stop();
      },
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A time-skipping server for the enclosing suite: started before it (handing `use` its environment), stopped after. */
export function onTimeSkipping(use: (env: TestWorkflowEnvironment) => void): void {
  let server: TimeSkipping | undefined;
  before(async () => {
    server = await startTimeSkipping();
    use(server.env);
  });
  after(async () => {
    await server?.stop();
  });
}
