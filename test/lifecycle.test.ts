// Lifecycle: SIGTERM and the probes. A worker told to stop in the middle of a 400-endpoint fan-out shuts down of its
// own accord (the sends in flight done or cancelled at its grace, SHUTDOWN_GRACE_SECONDS) and, after a restart, every endpoint has exactly one push except those in flight at
// the stop (same tag); an API told to stop finishes the request in flight and refuses new connections; /healthz is
// liveness, /readyz readiness (API and the worker's WORKER_HEALTH_PORT).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Connection, type Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import webpush from 'web-push';
import { PUSH_FAN_OUT_WIDTH, PUSH_REPEATS_PER_CRASH } from '../activities';
import { searchAttributesProbe } from '../client/searchAttributeCheck';
import { loadConfig, type Config } from '../config';
import type { PushPayload } from '../domain/push';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import { subscriptionId } from '../store/push/subscriptions';
import type { EpisodeResult } from '../contract/workflows';
import { ApiClient, openStores, startTestApi, temporalClient } from './support/harness';
import { startPushService, type PushService, type ReceivedPush } from './support/pushService';
import { startProcess, terminate } from './support/processes';
import { slowLink } from './support/slowLink';
import { deleteSweepSchedule, processStackVars } from './support/processStack';
import { testStack } from './support/stack';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';
import { waitUntil } from './support/waitUntil';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const USERS = ['alice', 'bob', 'carol', 'dave'];
const ENDPOINTS_PER_USER = 100;
const TOTAL = USERS.length * ENDPOINTS_PER_USER;
const GRACE_SECONDS = 2;

describe('lifecycle: SIGTERM and probes', function () {
  this.timeout(180_000);
  let push: PushService;
  let link: Awaited<ReturnType<typeof slowLink>>;
  let vars: Record<string, string>;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let closeClient: () => Promise<void>;
  let worker: WorkerProcess | undefined;
  let api: { child: ChildProcess; output: () => string } | undefined;
  const endpointIds: string[] = [];
  const endpointOf = new Map<string, string>();

  before(async () => {
    push = await startPushService();
    link = await slowLink(Number(new URL(push.origin).port), 120);
    const vapid = webpush.generateVAPIDKeys();
    vars = processStackVars(
      { db: 't_life', queue: 'life' },
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
        SHUTDOWN_GRACE_SECONDS: String(GRACE_SECONDS),
        PORT: '0',
      },
    );
    config = loadConfig(vars);
    ({ mongo, stores } = await openStores(config));
    ({ client, close: closeClient } = await temporalClient(config));
    const now = new Date();
    for (const user of USERS) {
      if (user !== 'alice') await stores.notificationPrefs.setScope(user, 'acme', 'team', now);
      const subs = Array.from({ length: ENDPOINTS_PER_USER }, (_, i) => push.endpoint(`${user}${i}`));
      await Promise.all(
        subs.map(async (sub) => {
          endpointIds.push(push.idOf(sub));
          const endpoint = sub.endpoint.replace(push.origin, `https://127.0.0.1:${link.port}`);
          endpointOf.set(subscriptionId(endpoint), push.idOf(sub));
          await stores.pushSubscriptions.upsert({ userId: user, teamId: 'acme' }, { ...sub, endpoint }, now);
        }),
      );
    }
  });

  after(async () => {
    if (api) await terminate(api.child);
    await worker?.stop();
    if (client) await deleteSweepSchedule(client, config.temporalTaskQueue);
    await closeClient?.();
    await mongo?.client.close();
    await link?.close();
    await push?.close();
  });

  it('a worker stopped mid fan-out shuts down of its own accord; after a restart every endpoint has exactly one push, bar the ones in flight (same tag)', async () => {
    const healthPort = await freePort();
    worker = await WorkerProcess.start({
      vars: { ...vars, WORKER_HEALTH_PORT: String(healthPort) },
      trustCa: push.ca,
    });
    // Workers started from the sources load the run's bundle (WORKFLOW_BUNDLE_DIR) rather than bundling.
    assert.match(worker.output(), /workflows prebuilt bundle/);
    // The worker's probes: live, and ready once it polls.
    // A refused or reset probe names its cause (fetch says only "fetch failed").
    const probe = (route: string) =>
      fetch(`http://127.0.0.1:${healthPort}${route}`).catch((err: Error) => {
        throw new Error(`GET ${route} on the worker's port ${healthPort}: ${String(err.cause ?? err)}`);
      });
    assert.equal((await probe('/healthz')).status, 200);
    const ready = await probe('/readyz');
    assert.equal(ready.status, 200, await ready.clone().text());
    assert.deepEqual(await ready.json(), { temporal: 'ok', mongo: 'ok', searchAttributes: 'ok' });

    const { api: inProcessApi, client: anonymous } = await startTestApi(config);
    try {
      const alice = anonymous.as('alice', 'acme');
      const created = await alice.post('/api/v1/runs', { title: 'Fleet rollout' });
      assert.equal(created.status, 201, created.text);
      const runId = created.body.id as string;
      const episodeId = `${runId}:end`;
      assert.equal((await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'ok' })).status, 200);

      await waitUntil('a quarter of the fan-out', () => push.received().length >= TOTAL / 4, {
        timeoutMs: 60_000,
        intervalMs: 10,
        seen: () => `${push.received().length} received`,
      });
      const end = await worker.stop(60_000); // SIGTERM; SIGKILL only if it overstays a minute
      const receivedAtStop = push.received().length;
      assert.ok(receivedAtStop < TOTAL, `the stop came after the fan-out ended (${receivedAtStop})`);
      assert.match(worker.output(), /SIGTERM: no new tasks/);
      // Its own exit: the fan-out cancelled at the grace and done. A send still hanging past the force time (grace
      // + 15 s) makes worker.run() throw (exit 1), and one past the minute is a SIGKILL.
      assert.deepEqual(end, { code: 0, signal: null }, worker.output());
      assert.equal(worker.unexpectedExits.length, 0);
      const recordedAtStop = await stores.pushDeliveries.deliveredSubscriptions(episodeId, [
        ...endpointOf.keys(),
      ]);
      // It stopped sending: nothing arrives while no worker runs.
      await sleep(1000);
      const quiet = push.received().length;
      assert.ok(
        quiet - receivedAtStop <= PUSH_FAN_OUT_WIDTH,
        `${quiet - receivedAtStop} pushes after the stop`,
      );

      await worker.start();
      const result = (await client.workflow.getHandle(episodeId).result()) as EpisodeResult;
      assert.equal(result.push, 'delivered');
      assert.equal(await stores.pushDeliveries.countForEpisode(episodeId), TOTAL);

      const byEndpoint = new Map<string, ReceivedPush[]>(endpointIds.map((id) => [id, []]));
      for (const received of push.received()) byEndpoint.get(received.endpointId)!.push(received);
      assert.deepEqual(
        [...byEndpoint].filter(([, got]) => got.length === 0).map(([id]) => id),
        [],
        'endpoints without the push',
      );
      const recorded = new Set([...recordedAtStop].map((id) => endpointOf.get(id)));
      const repeated = [...byEndpoint].filter(([, got]) => got.length > 1);
      assert.ok(repeated.length <= PUSH_REPEATS_PER_CRASH, `${repeated.length} endpoints got the push twice`);
      for (const [id, got] of repeated) {
        assert.equal(got.length, 2, `${id} got ${got.length} copies`);
        assert.ok(!recorded.has(id), `${id} was recorded as reached, yet sent again`);
        assert.equal((got[1].payload as PushPayload).tag, (got[0].payload as PushPayload).tag);
      }
      console.log(
        `      stop after ${receivedAtStop}/${TOTAL} received (${recordedAtStop.size} recorded); ` +
          `${repeated.length} repeated`,
      );
    } finally {
      await inProcessApi.close();
    }
  });

  it('an API told to stop finishes the request in flight, refuses new connections and exits 0; /healthz and /readyz', async () => {
    const caDir = mkdtempSync(path.join(tmpdir(), 'flow-notify-life-ca-'));
    try {
      writeFileSync(path.join(caDir, 'ca.pem'), push.ca);
      const port = await freePort();
      api = await startProcess(
        PROJECT_ROOT,
        ['-r', 'ts-node/register', 'api/server.ts'],
        childProcessEnv({
          ...vars,
          PORT: String(port),
          // Longer than this test may run: an exit at all is the server closing once the request in flight was
          // answered, never its grace running out.
          SHUTDOWN_GRACE_SECONDS: '3600',
          NODE_EXTRA_CA_CERTS: path.join(caDir, 'ca.pem'),
        }),
        'flow-notify api: listening',
      );
      const base = new ApiClient(`http://127.0.0.1:${port}`);
      const alice = base.as('alice', 'acme');
      assert.deepEqual((await base.get('/healthz')).body, { status: 'ok' });
      const ready = await base.get('/readyz');
      assert.equal(ready.status, 200, ready.text);
      assert.deepEqual(ready.body, { temporal: 'ok', mongo: 'ok', searchAttributes: 'ok', pushKeys: 'ok' });

      // A test push to alice's 100 devices behind the slow link: seconds of work, in flight when SIGTERM comes.
      const before = push.received().length;
      const inFlight = alice.post('/api/v1/notifications/push/test', {});
      await waitUntil('ten pushes of the test push', () => push.received().length >= before + 10, {
        intervalMs: 10,
      });
      const child = api.child;
      const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
      child.kill('SIGTERM');
      // The API logs this in the same tick as it stops listening.
      await waitUntil('the API to take the SIGTERM', () => /SIGTERM: no new connections/.test(api!.output()));
      await assert.rejects(base.get('/healthz'), 'a new connection after SIGTERM is refused');
      const answered = await inFlight;
      assert.equal(answered.status, 202, answered.text);
      assert.deepEqual(answered.body, { sent: ENDPOINTS_PER_USER });
      assert.ok(push.received().length - before >= ENDPOINTS_PER_USER);
      assert.equal(await exited, 0, api.output());
      api = undefined;
    } finally {
      rmSync(caDir, { recursive: true, force: true });
    }
  });

  it('a namespace without the search attributes: the API refuses to start, and the readiness probe names them', async () => {
    const namespace = `life-${randomBytes(3).toString('hex')}`;
    const connection = await Connection.connect({ address: testStack().temporalAddress });
    try {
      await connection.workflowService.registerNamespace({
        namespace,
        workflowExecutionRetentionPeriod: msToTs('1 day'),
      });
      // A new namespace takes a moment to be served.
      const probe = searchAttributesProbe(connection, namespace);
      let failure: unknown;
      for (let i = 0; i < 50; i++) {
        failure = await probe().then(
          () => undefined,
          (err: unknown) => err,
        );
        if (failure instanceof Error && /missing search attributes/.test(failure.message)) break;
        await sleep(200);
      }
      assert.match(String(failure), /missing search attributes FlowRunId, FlowTeamId/);
      await assert.rejects(startTestApi(loadConfig({ ...vars, TEMPORAL_NAMESPACE: namespace })), {
        name: 'ConfigError',
        message: /lacks the search attributes FlowRunId, FlowTeamId/,
      });
    } finally {
      await connection.close();
    }
  });
});
