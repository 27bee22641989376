// Scale out: two worker processes and two API processes on one Temporal and one MongoDB-wire server, one task
// queue, one database. A burst of runs from both APIs is shared by both workers; one worker is SIGKILLed in the
// middle of it and not restarted: nothing is lost (every episode's callback and pushes arrive), and what repeats is
// invisible to users (a repeated push carries the same tag, a repeated callback the same webhook-id). The sweep's
// schedule fires once per interval whatever the number of workers.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import { sweepScheduleId } from '../client/schedules';
import { loadConfig, type Config } from '../config';
import type { PushPayload } from '../domain/push';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import { CallbackReceiver } from './support/callbackReceiver';
import { ApiClient, openStores, temporalClient } from './support/harness';
import { startProcess, terminate } from './support/processes';
import { notificationOf, startPushService, type PushService } from './support/pushService';
import { slowLink } from './support/slowLink';
import { TEST_JWT_SECRET, TEST_PUSH_BURST_LIMIT, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const RUNS = 40;
const DEVICES = 4;
const SWEEP_SECONDS = 5;

describe('scale out: two workers and two APIs on one Temporal and one database', function () {
  this.timeout(240_000);
  let push: PushService;
  let link: Awaited<ReturnType<typeof slowLink>>;
  let callbacks: CallbackReceiver;
  let vars: Record<string, string>;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let closeClient: () => Promise<void>;
  let caDir: string;
  const workers: WorkerProcess[] = [];
  const apis: { child: ChildProcess; output: () => string; client: ApiClient }[] = [];
  const devices: string[] = [];

  before(async () => {
    push = await startPushService();
    link = await slowLink(Number(new URL(push.origin).port), 150);
    callbacks = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    const suffix = randomBytes(4).toString('hex');
    vars = {
      MONGO_URL: testStack().mongoUrl,
      MONGO_DB: `t_scale_${suffix}`,
      TEMPORAL_ADDRESS: testStack().temporalAddress,
      TEMPORAL_TASK_QUEUE: `flow-notify-scale-${suffix}`,
      AUTH_JWT_SECRET: TEST_JWT_SECRET,
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      PUSH_ALLOW_PRIVATE: '1',
      CALLBACK_ALLOW_PRIVATE: '1',
      // A callback attempt lost with the killed worker is retried once its start-to-close (this + 20 s) passed.
      CALLBACK_TIMEOUT_SECONDS: '5',
      SWEEP_INTERVAL_SECONDS: String(SWEEP_SECONDS),
      PUSH_BURST_LIMIT: TEST_PUSH_BURST_LIMIT, // every run's push arrives, none folded into a digest
      PORT: '0',
    };
    config = loadConfig(vars);
    ({ mongo, stores } = await openStores(config));
    ({ client, close: closeClient } = await temporalClient(config));
    const now = new Date();
    for (let i = 0; i < DEVICES; i++) {
      const sub = push.endpoint(`alice${i}`);
      devices.push(push.idOf(sub));
      const endpoint = sub.endpoint.replace(push.origin, `https://127.0.0.1:${link.port}`);
      await stores.pushSubscriptions.upsert({ userId: 'alice', teamId: 'acme' }, { ...sub, endpoint }, now);
    }
    caDir = mkdtempSync(path.join(tmpdir(), 'flow-notify-scale-ca-'));
    writeFileSync(path.join(caDir, 'ca.pem'), push.ca);
    // The four processes start side by side: each spends seconds loading TypeScript (and a worker bundling its
    // workflows) that need not wait for the others.
    const startApi = async () => {
      const port = await freePort();
      const started = await startProcess(
        PROJECT_ROOT,
        ['-r', 'ts-node/register', 'api/server.ts'],
        childProcessEnv({ ...vars, PORT: String(port), NODE_EXTRA_CA_CERTS: path.join(caDir, 'ca.pem') }),
        'flow-notify api: listening',
      );
      return { ...started, client: new ApiClient(`http://127.0.0.1:${port}`).as('alice', 'acme') };
    };
    const startWorker = () => WorkerProcess.start({ vars, trustCa: push.ca });
    const [w0, w1, a0, a1] = await Promise.allSettled([startWorker(), startWorker(), startApi(), startApi()]);
    for (const w of [w0, w1]) if (w.status === 'fulfilled') workers.push(w.value);
    for (const a of [a0, a1]) if (a.status === 'fulfilled') apis.push(a.value);
    for (const r of [w0, w1, a0, a1]) if (r.status === 'rejected') throw r.reason;
  });

  after(async () => {
    for (const api of apis) await terminate(api.child);
    for (const worker of workers) await worker.stop();
    await client?.schedule
      .getHandle(sweepScheduleId(config.temporalTaskQueue))
      .delete()
      .catch(() => undefined);
    await closeClient?.();
    await mongo?.client.close();
    await link?.close();
    await push?.close();
    await callbacks?.close();
    if (caDir) rmSync(caDir, { recursive: true, force: true });
  });

  it('a burst from both APIs is shared by both workers; a worker SIGKILLed mid-burst loses nothing and shows no duplicate', async () => {
    const sweepHandle = client.schedule.getHandle(sweepScheduleId(config.temporalTaskQueue));
    const sweepsBefore = (await sweepHandle.describe()).info.numActionsTaken;

    // The burst: half the runs through each API, all ending at once.
    const runIds = await Promise.all(
      Array.from({ length: RUNS }, async (_, i) => {
        const api = apis[i % 2].client;
        const created = await api.post('/api/v1/runs', {
          title: `Burst ${i}`,
          callback: { url: callbacks.url },
        });
        assert.equal(created.status, 201, created.text);
        return created.body.id as string;
      }),
    );
    await Promise.all(
      runIds.map(async (runId, i) => {
        const done = await apis[(i + 1) % 2].client.post(`/api/v1/runs/${runId}/complete`, {
          finalAnswer: 'ok',
        });
        assert.equal(done.status, 200, done.text);
      }),
    );

    // The workers (by pid) that started the episodes' activities, from the histories (for an activity retried
    // on another worker, the attempt that ended it).
    const episodeIds = runIds.map((runId) => `${runId}:end`);
    const activitiesByWorker = async (): Promise<Map<string, number>> => {
      const ranBy = new Map<string, number>();
      const histories = await Promise.all(
        episodeIds.map((id) => client.workflow.getHandle(id).fetchHistory()),
      );
      for (const history of histories) {
        for (const event of history.events ?? []) {
          const pid = event.activityTaskStartedEventAttributes?.identity?.split('@')[0];
          if (pid) ranBy.set(pid, (ranBy.get(pid) ?? 0) + 1);
        }
      }
      return ranBy;
    };

    // Kill one worker once a quarter of the pushes are out and an activity has finished: the one that has run
    // the most so far. Which worker takes the burst is Temporal's choice (a workflow's tasks stick to the worker
    // that took its first, and on a loaded machine one worker can take nearly all of them); killing the busy one
    // shows the other picking up its work, and both end up having run some. The link to the push service is held
    // while the histories are read and the worker killed, so the burst cannot finish meanwhile however slow that is.
    const quarterOut = () => push.received().length >= (RUNS * DEVICES) / 4;
    let ranAtKill = new Map<string, number>();
    await waitUntil(
      'the burst to get going: a quarter of the pushes out and an activity finished',
      async () => {
        link.release();
        await sleep(quarterOut() ? 100 : 10);
        if (!quarterOut()) return false;
        link.hold();
        ranAtKill = await activitiesByWorker();
        return ranAtKill.size > 0;
      },
      { timeoutMs: 60_000, intervalMs: 0, seen: () => `${push.received().length} pushes` },
    );
    const ran = (worker: WorkerProcess): number => ranAtKill.get(String(worker.pid)) ?? 0;
    const [victim, survivor] = ran(workers[1]) > ran(workers[0]) ? [workers[1], workers[0]] : workers;
    const victimPid = victim.pid!;
    const survivorPid = survivor.pid!;
    await victim.kill();
    const pushesAtKill = push.received().length;
    link.release();
    assert.ok(pushesAtKill < RUNS * DEVICES, 'the kill came after the burst');

    // Nothing lost: every episode ends delivered, with its callback and a push on every device.
    await Promise.all(episodeIds.map((id) => client.workflow.getHandle(id).result()));
    const webhookIds = new Set(callbacks.received.map((c) => String(c.headers['webhook-id'])));
    assert.deepEqual(
      [...webhookIds].sort(),
      [...episodeIds].sort(),
      'one callback per episode (by webhook-id)',
    );
    for (const device of devices) {
      const tags = push.received(device).map((p) => (p.payload as PushPayload).tag);
      assert.deepEqual([...new Set(tags)].sort(), [...episodeIds].sort(), `device ${device}`);
    }
    // What repeated (a send or a callback in flight at the kill) is the same notification: same tag, same body.
    const repeatedPushes = push.received().length - RUNS * DEVICES;
    const repeatedCallbacks = callbacks.received.length - RUNS;
    const byKey = new Map<string, string>();
    for (const p of push.received()) {
      const key = `${p.endpointId}|${(p.payload as PushPayload).tag}`;
      const seen = JSON.stringify(notificationOf(p.payload));
      if (byKey.has(key)) assert.equal(seen, byKey.get(key), `a repeat of ${key} differs`);
      byKey.set(key, seen);
    }
    for (const c of callbacks.received) {
      const id = String(c.headers['webhook-id']);
      const first = callbacks.received.find((x) => String(x.headers['webhook-id']) === id)!;
      assert.equal(JSON.parse(c.body).episodeId, JSON.parse(first.body).episodeId);
    }

    // Both workers ran some.
    const ranBy = await activitiesByWorker();
    assert.ok(
      (ranBy.get(String(victimPid)) ?? 0) > 0,
      `the killed worker ran nothing: ${JSON.stringify([...ranBy])}`,
    );
    assert.ok(
      (ranBy.get(String(survivorPid)) ?? 0) > 0,
      `the survivor ran nothing: ${JSON.stringify([...ranBy])}`,
    );

    // The sweep: one schedule, at most one run per interval however many workers poll (fewer when a sweep
    // overran its interval: the schedule skips rather than overlaps). It has run since the burst began...
    const described = await waitUntil(
      'a sweep since the burst began',
      async () => {
        const now = await sweepHandle.describe();
        return now.info.numActionsTaken > sweepsBefore ? now : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );
    const sweeps = described.info.numActionsTaken - sweepsBefore;
    // ...and never twice for one interval, by the times its runs were scheduled for (not when they were taken: one
    // taken late on a loaded machine leaves less than an interval before the next), two for one slot sharing one.
    const scheduledAt = described.info.recentActions
      .map((a) => a.scheduledAt.getTime())
      .sort((x, y) => x - y);
    for (let i = 1; i < scheduledAt.length; i++) {
      assert.ok(
        scheduledAt[i] - scheduledAt[i - 1] >= SWEEP_SECONDS * 1000,
        `sweeps scheduled ${scheduledAt[i] - scheduledAt[i - 1]} ms apart`,
      );
    }
    console.log(
      `      activities by worker ${JSON.stringify(Object.fromEntries(ranBy))} (killed ${victimPid} after ` +
        `${pushesAtKill}/${RUNS * DEVICES} pushes); repeats: ${repeatedPushes} pushes, ${repeatedCallbacks} ` +
        `callbacks; ${sweeps} sweeps`,
    );
  });
});
