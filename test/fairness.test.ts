// Fairness on the shared task queue: one team's backlog of episodes must not hold another team's push behind it,
// and a run waiting for a person must not wait behind finished runs. The backlog is queued while no worker polls,
// then one worker with a single activity slot takes it: the order the push service receives the pushes in is the
// order the task queue dispatched the episodes in.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import type { PushPayload } from '../domain/push';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import { pushSenderFor } from '../delivery/push/sender';
import type { ApiHandle } from '../api/server';
import { ApiClient, openStores, startTestApi, startTestWorker, type RunningWorker } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { TEST_PUSH_BURST_LIMIT, testConfig } from './support/stack';

/** Episodes queued ahead: enough that "behind the whole backlog" and "early" are far apart. */
const BACKLOG = 16;

describe('fairness between teams on the shared task queue', function () {
  let push: PushService;
  let api: ApiHandle | undefined;
  let worker: RunningWorker | undefined;
  let mongo: Mongo | undefined;

  before(async () => {
    push = await startPushService();
  });

  afterEach(async () => {
    await worker?.stop();
    await api?.close();
    await mongo?.client.close();
    worker = api = mongo = undefined;
    push.reset();
  });

  after(async () => {
    await push?.close();
  });

  /** An API on its own task queue with no worker polling it yet; a worker with one activity slot on demand. */
  async function startWithoutWorker() {
    const vapid = webpush.generateVAPIDKeys();
    const config = testConfig({
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      VAPID_SUBJECT: 'mailto:ops@flow.test',
      PUSH_ALLOW_PRIVATE: '1',
      STUDIO_URL: 'https://studio.flow.test',
      SWEEP_INTERVAL_SECONDS: '3600',
      // One owner is pushed for every run of the backlog; bursts are test/pushBurst.test.ts's.
      PUSH_BURST_LIMIT: TEST_PUSH_BURST_LIMIT,
      // One fan-out at a time: the rest wait in the task queue, in the order it dispatches them.
      WORKER_MAX_CONCURRENT_ACTIVITIES: '1',
    });
    let stores: Stores;
    ({ mongo, stores } = await openStores(config));
    ({ api } = await startTestApi(config));
    const anonymous = new ApiClient(api.url);
    return {
      anonymous,
      async startWorker() {
        worker = await startTestWorker(config, stores, {
          pushSender: pushSenderFor(config, { ca: push.ca }),
        });
      },
    };
  }

  /** A person with one device; returns their API client. */
  async function subscribed(anonymous: ApiClient, userId: string, teamId: string): Promise<ApiClient> {
    const user = anonymous.as(userId, teamId);
    const res = await user.post('/api/v1/notifications/push/subscriptions', push.endpoint(userId));
    assert.equal(res.status, 201, res.text);
    return user;
  }

  async function finishedRun(owner: ApiClient, title: string): Promise<string> {
    const created = await owner.post('/api/v1/runs', { title });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    const done = await owner.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'done' });
    assert.equal(done.status, 200, done.text);
    return runId;
  }

  /** The runs in the order their first push reached the push service. */
  async function pushOrder(expected: number): Promise<string[]> {
    const received = await push.waitFor(expected, undefined, 60_000);
    return [...new Set(received.map((r) => (r.payload as PushPayload).runId))];
  }

  it("a team's backlog does not hold another team's push behind it", async () => {
    const { anonymous, startWorker } = await startWithoutWorker();
    const loud = await subscribed(anonymous, 'lou', 'loud');
    const calm = await subscribed(anonymous, 'cal', 'calm');
    const backlog: string[] = [];
    for (let i = 0; i < BACKLOG; i++) backlog.push(await finishedRun(loud, `loud ${i}`));
    const quiet = await finishedRun(calm, 'calm 0');

    await startWorker();
    const order = await pushOrder(BACKLOG + 1);
    const position = order.indexOf(quiet);
    assert.ok(
      position < BACKLOG / 2,
      `the calm team's push came ${position + 1}th of ${BACKLOG + 1}, behind ${position} of the loud team's`,
    );
  });

  it('a run waiting for a person overtakes a backlog of finished runs of its team', async () => {
    const { anonymous, startWorker } = await startWithoutWorker();
    const owner = await subscribed(anonymous, 'ann', 'busy');
    const backlog: string[] = [];
    for (let i = 0; i < BACKLOG; i++) backlog.push(await finishedRun(owner, `finished ${i}`));
    const created = await owner.post('/api/v1/runs', { title: 'needs a decision' });
    const waiting = created.body.id as string;
    const paused = await owner.post(`/api/v1/runs/${waiting}/pause`, { prompt: 'Approve?' });
    assert.equal(paused.status, 200, paused.text);

    await startWorker();
    const order = await pushOrder(BACKLOG + 1);
    const position = order.indexOf(waiting);
    assert.ok(
      position < BACKLOG / 2,
      `the question came ${position + 1}th of ${BACKLOG + 1}, behind ${position} finished runs`,
    );
  });

  it('a team whose id is longer than a fairness key may be is served all the same', async () => {
    const { anonymous, startWorker } = await startWithoutWorker();
    const owner = await subscribed(anonymous, 'lee', `team-${'é'.repeat(100)}`);
    await startWorker();
    const runId = await finishedRun(owner, 'a long team name');
    assert.deepEqual(await pushOrder(1), [runId]);
  });
});
