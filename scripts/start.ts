// npm start: the embedded default (unless MONGO_URL / TEMPORAL_ADDRESS point elsewhere), then the worker and
// the API as child processes. Ctrl-C stops everything this started, and nothing else.
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import webpush from 'web-push';
import { temporalConnectionOptions } from '../client/connection';
import { childEnv, launcherEnv, loadTemporalConnectionConfig } from '../config';
import { ensureSearchAttributes } from '../platform/searchAttributeRegistration';
import {
  launchMongo,
  launchTemporal,
  PROJECT_ROOT,
  readStackSpec,
  type ServerProcess,
} from '../platform/embedded';
import { DEFAULT_STACK_STATE_FILE, removeStackState, writeStackState } from '../platform/stackState';
import { sourceEntryArgs } from './sourceEntry';

const log = (line: string): void => console.log(`flow-notify: ${line}`);

interface LocalSecrets {
  authJwtSecret: string;
  vapidPublicKey: string;
  vapidPrivateKey: string;
}

/** The embedded default's own secrets: generated once, kept under .data/ so tokens and subscriptions survive. */
function localSecrets(): LocalSecrets {
  const file = path.join(PROJECT_ROOT, '.data', 'secrets.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')) as LocalSecrets;
  const vapid = webpush.generateVAPIDKeys();
  const secrets = {
    authJwtSecret: randomBytes(32).toString('base64url'),
    vapidPublicKey: vapid.publicKey,
    vapidPrivateKey: vapid.privateKey,
  };
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, JSON.stringify(secrets, null, 2), { mode: 0o600 });
  return secrets;
}

/** How long the API has to answer after its start (compiling its sources on a cold cache takes a while). */
const API_READY_WITHIN_MS = 180_000;

/** Waits until `url` answers 200, a quarter second apart; throws past API_READY_WITHIN_MS, quietly stops once `gone`. */
async function untilAnswering(url: string, gone: () => boolean): Promise<void> {
  const until = Date.now() + API_READY_WITHIN_MS;
  while (!gone()) {
    const answered = await fetch(url, { signal: AbortSignal.timeout(2000) }).then(
      (res) => res.status === 200,
      () => false,
    );
    if (answered) return;
    if (Date.now() > until)
      throw new Error(`the API did not answer ${url} within ${API_READY_WITHIN_MS / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

async function main(): Promise<void> {
  const env = launcherEnv();
  const spec = readStackSpec();
  const stateFile = env.stackStateFile ?? DEFAULT_STACK_STATE_FILE;
  const servers: ServerProcess[] = [];
  const children: ChildProcess[] = [];
  let stopping = false;

  const stopAll = async (code: number): Promise<never> => {
    if (!stopping) {
      stopping = true;
      log('stopping');
      await Promise.all(
        children.map(
          (child) =>
            new Promise<void>((resolve) => {
              if (child.exitCode !== null || child.signalCode !== null) return resolve();
              child.once('exit', () => resolve());
              child.kill('SIGTERM');
            }),
        ),
      );
      await Promise.all(servers.map((s) => s.stop()));
      removeStackState(process.pid, stateFile);
    }
    process.exit(code);
  };
  process.once('SIGINT', () => void stopAll(0));
  process.once('SIGTERM', () => void stopAll(0));

  const extra: Record<string, string> = {};
  let uiUrl: string | undefined;
  if (!env.mongoUrl) {
    const mongo = await launchMongo(spec, { log });
    servers.push(mongo.server);
    extra.MONGO_URL = mongo.url;
    log(`FerretDB on ${mongo.url} (data in ${spec.mongo.dataDir})`);
  }
  if (!env.temporalAddress) {
    const temporal = await launchTemporal(spec, { log });
    servers.push(temporal.server);
    extra.TEMPORAL_ADDRESS = temporal.address;
    uiUrl = temporal.uiUrl;
    log(`Temporal dev server on ${temporal.address} (history in ${spec.temporal.dataFile})`);
  } else {
    const connection = await Connection.connect(temporalConnectionOptions(loadTemporalConnectionConfig()));
    try {
      await ensureSearchAttributes(connection, env.temporalNamespace, spec.temporal.searchAttributes);
    } finally {
      await connection.close();
    }
  }
  if (!env.mongoUrl || !env.temporalAddress) {
    // So flow-notify explain / emit beside this find the servers (platform/stackState.ts).
    writeStackState(
      {
        pid: process.pid,
        mongoUrl: extra.MONGO_URL,
        temporalAddress: extra.TEMPORAL_ADDRESS,
        temporalUiUrl: uiUrl,
      },
      stateFile,
    );
    const secrets = localSecrets();
    if (!env.authJwtSecret) extra.AUTH_JWT_SECRET = secrets.authJwtSecret;
    if (!env.vapidPublicKey && !env.vapidPrivateKey) {
      extra.VAPID_PUBLIC_KEY = secrets.vapidPublicKey;
      extra.VAPID_PRIVATE_KEY = secrets.vapidPrivateKey;
    }
  }

  for (const [name, entry] of [
    ['worker', 'worker.ts'],
    ['api', 'api/server.ts'],
  ] as const) {
    const child = spawn(process.execPath, sourceEntryArgs(entry), {
      cwd: PROJECT_ROOT,
      env: childEnv(extra),
      stdio: 'inherit',
    });
    children.push(child);
    child.once('exit', (code, signal) => {
      if (stopping) return;
      log(`${name} exited (${signal ?? code}); stopping the rest`);
      void stopAll(code || 1);
    });
  }

  const apiUrl = `http://${env.host}:${env.port}`;
  await untilAnswering(`${apiUrl}/healthz`, () => stopping).catch((err: Error) => {
    log(err.message);
    return stopAll(1);
  });
  if (stopping) return; // the API or the worker exited meanwhile: stopAll says so and exits
  log(`API         ${apiUrl}  (GET /healthz)`);
  if (uiUrl) log(`Temporal UI ${uiUrl}`);
  log('a token for the local secret: npm run token -- --user alice --team acme');
  log('Ctrl-C stops everything started here');
}

main().catch((err) => {
  console.error(`flow-notify: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
