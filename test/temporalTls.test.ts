// A secured Temporal: worker, API and runner CLI reach the dev server only through a loopback TLS front that
// requires a client certificate from a test CA (test/support/tlsFront.ts), with the settings of config.ts
// (TEMPORAL_TLS, TEMPORAL_TLS_CA, TEMPORAL_TLS_CERT/KEY, TEMPORAL_TLS_SERVER_NAME, TEMPORAL_API_KEY).
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import type { ApiHandle } from '../api/server';
import { temporalConnectionOptions } from '../client/connection';
import { ConfigError, loadConfig, type Config } from '../config';
import { PROJECT_ROOT } from '../platform/embedded';
import { CallbackReceiver } from './support/callbackReceiver';
import { startTestApi, type ApiClient } from './support/harness';
import { deleteSweepScheduleOf, processStackVars } from './support/processStack';
import { testStack } from './support/stack';
import { startTlsFront, testPki, type TestPki, type TlsFront } from './support/tlsFront';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';

const execFileAsync = promisify(execFile);
const API_KEY = 'flow-test-key.abc123';

describe('a secured Temporal (TLS, mTLS, API key) through a TLS front', function () {
  this.timeout(120_000);
  let pki: TestPki;
  let front: TlsFront;
  let vars: Record<string, string>;
  let config: Config;
  let worker: WorkerProcess | undefined;
  let api: ApiHandle | undefined;
  let alice: ApiClient;
  let callbacks: CallbackReceiver;

  before(async () => {
    pki = testPki();
    front = await startTlsFront(testStack().temporalAddress, pki);
    callbacks = await CallbackReceiver.start();
    vars = processStackVars(
      { db: 't_tls', queue: 'tls' },
      {
        TEMPORAL_ADDRESS: front.address,
        TEMPORAL_TLS: '1',
        TEMPORAL_TLS_CA: pki.caFile,
        TEMPORAL_TLS_CERT: pki.clientCertFile,
        TEMPORAL_TLS_KEY: pki.clientKeyFile,
        TEMPORAL_TLS_SERVER_NAME: 'localhost',
        TEMPORAL_API_KEY: API_KEY,
        CALLBACK_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
        PORT: '0',
      },
    );
    config = loadConfig(vars);
  });

  after(async () => {
    await worker?.stop();
    await api?.close();
    if (config) await deleteSweepScheduleOf({ ...config, temporalAddress: testStack().temporalAddress });
    await callbacks?.close();
    await front?.close();
    pki?.remove();
  });

  it('worker, API and runner CLI work through it with mTLS, and every call carries the API key as Bearer', async () => {
    worker = await WorkerProcess.start({ vars });
    const started = await startTestApi(config);
    api = started.api;
    alice = started.client.as('alice', 'acme');
    const created = await alice.post('/api/v1/runs', { title: 'Secured', callback: { url: callbacks.url } });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    assert.equal((await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'done' })).status, 200);
    const [callback] = await callbacks.waitFor(1, 30_000);
    assert.equal(JSON.parse(callback.body).type, 'run.finished');

    // Not spawnSync: the front runs in this process and must keep relaying while the CLI runs.
    const cli = await execFileAsync(
      path.join(PROJECT_ROOT, 'bin/flow-notify'),
      ['emit', '--run', runId, '--team', 'acme', '--disposition', 'ack'],
      { env: childProcessEnv({ ...vars, FLOW_NOTIFY_FROM_SOURCE: '1' }), encoding: 'utf8', timeout: 60_000 },
    );
    assert.equal(JSON.parse(cli.stdout).emitted, true, cli.stdout);

    // Worker (its polls), API (the start) and CLI all went through the front, as the client certificate.
    assert.ok((front.callsByClient.get('client') ?? 0) > 5, JSON.stringify([...front.callsByClient]));
    assert.deepEqual([...front.callsByClient.keys()], ['client']);
    assert.ok(front.authorizations.length > 5);
    assert.ok(
      front.authorizations.every((a) => a === `Bearer ${API_KEY}`),
      JSON.stringify([...new Set(front.authorizations)]),
    );
  });

  it('a client without a certificate, or with one from another CA, is refused', async () => {
    const refusedBefore = front.refused.length;
    const tls = { serverNameOverride: 'localhost', serverRootCACertificate: readFileSync(pki.caFile) };
    await assert.rejects(Connection.connect({ address: front.address, tls, connectTimeout: 5_000 }));
    await assert.rejects(
      NativeConnection.connect({
        address: front.address,
        tls: {
          ...tls,
          clientCertPair: { crt: readFileSync(pki.strangerCertFile), key: readFileSync(pki.strangerKeyFile) },
        },
      }),
    );
    assert.ok(front.refused.length >= refusedBefore + 2, front.refused.join('\n'));
    // The same settings with the right pair connect (the refusals are the certificate's doing).
    const ok = await Connection.connect({ ...temporalConnectionOptions(config), connectTimeout: 5_000 });
    await ok.close();
  });

  it('a bad file path or half a client pair is a configuration error naming the variable (exit 78)', () => {
    const refusal = (overrides: Record<string, string>) => {
      try {
        loadConfig({ ...vars, ...overrides });
      } catch (err) {
        assert.ok(err instanceof ConfigError);
        return err.message;
      }
      return 'accepted';
    };
    assert.match(
      refusal({ TEMPORAL_TLS_CA: '/nonexistent/ca.pem' }),
      /^TEMPORAL_TLS_CA cannot be read: .*ENOENT/,
    );
    assert.match(
      refusal({ TEMPORAL_TLS_KEY: '' }),
      /^TEMPORAL_TLS_KEY is missing while TEMPORAL_TLS_CERT is set/,
    );
    assert.match(
      refusal({ TEMPORAL_TLS_CERT: '' }),
      /^TEMPORAL_TLS_CERT is missing while TEMPORAL_TLS_KEY is set/,
    );
    assert.match(
      refusal({ TEMPORAL_TLS_CERT: path.join(PROJECT_ROOT, 'package.json') }),
      /^TEMPORAL_TLS_CERT must name a PEM/,
    );
    assert.match(refusal({ TEMPORAL_TLS: '0' }), /is set while TEMPORAL_TLS is off/);

    const worker = spawnSync(process.execPath, ['-r', 'ts-node/register', 'worker.ts'], {
      cwd: PROJECT_ROOT,
      env: childProcessEnv({ ...vars, TEMPORAL_TLS_KEY: '/nonexistent/client.key' }),
      encoding: 'utf8',
      timeout: 60_000,
    });
    assert.equal(worker.status, 78, worker.stderr);
    assert.match(worker.stderr, /configuration error: TEMPORAL_TLS_KEY cannot be read/);
  });
});
