// Builds real workers, API servers and clients for one suite, against the shared test stack.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../../platform/embedded';
import { Client, Connection } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { Config } from '../../config';
import { startApi, type ApiHandle, type ApiOptions } from '../../api/server';
import { mintToken } from '../../api/auth';
import { connectMongo, type Mongo } from '../../store/mongo';
import { createStores, ensureAllIndexes, type Stores } from '../../store';
import { createWorker, type WorkerDeps } from '../../worker';
import { nativeConnection, TEST_JWT_SECRET } from './stack';
import { workflowBundle } from './workflowBundle';

export interface RunningWorker {
  worker: Worker;
  stop(): Promise<void>;
}

export async function startTestWorker(
  config: Config,
  stores: Stores,
  extra: Pick<WorkerDeps, 'pushSender' | 'callbackLookup' | 'callbackPacing'> &
    Partial<Pick<WorkerDeps, 'log' | 'metrics'>> & {
      /** Temporal's activity retry backoff a tenth as long (support/fastRetries.ts). */
      fastRetries?: boolean;
    } = {},
): Promise<RunningWorker> {
  const { fastRetries, ...deps } = extra;
  const connection = await nativeConnection(config.temporalAddress);
  const { client, close } = await temporalClient(config);
  const worker = await createWorker({
    config,
    connection,
    client,
    stores,
    workflowBundle: await workflowBundle({ fastRetries }),
    log: () => undefined,
    ...deps,
  });
  const running = worker.run();
  return {
    worker,
    async stop() {
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      extra.pushSender?.close();
      await close();
      await connection.close();
    },
  };
}

export async function openStores(
  config: Config,
  now?: () => Date,
): Promise<{ mongo: Mongo; stores: Stores }> {
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  await ensureAllIndexes(mongo.db);
  return { mongo, stores: createStores(mongo.db, { claimGraceSeconds: config.claimGraceSeconds, now }) };
}

export async function temporalClient(config: Config): Promise<{ client: Client; close(): Promise<void> }> {
  const connection = await Connection.connect({ address: config.temporalAddress });
  return {
    client: new Client({ connection, namespace: config.temporalNamespace }),
    close: () => connection.close(),
  };
}

/** A small JSON client for the API, as a user with a token would call it. */
export class ApiClient {
  constructor(
    readonly baseUrl: string,
    /** Minting is asynchronous: a client is made at once and its requests wait for the token. */
    readonly token?: string | Promise<string>,
  ) {}

  as(userId: string, teamId: string): ApiClient {
    return new ApiClient(this.baseUrl, mintToken(TEST_JWT_SECRET, userId, teamId));
  }

  async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    const token = await this.token;
    const res = await fetch(this.baseUrl + path, {
      method,
      headers: {
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...headers,
      },
      body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
    });
    const text = await res.text();
    let json: any; // eslint-disable-line @typescript-eslint/no-explicit-any
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { status: res.status, body: json, text, headers: res.headers };
  }

  get(path: string) {
    return this.request('GET', path);
  }
  post(path: string, body: unknown = {}) {
    return this.request('POST', path, body);
  }
  put(path: string, body: unknown = {}) {
    return this.request('PUT', path, body);
  }
  delete(path: string, body?: unknown) {
    return this.request('DELETE', path, body);
  }
}

export async function startTestApi(
  config: Config,
  options: ApiOptions = {},
): Promise<{ api: ApiHandle; client: ApiClient }> {
  // Quiet, except a request that failed with a 5xx (the error middleware's "<method> <path> failed: <stack>"),
  // one line each: a suite seeing an unexpected 500 then shows why (suites that stop a server on purpose show
  // a few such lines too).
  const log = (line: string) => {
    if (/^[A-Z]+ \S+ failed: /.test(line)) console.error(`[test api] ${line.split('\n')[0]}`);
  };
  const api = await startApi(config, { log, ...options });
  return { api, client: new ApiClient(api.url) };
}

/**
 * With RECORD_FIXTURES=1, saves the workflow's history (from the code as it is) as the replay fixture
 * test/fixtures/<name>; otherwise nothing.
 */
/** Under RECORD_FIXTURES=1, saves the workflow's history as a fixture: its latest execution, or `runId`'s. */
export function recordFixture(config: Config, workflowId: string, name: string, runId?: string): void {
  if (process.env.RECORD_FIXTURES === '1')
    saveHistory(config, workflowId, path.join(PROJECT_ROOT, 'test', 'fixtures', name), runId);
}

/** Saves a workflow's history as an operator would export it (temporal workflow show --output json). */
export function saveHistory(config: Config, workflowId: string, file: string, runId?: string): void {
  const cli = spawnSync(
    path.join(PROJECT_ROOT, 'tools/venv/bin/temporal'),
    [
      'workflow',
      'show',
      '--workflow-id',
      workflowId,
      ...(runId ? ['--run-id', runId] : []),
      '--address',
      config.temporalAddress,
      '--output',
      'json',
    ],
    { encoding: 'utf8' },
  );
  if (cli.status !== 0) throw new Error(`temporal workflow show failed: ${cli.stderr}`);
  writeFileSync(file, cli.stdout);
}
