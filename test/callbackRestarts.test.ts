// The restart drill of the callback schedule: callbacks whose receiver is down wait on a durable timer for their
// next attempt, and during that wait the worker is SIGKILLed and started again, the Temporal dev server is stopped
// and started again on its database file, and FerretDB is stopped and started again on its SQLite folder. Then
// the receiver answers: each callback arrives exactly once more, signed, and settles delivered.
//
// The schedule is shortened by configuration: CALLBACK_RETRY_SECONDS=2,80, so the second wait (80 s ± 10 %)
// stands for the 5-hour wait of the day-long default. It runs on a Temporal and a FerretDB of its own (it restarts
// them; other suites must never see that), with the worker as a child process (a SIGKILL is a real crash). Sweeps
// pass every 5 s meanwhile, as they would many times in 5 hours: none may start a second delivery.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import type { ApiHandle } from '../api/server';
import { loadConfig, type Config } from '../config';
import type { EpisodeResult } from '../contract/workflows';
import type { Stores } from '../store';
import type { Mongo } from '../store/mongo';
import type { CallbackAttemptRow } from '../store/callback/attempts';
import { sweepWorkflow } from '../workflows/sweep';
import { CallbackReceiver } from './support/callbackReceiver';
import { openStores, startTestApi, temporalClient, type ApiClient } from './support/harness';
import { deleteSweepSchedule, processStackVars } from './support/processStack';
import { startServers, type ServerStack } from './support/servers';
import { WorkerProcess } from './support/workerProcess';
import { waitUntil } from './support/waitUntil';

const RUNS = 5;
/**
 * The long wait (the second of the schedule): what the restarts must fit in. They took 12 to 38 s on a loaded
 * 2-core machine (the new worker loads TypeScript and bundles its workflows; the whole suite beside it), so 80 s
 * leaves room.
 */
const LONG_WAIT_SECONDS = 80;
const ENDS = ['complete', 'fail', 'cancel', 'complete', 'fail'] as const;

describe('callback retries through restarts (drill)', function () {
  this.timeout(240_000);
  let servers: ServerStack & { temporalAddress: string };
  let receiver: CallbackReceiver;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let closeClient: () => Promise<void>;
  let api: ApiHandle;
  let alice: ApiClient;
  let worker: WorkerProcess;

  before(async () => {
    receiver = await CallbackReceiver.start();
    // Down from the first attempt: every callback goes into its schedule.
    receiver.answerAlways({ status: 503 });
    servers = await startServers('callback-restarts', { temporal: true, external: false });
    const vars = processStackVars(
      { db: 't_cbrestart', queue: 'cbrestart', stack: servers },
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: `2,${LONG_WAIT_SECONDS}`,
        CALLBACK_TIMEOUT_SECONDS: '5',
        // Sweeps pass during the wait, as they would during 5 hours: none may start a second delivery.
        SWEEP_INTERVAL_SECONDS: '5',
        CLAIM_GRACE_SECONDS: '10',
        // An alert's tries are a third of that grace apart: an hour of them fits its workflow's history.
        OPS_ALERT_RETRY_HOURS: '1',
        PORT: '0',
      },
    );
    config = loadConfig(vars);
    const starting = WorkerProcess.start({ vars });
    ({ mongo, stores } = await openStores(config));
    ({ client, close: closeClient } = await temporalClient(config));
    const started = await startTestApi(config);
    api = started.api;
    alice = started.client.as('alice', 'acme');
    worker = await starting;
  });

  after(async () => {
    await worker?.stop();
    await api?.close();
    if (client) await deleteSweepSchedule(client, config.temporalTaskQueue);
    await closeClient?.();
    await mongo?.client.close();
    await servers?.stop();
    await receiver?.close();
  });

  it(`${RUNS} callbacks waiting ${LONG_WAIT_SECONDS} s (standing for 5 h) through a worker SIGKILL, a Temporal restart and a FerretDB restart: each arrives once more, signed, delivered; nothing else is sent`, async () => {
    // Runs that end (finished, failed, cancelled), each asking for a callback.
    const runs: { id: string; secret: string; episodeId: string }[] = [];
    for (const [i, end] of ENDS.slice(0, RUNS).entries()) {
      const created = await alice.post('/api/v1/runs', {
        title: `Drill ${i}`,
        callback: { url: receiver.url },
      });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id as string;
      const body =
        end === 'complete'
          ? { finalAnswer: `done ${i}` }
          : end === 'fail'
            ? { error: { code: 'tool_error', message: `step ${i} failed` } }
            : {};
      const ended = await alice.post(`/api/v1/runs/${id}/${end}`, body);
      assert.equal(ended.status, 200, ended.text);
      runs.push({ id, secret: created.body.callback.secret as string, episodeId: `${id}:end` });
    }
    const postsOf = (episodeId: string) =>
      receiver.received.filter((r) => r.headers['webhook-id'] === episodeId);

    // Every episode has been refused twice and sleeps on its long timer (started after its second attempt).
    const onLongTimer = async (episodeId: string): Promise<boolean> => {
      const history = await client.workflow.getHandle(episodeId).fetchHistory();
      return (history.events ?? []).some(
        (e) =>
          Number(e.timerStartedEventAttributes?.startToFireTimeout?.seconds ?? 0) >= LONG_WAIT_SECONDS * 0.9,
      );
    };
    await waitUntil(
      'every callback refused twice and waiting on its long timer',
      async () => (await Promise.all(runs.map((r) => onLongTimer(r.episodeId)))).every(Boolean),
      { intervalMs: 250, errorsMeanNotYet: true, timeoutMs: 60_000 },
    );
    const refusedBefore = runs.map((r) => postsOf(r.episodeId).length);
    assert.deepEqual(
      refusedBefore,
      runs.map(() => 2),
      'two refused attempts each before the long wait',
    );
    const secondRows = await Promise.all(
      runs.map(async (r) =>
        (await stores.callbackAttempts.listForRun(r.id, 10)).find((a) => a.attempt === 2),
      ),
    );
    const dues = secondRows.map((row) => row?.nextAttemptAt?.getTime());
    assert.ok(
      dues.every((due) => due !== undefined),
      'every second attempt says when the third is due',
    );
    const firstDue = Math.min(...(dues as number[]));

    // The restarts, one after the other, each while the timers run.
    const restarts: string[] = [];
    const timed = async (what: string, step: () => Promise<void>): Promise<void> => {
      const from = Date.now();
      await step();
      restarts.push(`${what} in ${Date.now() - from} ms`);
    };
    await timed('worker SIGKILLed and started again', () => worker.restart());
    await timed('Temporal stopped and started on its database file', () => servers.temporalServer!.restart());
    await timed('FerretDB stopped and started on its SQLite folder', () => servers.mongoServer!.restart());
    const restartsDone = Date.now();
    assert.ok(
      restartsDone < firstDue,
      `the restarts (${restarts.join(', ')}) outlasted the wait: done ${restartsDone - firstDue} ms after ` +
        'the first third attempt was due',
    );
    assert.deepEqual(
      runs.map((r) => postsOf(r.episodeId).length),
      refusedBefore,
      'nothing was sent during the restarts',
    );

    // The receiver is back; the timers fire.
    receiver.answerAlways({ status: 200 });
    const results = await Promise.all(
      runs.map((r) => client.workflow.getHandle(r.episodeId).result() as Promise<EpisodeResult>),
    );
    assert.deepEqual(
      results.map((r) => r.callback),
      runs.map(() => 'delivered'),
    );

    // One sweep pass after it all: nothing is owed any more, so it starts nothing and nothing more is sent.
    const sweep = await client.workflow.execute(sweepWorkflow, {
      taskQueue: config.temporalTaskQueue,
      workflowId: `cbrestart-sweep-${Date.now()}`,
    });
    assert.equal(sweep.started, 0, `the sweep found nothing owed: ${JSON.stringify(sweep)}`);

    for (const run of runs) {
      const posts = postsOf(run.episodeId);
      assert.equal(posts.length, 3, `${run.episodeId}: two refused attempts and one delivered, no repeat`);
      const third = posts[2];
      assert.ok(third.at.getTime() > restartsDone, 'the third attempt came after the restarts');
      // Every attempt carries the same webhook-id (the episode's) and a signature the receiver verifies.
      for (const post of posts) {
        const body = JSON.parse(post.body) as { episodeId: string; run: { id: string } };
        assert.equal(body.episodeId, run.episodeId);
        assert.equal(body.run.id, run.id);
        assert.doesNotThrow(
          () => new Webhook(run.secret).verify(post.body, post.headers as Record<string, string>),
          `${run.episodeId}: a valid signature`,
        );
      }

      assert.deepEqual(await stores.claims.describe(`cb|${run.episodeId}`), {
        state: 'delivered',
        result: 'delivered',
      });
      // The attempt log: every attempt, the refused ones with when the next was due, each sent once by its
      // activity (no Temporal retry of a lost attempt), the third on time after its durable wait.
      const rows = (await stores.callbackAttempts.listForRun(run.id, 10)).sort(
        (a, b) => a.attempt - b.attempt,
      );
      assert.deepEqual(
        rows.map((r) => [r.attempt, r.result, r.status, r.trigger, r.activityAttempt ?? 1]),
        [
          [1, 'retry', 503, 'episode', 1],
          [2, 'retry', 503, 'episode', 1],
          [3, 'delivered', 200, 'episode', 1],
        ],
      );
      assertNextAttempts(rows, posts);
      const view = await alice.get(`/api/v1/runs/${run.id}/episodes`);
      assert.equal(view.status, 200, view.text);
      const [episode] = view.body.episodes as {
        families: { callback: { state: string } };
        callbackAttempts: { attempt: number; nextAttemptAt?: string }[];
      }[];
      assert.equal(episode.families.callback.state, 'delivered');
      assert.deepEqual(
        episode.callbackAttempts.map((a) => [a.attempt, a.nextAttemptAt ?? null]),
        rows.map((r) => [r.attempt, r.nextAttemptAt?.toISOString() ?? null]),
      );
    }
    // Nothing else reached the receiver: no other id, no extra copy.
    assert.equal(receiver.received.length, RUNS * 3);
    assert.deepEqual(worker.unexpectedExits, [], 'the worker only exited when killed');
    console.log(
      `      ${restarts.join('; ')}; the first third attempt was due ${firstDue - restartsDone} ms later`,
    );
  });
});

/**
 * The refused attempts say when the next is due (2 s, then the long wait); the next came no earlier (a durable
 * timer). How punctually is the time-skipping test's (test/workflows/callbackSchedule).
 */
function assertNextAttempts(rows: CallbackAttemptRow[], posts: { at: Date }[]): void {
  for (const i of [0, 1]) {
    const row = rows[i];
    const due = row.nextAttemptAt;
    assert.ok(due instanceof Date, `attempt ${row.attempt} has nextAttemptAt`);
    assert.equal(due.getTime(), row.at.getTime() + row.durationMs + row.nextWaitSeconds! * 1000);
    const wait = row.nextWaitSeconds!;
    const scheduled = i === 0 ? 2 : LONG_WAIT_SECONDS;
    assert.ok(wait >= Math.floor(scheduled * 0.9) && wait <= Math.ceil(scheduled * 1.1), `wait ${wait} s`);
    const next = posts[i + 1].at.getTime();
    assert.ok(next >= due.getTime() - 100, `due ${due.toISOString()}, came ${due.getTime() - next} ms early`);
  }
  assert.equal(rows[2].nextAttemptAt, undefined, 'nothing follows the delivered attempt');
}
