// The production build: compiled to a copy of the package, with production dependencies only (the packages
// `npm ci --omit=dev` installs, so no ts-node, no TypeScript), the worker and the API started from dist/ against
// the test servers, one episode of each family (push, callback, operator alert) driven through them, the runner
// CLI run from the build, and both stopped with SIGTERM.
import assert from 'node:assert/strict';
import { execFile, execFileSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import webpush from 'web-push';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import { ApiClient } from './support/harness';
import { CallbackReceiver } from './support/callbackReceiver';
import { startPushService, type PushService } from './support/pushService';
import { deleteSweepScheduleOf, processStackVars } from './support/processStack';
import { startProcess, terminate } from './support/processes';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';
import { loadConfig } from '../config';

const execFileAsync = promisify(execFile);

/**
 * The project's installed packages less those its lock file marks dev: the tree `npm ci --omit=dev` installs (the
 * same package.json files), hard-linked instead of unpacked again (npm ci spent 19 s of CPU, most of it writing
 * 23,000 files, on a CPU-bound suite). Nothing in the copy writes to its node_modules.
 */
function linkProductionDependencies(dir: string): void {
  // The installed tree itself, not a link to it (scripts/install.sh lets checkouts share one): `cp -a` copies a
  // link as a link, and the removals below would then empty the shared install of its dev packages.
  const installed = realpathSync(path.join(PROJECT_ROOT, 'node_modules'));
  execFileSync('cp', ['-al', installed, path.join(dir, 'node_modules')]);
  const lock = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, { dev?: boolean }>;
  };
  for (const [where, entry] of Object.entries(lock.packages)) {
    if (where && entry.dev) rmSync(path.join(dir, where), { recursive: true, force: true });
  }
}

/**
 * Builds the package as `npm run build` does into `dir`/dist, with the files a release ships and its production
 * dependencies (the workflow bundle is made last: webpack resolves the workflows' imports from the copy's own
 * node_modules).
 */
export async function buildCopy(dir: string): Promise<void> {
  const dist = path.join(dir, 'dist');
  for (const file of ['package.json', 'package-lock.json', 'bin']) {
    cpSync(path.join(PROJECT_ROOT, file), path.join(dir, file), { recursive: true });
  }
  linkProductionDependencies(dir);
  await execFileAsync('npx', ['tsc', '-p', 'tsconfig.build.json', '--outDir', dist], { cwd: PROJECT_ROOT });
  cpSync(path.join(PROJECT_ROOT, 'studio'), path.join(dist, 'studio'), { recursive: true });
  execFileSync(process.execPath, ['-r', 'ts-node/register', 'scripts/bundleWorkflows.ts', dist], {
    cwd: PROJECT_ROOT,
  });
}

describe('the production build (dist/, production dependencies only)', function () {
  this.timeout(300_000);
  let dir: string;
  let push: PushService;
  let callbacks: CallbackReceiver;
  let opsHook: CallbackReceiver;
  let worker: WorkerProcess | undefined;
  let api: { child: ChildProcess; output: () => string } | undefined;
  let vars: Record<string, string>;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'flow-notify-dist-'));
    await buildCopy(dir);
    push = await startPushService();
    callbacks = await CallbackReceiver.start();
    opsHook = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    vars = processStackVars(
      { db: 't_dist', queue: 'dist' },
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        OPS_ALERT_WEBHOOK_URL: opsHook.url,
        SWEEP_INTERVAL_SECONDS: '3600',
        PORT: String(await freePort()),
      },
    );
  });

  after(async () => {
    if (api) await terminate(api.child);
    await worker?.stop();
    if (vars) await deleteSweepScheduleOf(loadConfig(vars));
    await push?.close();
    await callbacks?.close();
    await opsHook?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('installs without ts-node or TypeScript, and require("flow-notify") loads the compiled entry', () => {
    assert.ok(existsSync(path.join(dir, 'dist/workflow-bundle.js')), 'the workflow bundle is built ahead');
    assert.ok(existsSync(path.join(dir, 'dist/workflow-bundle-traced.js')), 'and its traced twin');
    assert.ok(!existsSync(path.join(dir, 'node_modules/ts-node')), 'ts-node is not a production dependency');
    assert.ok(
      !existsSync(path.join(dir, 'node_modules/typescript')),
      'typescript is not a production dependency',
    );
    const exported = execFileSync(
      process.execPath,
      ['-e', "const m = require('flow-notify'); console.log(Object.keys(m).sort().join(','))"],
      { cwd: dir, encoding: 'utf8' },
    );
    for (const name of [
      'createWorker',
      'startApi',
      'checkCallbackTarget',
      'createOutcomeEmitter',
      'loadConfig',
    ]) {
      assert.ok(exported.split(',').includes(name), `${name} in ${exported}`);
    }
  });

  it('worker and API from dist/ deliver a push, a signed callback and an operator alert; the CLI runs from dist/', async () => {
    worker = await WorkerProcess.start({
      vars,
      trustCa: push.ca,
      command: { cwd: dir, args: ['dist/worker.js'] },
    });
    assert.match(worker.output(), /workflows prebuilt bundle/);
    api = await startProcess(
      dir,
      ['dist/api/server.js'],
      childProcessEnv(vars),
      'flow-notify api: listening',
    );
    const alice = new ApiClient(`http://127.0.0.1:${vars.PORT}`).as('alice', 'acme');
    const studio = await fetch(`http://127.0.0.1:${vars.PORT}/`);
    assert.equal(studio.status, 200, 'the built API serves the studio');
    assert.match(await studio.text(), /<html/i);
    // The studio's ES modules sit in subfolders: the build copies them and serves them as JavaScript.
    const module = await fetch(`http://127.0.0.1:${vars.PORT}/views/run.js`);
    assert.equal(module.status, 200, 'the built API serves the studio modules');
    assert.equal(module.headers.get('content-type'), 'text/javascript; charset=utf-8');
    assert.match(await module.text(), /export async function renderRun/);

    const sub = push.endpoint('alice-laptop');
    assert.equal((await alice.post('/api/v1/notifications/push/subscriptions', sub)).status, 201);

    // A run that asks a human: the push family.
    const asking = await alice.post('/api/v1/runs', { title: 'Needs a human' });
    assert.equal(asking.status, 201, asking.text);
    const paused = await alice.post(`/api/v1/runs/${asking.body.id}/pause`, { prompt: 'Ship it?' });
    assert.equal(paused.status, 200, paused.text);
    const [delivered] = await push.waitFor(1, sub, 30_000);
    assert.equal((delivered.payload as { kind: string }).kind, 'human_input_requested');

    // A run with a callback that fails: the callback and the operator families.
    const failing = await alice.post('/api/v1/runs', { title: 'Doomed', callback: { url: callbacks.url } });
    assert.equal(failing.status, 201, failing.text);
    const runId = failing.body.id as string;
    const failed = await alice.post(`/api/v1/runs/${runId}/fail`, { error: { code: 'E', message: 'boom' } });
    assert.equal(failed.status, 200, failed.text);
    const [callback] = await callbacks.waitFor(1, 30_000);
    assert.equal(JSON.parse(callback.body).type, 'run.failed');
    assert.match(String(callback.headers['webhook-signature']), /^v1,/);
    const [alert] = await opsHook.waitFor(1, 30_000);
    assert.equal(JSON.parse(alert.body).kind, 'run_failed');
    assert.equal(JSON.parse(alert.body).runId, runId);

    // The runner CLI from the build (no cli.ts in the copy): the episode exists, so it attaches.
    const cli = execFileSync(
      path.join(dir, 'bin/flow-notify'),
      ['emit', '--run', runId, '--team', 'acme', '--disposition', 'dead_letter'],
      { env: childProcessEnv(vars), encoding: 'utf8' },
    );
    assert.equal(JSON.parse(cli).emitted, true, cli);

    assert.equal(await terminate(api.child), 0, api.output());
    api = undefined;
    await worker.stop();
    assert.equal(worker.unexpectedExits.length, 0);
  });
});
