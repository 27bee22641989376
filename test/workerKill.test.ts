// A worker killed mid fan-out (a real process kill): the push family's promise that a crash repeats at most the
// sends in flight. The worker is a separate process (test/support/workerProcess.ts) so SIGKILL is a real crash;
// the push service sits behind a loopback link that holds its answers back, so the fan-out of one episode to
// 400 endpoints lasts a few seconds and the kill lands in the middle of it.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import { PUSH_REPEATS_PER_CRASH } from '../activities';
import type { PushPayload } from '../domain/push';
import type { Stores } from '../store';
import type { EpisodeResult } from '../contract/workflows';
import { subscriptionId } from '../store/push/subscriptions';
import type { ApiClient } from './support/harness';
import { notificationOf, startPushService, type PushService, type ReceivedPush } from './support/pushService';
import { processStackVars } from './support/processStack';
import { slowLink } from './support/slowLink';
import type { WorkerProcess } from './support/workerProcess';
import { waitUntil } from './support/waitUntil';
import { startWorkerProcessStack, type WorkerProcessStack } from './support/workerProcessStack';

const USERS = ['alice', 'bob', 'carol', 'dave'];
const ENDPOINTS_PER_USER = 100;
const TOTAL = USERS.length * ENDPOINTS_PER_USER;

describe('a worker killed mid fan-out (a real process kill)', function () {
  this.timeout(180_000);
  let push: PushService;
  let link: Awaited<ReturnType<typeof slowLink>>;
  let stack: WorkerProcessStack;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;
  let worker: WorkerProcess;
  /** endpoint id (the push service's) of every subscription */
  const endpointIds: string[] = [];
  /** our subscription id → the push service's endpoint id */
  const endpointOf = new Map<string, string>();

  before(async () => {
    push = await startPushService();
    link = await slowLink(Number(new URL(push.origin).port), 120);
    const vapid = webpush.generateVAPIDKeys();
    const vars = processStackVars(
      { db: 't_kill', queue: 'kill' },
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        STUDIO_URL: 'https://studio.flow.test',
        SWEEP_INTERVAL_SECONDS: '3600',
        PORT: '0',
      },
    );
    stack = await startWorkerProcessStack(vars, { trustCa: push.ca });
    ({ stores, client, worker } = stack);
    alice = stack.anonymous.as('alice', 'acme');

    // 400 subscriptions: the owner's and three teammates' who chose team-wide scope, all behind the slow link.
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
    await stack?.stop();
    await link?.close();
    await push?.close();
  });

  it('after a SIGKILL and a restart every endpoint has the push; only sends in flight at the kill repeat, with the same tag', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Fleet rollout' });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    const episodeId = `${runId}:end`;
    assert.equal(
      (await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'All 400 hosts patched.' })).status,
      200,
    );

    // Kill once a quarter of the endpoints have the push.
    await waitUntil('a quarter of the fan-out', () => push.received().length >= TOTAL / 4, {
      timeoutMs: 60_000,
      intervalMs: 10,
      seen: () => `${push.received().length} received`,
    });
    await worker.kill();
    const killedAt = Date.now();
    const receivedAtKill = push.received().length;
    assert.ok(receivedAtKill < TOTAL, `the kill came after the fan-out ended (${receivedAtKill})`);
    const recordedAtKill = await stores.pushDeliveries.deliveredSubscriptions(episodeId, [
      ...endpointOf.keys(),
    ]);

    await worker.start();
    const result = (await client.workflow.getHandle(episodeId).result()) as EpisodeResult;
    assert.equal(result.push, 'delivered');
    assert.equal(await stores.claims.state(episodeId), 'delivered');
    assert.equal(await stores.pushDeliveries.countForEpisode(episodeId), TOTAL);
    // Each device's last success is on its row, those reached before the kill and after alike.
    const rows = await stores.pushSubscriptions.listForUsers(USERS);
    assert.deepEqual(
      rows.filter((row) => !(row.lastSuccessAt instanceof Date)).map((row) => row._id),
      [],
      'subscriptions without their last success',
    );

    // Every endpoint has the push, over TLS trusted through NODE_EXTRA_CA_CERTS, with the episode's tag.
    const byEndpoint = new Map<string, ReceivedPush[]>(endpointIds.map((id) => [id, []]));
    for (const received of push.received()) byEndpoint.get(received.endpointId)!.push(received);
    const missing = [...byEndpoint].filter(([, got]) => got.length === 0).map(([id]) => id);
    assert.deepEqual(missing, [], 'endpoints without the push');
    for (const received of push.received()) {
      assert.equal(received.tls, true);
      assert.equal((received.payload as PushPayload).tag, episodeId);
    }

    // Repeats: only endpoints whose first copy was in flight at the kill or accepted and not yet recorded, at most
    // two per lane, and every repeat is the same notification with the same tag.
    const recorded = new Set([...recordedAtKill].map((id) => endpointOf.get(id)));
    const repeated = [...byEndpoint].filter(([, got]) => got.length > 1);
    assert.ok(
      repeated.length <= PUSH_REPEATS_PER_CRASH,
      `${repeated.length} endpoints got the push twice; at most ${PUSH_REPEATS_PER_CRASH} were unrecorded`,
    );
    for (const [id, got] of repeated) {
      assert.equal(got.length, 2, `${id} got ${got.length} copies`);
      assert.ok(got[0].at.getTime() <= killedAt + 1000, `${id}: its first copy was sent after the kill`);
      assert.ok(got[1].at.getTime() > killedAt, `${id}: its repeat came before the kill`);
      assert.ok(!recorded.has(id), `${id} was recorded as reached, yet sent again`);
      assert.deepEqual(notificationOf(got[1].payload), notificationOf(got[0].payload));
      assert.notEqual((got[1].payload as PushPayload).receipt, (got[0].payload as PushPayload).receipt);
    }

    // The retry was Temporal's: the heartbeat timeout noticed the dead worker and a second attempt finished.
    const history = await client.workflow.getHandle(episodeId).fetchHistory();
    const attempts = (history.events ?? [])
      .map((e) => e.activityTaskStartedEventAttributes?.attempt)
      .filter((a): a is number => typeof a === 'number');
    assert.ok(Math.max(...attempts) >= 2, `no activity was retried: attempts ${attempts.join(',')}`);
    console.log(
      `      kill after ${receivedAtKill}/${TOTAL} received (${recordedAtKill.size} recorded); ` +
        `${repeated.length} repeated; recovered ${((Date.now() - killedAt) / 1000).toFixed(1)} s after the kill`,
    );
  });
});
