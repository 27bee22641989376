// MongoDB over TLS: the embedded FerretDB listening with TLS only (tools/ferretdb -tls, -tls-cert, -tls-key, and
// -tls-ca to require a client certificate), and the worker and the API reaching it through nothing but
// MONGO_URL=mongodb://...?tls=true&tlsCAFile=... (&tlsCertificateKeyFile=... for the client certificate).
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { MongoClient } from 'mongodb';
import type { ApiHandle } from '../api/server';
import { sweepScheduleId } from '../client/schedules';
import { loadConfig } from '../config';
import { PROJECT_ROOT } from '../platform/embedded';
import { CallbackReceiver } from './support/callbackReceiver';
import { startTestApi, temporalClient } from './support/harness';
import { TEST_JWT_SECRET, testStack } from './support/stack';
import { testPki, type TestPki } from './support/tlsFront';
import { WorkerProcess } from './support/workerProcess';

/** Starts tools/bin/ferretdb with TLS only (no plain listener); resolves with its host:port. */
async function startTlsFerret(
  pki: TestPki,
  dataDir: string,
  requireClientCert: boolean,
): Promise<{ child: ChildProcess; hostPort: string }> {
  const args = [
    '-listen=',
    '-tls=127.0.0.1:0',
    `-tls-cert=${pki.serverCertFile}`,
    `-tls-key=${pki.serverKeyFile}`,
    ...(requireClientCert ? [`-tls-ca=${pki.caFile}`] : []),
    `-data=${dataDir}`,
    '-log-level=error',
  ];
  const child = spawn(path.join(PROJECT_ROOT, 'tools/bin/ferretdb'), args, {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const hostPort = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`ferretdb not ready:\n${output}`)), 20_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString('utf8');
      const ready = /ready mongodb:\/\/([^/]+)\/\?tls=true/.exec(output);
      if (ready) {
        clearTimeout(timer);
        resolve(ready[1]);
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`ferretdb exited (${code}):\n${output}`)));
  });
  return { child, hostPort };
}

for (const mode of ['server certificate', 'server certificate and a required client certificate'] as const) {
  const requireClientCert = mode !== 'server certificate';

  describe(`MongoDB over TLS (${mode})`, function () {
    this.timeout(120_000);
    let pki: TestPki;
    let dataDir: string;
    let ferret: { child: ChildProcess; hostPort: string };
    let mongoUrl: string;
    let vars: Record<string, string>;
    let worker: WorkerProcess | undefined;
    let api: ApiHandle | undefined;
    let callbacks: CallbackReceiver;

    before(async () => {
      pki = testPki();
      dataDir = mkdtempSync(path.join(tmpdir(), 'flow-notify-ferret-tls-'));
      ferret = await startTlsFerret(pki, dataDir, requireClientCert);
      let url = `mongodb://${ferret.hostPort}/?tls=true&tlsCAFile=${encodeURIComponent(pki.caFile)}`;
      if (requireClientCert) {
        // The driver takes the client certificate and its key in one PEM file.
        const pair = path.join(pki.dir, 'client-pair.pem');
        writeFileSync(
          pair,
          readFileSync(pki.clientCertFile, 'utf8') + readFileSync(pki.clientKeyFile, 'utf8'),
        );
        url += `&tlsCertificateKeyFile=${encodeURIComponent(pair)}`;
      }
      mongoUrl = url;
      callbacks = await CallbackReceiver.start();
      const suffix = Math.random().toString(16).slice(2, 10);
      vars = {
        MONGO_URL: mongoUrl,
        MONGO_DB: `t_mtls_${suffix}`,
        TEMPORAL_ADDRESS: testStack().temporalAddress,
        TEMPORAL_TASK_QUEUE: `flow-notify-mtls-${suffix}`,
        AUTH_JWT_SECRET: TEST_JWT_SECRET,
        CALLBACK_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
        PORT: '0',
      };
    });

    after(async () => {
      await worker?.stop();
      await api?.close();
      if (vars) {
        const { client, close } = await temporalClient(loadConfig(vars));
        await client.schedule
          .getHandle(sweepScheduleId(vars.TEMPORAL_TASK_QUEUE))
          .delete()
          .catch(() => undefined);
        await close();
      }
      await callbacks?.close();
      ferret?.child.kill('SIGTERM');
      if (dataDir) rmSync(dataDir, { recursive: true, force: true });
      pki?.remove();
    });

    it('worker and API keep their records through MONGO_URL with tls=true and the CA file', async () => {
      worker = await WorkerProcess.start({ vars });
      const started = await startTestApi(loadConfig(vars));
      api = started.api;
      const alice = started.client.as('alice', 'acme');
      const created = await alice.post('/api/v1/runs', {
        title: 'Over TLS',
        callback: { url: callbacks.url },
      });
      assert.equal(created.status, 201, created.text);
      const runId = created.body.id as string;
      assert.equal((await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);
      await callbacks.waitFor(1, 30_000);
      // The worker's claim, written over TLS, read back by the API over TLS.
      let episodes;
      for (let i = 0; i < 50; i++) {
        episodes = await alice.get(`/api/v1/runs/${runId}/episodes`);
        if (JSON.stringify(episodes.body).includes('delivered')) break;
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(episodes!.status, 200);
      assert.match(JSON.stringify(episodes!.body), /delivered/);
    });

    it('a client that does not trust the CA (or brings no certificate when one is required) is refused', async () => {
      // A refusal shows as the server selection timing out: the three clients wait out theirs side by side.
      const options = { serverSelectionTimeoutMS: 3000 };
      const untrusting = new MongoClient(`mongodb://${ferret.hostPort}/?tls=true`, options);
      const plain = new MongoClient(`mongodb://${ferret.hostPort}/`, options);
      const noCert = new MongoClient(
        `mongodb://${ferret.hostPort}/?tls=true&tlsCAFile=${encodeURIComponent(pki.caFile)}`,
        options,
      );
      await Promise.all([
        assert.rejects(untrusting.db('x').command({ ping: 1 })),
        assert.rejects(plain.db('x').command({ ping: 1 })),
        requireClientCert
          ? assert.rejects(noCert.db('x').command({ ping: 1 }))
          : noCert
              .db('x')
              .command({ ping: 1 })
              .then((answer) => assert.deepEqual(answer, { ok: 1 })),
      ]);
      await Promise.all([untrusting.close(), plain.close(), noCert.close()]);
    });
  });
}
