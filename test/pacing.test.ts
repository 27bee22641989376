// Pacing per receiver origin, end to end on the real servers: one worker, a burst of run ends to one slow
// receiver (concurrency measured at the receiver), then a receiver that always fails (attempts reaching it are
// bounded once its breaker opens; the breaker shows in the metrics, the logs and the attempt log).
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { Registry } from 'prom-client';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import type { Config } from '../config';
import { mapBounded } from '../platform/concurrency';
import { createOriginPacing, originOf } from '../delivery/callback/pacing';
import { createMetrics, type Metrics } from '../platform/metrics';
import { createRunsService } from '../runs/service';
import type { Stores } from '../store';
import type { EpisodeResult } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { startWorkerStack, type WorkerStack } from './support/familyStack';
import { recordFixture } from './support/harness';
import { waitUntil } from './support/waitUntil';

const MAX_IN_FLIGHT = 4;
const BREAKER_FAILURES = 5;
const COOLDOWN_SECONDS = 2;
const caller = { userId: 'alice', teamId: 'acme' };

describe('callback pacing per receiver origin (one worker)', function () {
  this.timeout(15 * 60_000);
  let stack: WorkerStack;
  let config: Config;
  let stores: Stores;
  let client: Client;
  let metrics: Metrics;
  const logged: string[] = [];

  before(async () => {
    metrics = createMetrics(new Registry(), { processMetrics: false });
    stack = await startWorkerStack(
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN: String(MAX_IN_FLIGHT),
        CALLBACK_BREAKER_FAILURES: String(BREAKER_FAILURES),
        CALLBACK_BREAKER_COOLDOWN_SECONDS: String(COOLDOWN_SECONDS),
        CALLBACK_RETRY_SECONDS: '1,1,1,1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { metrics, workerLog: (line) => logged.push(line) },
    );
    ({ config, stores, client } = stack);
  });
  after(() => stack?.stop());

  /** `n` runs with a callback to `url`, completed without an emit; then each one's outcome emitted (its episode). */
  async function endRuns(n: number, url: string, callbackRetrySeconds = config.callbackRetrySeconds) {
    const runs = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    const ids = await mapBounded(
      Array.from({ length: n }, (_, i) => i),
      16,
      async () => {
        const run = await runs.create(caller, { callback: { url } });
        await runs.complete(caller, run._id, 'done');
        return run._id;
      },
    );
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: { ...episodeOptions(config), callbackRetrySeconds },
    });
    const started = Date.now();
    const episodes = await mapBounded(ids, 32, async (id) => (await emitter.emitRunOutcome(id))!.episodeId);
    return { episodes, started };
  }

  const result = (episodeId: string) =>
    client.workflow.getHandle(episodeId).result() as Promise<EpisodeResult>;

  it('500 run ends to one slow receiver: at most CALLBACK_MAX_IN_FLIGHT_PER_ORIGIN open at the receiver, each delivered once', async () => {
    const receiver = await CallbackReceiver.start();
    try {
      receiver.answerAlways({ status: 204, delayMs: 200 });
      const { episodes, started } = await endRuns(500, receiver.url);
      const results = await mapBounded(episodes, 50, result);
      const seconds = (Date.now() - started) / 1000;
      console.log(
        `      500 callbacks through ${MAX_IN_FLIGHT} slots to a 200 ms receiver: ${seconds.toFixed(1)} s from the ` +
          `first emit (at least ${(500 * 0.2) / MAX_IN_FLIGHT} s at that pace); peak open at the receiver ` +
          `${receiver.peakOpen}`,
      );
      assert.deepEqual(
        results.filter((r) => r.callback !== 'delivered'),
        [],
        'every episode delivered its callback',
      );
      const ids = receiver.received.map((r) => String(r.headers['webhook-id']));
      assert.equal(new Set(ids).size, 500, 'every episode reached the receiver');
      assert.equal(ids.length, 500, 'and each exactly once');
      assert.ok(receiver.peakOpen <= MAX_IN_FLIGHT, `peak ${receiver.peakOpen} open at the receiver`);
      assert.ok(receiver.peakOpen >= 2, 'the slots were used side by side');
    } finally {
      await receiver.close();
    }
  });

  it('a receiver that always fails: after the breaker opens, attempts reaching it are bounded; metric, logs and attempt log show it', async () => {
    const receiver = await CallbackReceiver.start();
    const origin = originOf(receiver.url)!;
    try {
      receiver.answerAlways({ status: 503 });
      // 60 episodes of 11 attempts each, a second apart: unpaced, all 660 would reach the receiver in ~15 s.
      const { episodes } = await endRuns(60, receiver.url, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]);
      await waitUntil('a first attempt', () => receiver.received.length > 0, { timeoutMs: 120_000 });
      const from = receiver.received[0].at.getTime();
      const windowMs = 30_000;
      await new Promise((resolve) => setTimeout(resolve, from + windowMs - Date.now()));
      const reached = receiver.received.filter((r) => r.at.getTime() < from + windowMs).length;

      // What may reach it in the window: the failures that open the breaker, those already in flight beside the
      // last of them, and one probe per cool-down (each at least 0.8 × COOLDOWN_SECONDS × 2^k after the last).
      let probes = 0;
      for (let t = 0, cooldown = 0.8 * COOLDOWN_SECONDS * 1000; t + cooldown < windowMs; cooldown *= 2) {
        t += cooldown;
        probes++;
      }
      const bound = BREAKER_FAILURES + (MAX_IN_FLIGHT - 1) + probes;
      console.log(
        `      503 always: ${reached} attempts reached the receiver in ${windowMs / 1000} s ` +
          `(${Math.round((reached * 60_000) / windowMs)}/min; bound ${bound}: ${BREAKER_FAILURES} failures, ` +
          `${MAX_IN_FLIGHT - 1} in flight, ${probes} probes; unpaced, 660 in ~15 s)`,
      );
      assert.ok(reached <= bound, `${reached} attempts reached the receiver in the window, bound ${bound}`);
      assert.ok(reached >= BREAKER_FAILURES, 'the breaker opened only after its failures');

      const scrape = await metrics.registry.metrics();
      assert.match(scrape, new RegExp(`flow_notify_callback_breaker_open\\{origin="${origin}"\\} 1`));
      assert.match(scrape, /flow_notify_callback_attempts_held_total\{reason="breaker_open"\} [1-9]/);
      assert.ok(
        logged.some((line) =>
          line.startsWith(`callback: breaker open for ${origin} after ${BREAKER_FAILURES}`),
        ),
        'the opening is logged',
      );
      const rows = (
        await mapBounded(episodes, 8, (id) => stores.callbackAttempts.listForEpisode(id, 20))
      ).flat();
      const held = rows.filter((row) => row.error === 'breaker_open');
      assert.ok(held.length > 0, 'the attempt log says breaker_open');
      assert.ok(held.every((row) => row.result === 'retry' && row.status === undefined));

      // The receiver comes back: the next probe closes the breaker (one line, the gauge back to 0), and the
      // episodes still on their schedule deliver.
      receiver.answerAlways({ status: 204 });
      await waitUntil(
        'the breaker to close',
        () => logged.some((line) => line.startsWith(`callback: breaker closed for ${origin}`)),
        { timeoutMs: COOLDOWN_SECONDS * 20 * 1.5 * 1000 + 30_000 },
      );
      assert.match(
        await metrics.registry.metrics(),
        new RegExp(`flow_notify_callback_breaker_open\\{origin="${origin}"\\} 0`),
      );
      const results = await mapBounded(episodes, 20, result);
      assert.ok(results.every((r) => ['delivered', 'gave_up'].includes(r.callback)));
      assert.ok(
        results.some((r) => r.callback === 'delivered'),
        'the ones left on their schedule deliver',
      );
    } finally {
      await receiver.close();
    }
  });
});

// Issue #35, item 2: the breaker is a tenant's. Team A pointing callbacks at a failing path of a receiver origin
// team B uses too opens A's breaker, not B's; and an attempt a breaker holds waits for it, it does not spend one of
// the schedule's attempts. The pacing's clock is the test's: a breaker stays open until the test moves it on.
describe('callback breaker per tenant (one worker)', function () {
  this.timeout(5 * 60_000);
  const BREAKER_FAILURES = 3;
  let stack: WorkerStack;
  let config: Config;
  let stores: Stores;
  let client: Client;
  let clock = Date.now();
  const logged: string[] = [];
  const receivers: CallbackReceiver[] = [];

  before(async () => {
    const callbackPacing = createOriginPacing({
      maxInFlight: 8,
      breakerFailures: BREAKER_FAILURES,
      cooldownMs: 1000,
      maxCooldownMs: 20_000,
      now: () => clock,
      onBreakerChange: (change) => logged.push(`${change.state} ${change.origin}`),
    });
    stack = await startWorkerStack(
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1',
        CALLBACK_TIMEOUT_SECONDS: '5',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { callbackPacing },
    );
    ({ config, stores, client } = stack);
  });
  after(async () => {
    await stack?.stop();
    for (const receiver of receivers) await receiver.close();
  });

  async function receiver(): Promise<CallbackReceiver> {
    const started = await CallbackReceiver.start();
    receivers.push(started);
    return started;
  }

  /** A run of `teamId` with a callback to `url`, completed, and its episode started; the episode's id. */
  async function endRun(teamId: string, url: string): Promise<string> {
    const caller = { userId: `${teamId}-user`, teamId };
    const runs = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    const run = await runs.create(caller, { callback: { url } });
    await runs.complete(caller, run._id, 'done');
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    });
    return (await emitter.emitRunOutcome(run._id))!.episodeId;
  }

  const attempts = (episodeId: string) => stores.callbackAttempts.listForEpisode(episodeId, 100);
  const result = (episodeId: string) =>
    client.workflow.getHandle(episodeId).result() as Promise<EpisodeResult>;

  it("one team's failing path on a shared receiver opens that team's breaker, never another team's", async () => {
    const shared = await receiver();
    const origin = originOf(shared.url)!;
    shared.answerPathAlways('/tenant-a/broken', { status: 503 });
    // Team A's callbacks go to a path of the shared host that fails: A's breaker opens.
    for (let i = 0; i < BREAKER_FAILURES; i++) await endRun('team-a', shared.urlOf('/tenant-a/broken'));
    await waitUntil('a breaker to open', () => logged.includes(`open ${origin}`), { timeoutMs: 60_000 });

    // Team B's callback to the same host, which answers B all along, goes out at its first attempt.
    const episode = await endRun('team-b', shared.url);
    await waitUntil('its first attempt', async () => (await attempts(episode)).length > 0, {
      timeoutMs: 60_000,
    });
    const [first] = await attempts(episode);
    assert.deepEqual(
      { result: first.result, status: first.status, error: first.error },
      { result: 'delivered', status: 204, error: undefined },
      "team B's first attempt went out",
    );
    assert.ok(shared.received.some((r) => r.headers['webhook-id'] === episode));
    assert.equal((await result(episode)).callback, 'delivered');
  });

  it("an attempt the breaker holds waits for it: it does not spend one of the schedule's attempts", async () => {
    const down = await receiver();
    const origin = originOf(down.url)!;
    // The team's first callbacks fail: its breaker opens (and stays open on the test's clock). Then the receiver
    // is up again.
    down.answer(...Array.from({ length: BREAKER_FAILURES }, () => ({ status: 503 })));
    for (let i = 0; i < BREAKER_FAILURES; i++) await endRun('team-c', down.url);
    await waitUntil('its breaker to open', () => logged.includes(`open ${origin}`), { timeoutMs: 60_000 });

    // A schedule of two attempts, both held while the breaker is open.
    const episode = await endRun('team-c', down.url);
    const held = async () => (await attempts(episode)).filter((row) => row.error === 'breaker_open').length;
    const closed = async () => {
      const description = await client.workflow.getHandle(episode).describe();
      return description.status.name !== 'RUNNING';
    };
    await waitUntil('two held attempts, or the episode to end', async () => (await held()) >= 2 || closed(), {
      timeoutMs: 60_000,
    });
    if (await closed())
      // RECORD_FIXTURES=1 on the code before issue #35: an episode whose held attempts spent its schedule.
      recordFixture(config, episode, 'episode-history-callback-held-spent.json');
    // The breaker's cool-down ends: the next attempt is its probe, the receiver answers, the breaker closes.
    clock += 3_600_000;
    const settled = await result(episode);
    if (settled.callback === 'delivered')
      recordFixture(config, episode, 'episode-history-callback-held-waits.json');
    assert.equal(settled.callback, 'delivered', 'the held attempts waited for the breaker');
    const rows = await attempts(episode);
    assert.ok(rows.filter((row) => row.error === 'breaker_open').length >= 2);
    assert.deepEqual(
      { result: rows.at(-1)!.result, status: rows.at(-1)!.status },
      { result: 'delivered', status: 204 },
    );
    assert.ok(
      rows.every((row) => !row.gaveUp),
      'no attempt marked as the give-up',
    );
  });
});
