// The callback family end to end: real API, worker, Temporal and FerretDB; a loopback receiver that checks the
// signature with the npm standardwebhooks library, as a launcher's endpoint would.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { Webhook } from 'standardwebhooks';
import { createActivities } from '../activities';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { emitFromRunner } from '../client/runner';
import type { Config } from '../config';
import { owedEpisode } from '../domain/sweep';
import { signWebhook } from '../delivery/callback/signature';
import { PROJECT_ROOT } from '../platform/embedded';
import { RETRY_AFTER_MAX_SECONDS } from '../platform/retryAfter';
import type { Stores } from '../store';
import type { EpisodeResult } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { waitUntil } from './support/waitUntil';
import { ApiClient, startTestApi } from './support/harness';
import { testStack } from './support/stack';

describe('Standard Webhooks signing', () => {
  it('signs the specification’s vector to its expected signature', () => {
    const vector = JSON.parse(
      readFileSync(path.resolve(PROJECT_ROOT, '../shared/vectors/standard-webhooks.json'), 'utf8'),
    ) as { secret: string; id: string; timestamp: number; body: string; signature: string };
    const headers = signWebhook(vector.secret, vector.id, vector.timestamp, vector.body);
    assert.equal(headers['webhook-signature'], vector.signature);
    assert.equal(headers['webhook-id'], vector.id);
    assert.equal(headers['webhook-timestamp'], String(vector.timestamp));
  });
});

/** While set, the worker's next read of a run by its team takes this long (a store slow under load). */
let slowRunReadMs = 0;

async function family(overrides: Record<string, string>) {
  const logged: string[] = [];
  const stack = await startFamilyStack(
    { CALLBACK_RETRY_SECONDS: '1,1,1,1', SWEEP_INTERVAL_SECONDS: '3600', ...overrides },
    {
      workerLog: (line) => logged.push(line),
      workerStores: (stores) => ({
        ...stores,
        runs: {
          ...stores.runs,
          getForTeam: async (...args) => {
            const delay = slowRunReadMs;
            slowRunReadMs = 0;
            if (delay) await new Promise((resolve) => setTimeout(resolve, delay));
            return stores.runs.getForTeam(...args);
          },
        },
      }),
    },
  );
  return { ...stack, alice: stack.anonymous.as('alice', 'acme'), logged };
}

describe('callback family', function () {
  let receiver: CallbackReceiver;
  let other: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    receiver = await CallbackReceiver.start();
    other = await CallbackReceiver.start();
    const f = await family({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_TIMEOUT_SECONDS: '1',
      CALLBACK_TEST_RATE_LIMIT: '3',
    });
    stack = f;
    ({ config, stores, alice, client } = f);
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
    await other?.close();
  });
  beforeEach(() => {
    receiver.received.length = 0;
    other.received.length = 0;
    receiver.answerAlways({ status: 204 });
  });

  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  async function launch(url = receiver.url): Promise<{ id: string; secret: string }> {
    const res = await alice.post('/api/v1/runs', { title: 'Nightly import', callback: { url } });
    assert.equal(res.status, 201, res.text);
    return { id: res.body.id, secret: res.body.callback.secret };
  }

  function verify(secret: string, received: { headers: Record<string, unknown>; body: string }) {
    return new Webhook(secret).verify(received.body, received.headers as Record<string, string>);
  }

  it('a finished run calls back once, signed so a standard receiver verifies it, with the contract body', async () => {
    const { id, secret } = await launch();
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'Imported 1,204 rows.' });
    assert.equal((await episodeResult(`${id}:end`)).callback, 'delivered');
    assert.equal(receiver.received.length, 1);
    const [call] = receiver.received;
    const body = verify(secret, call) as Record<string, unknown>;
    const run = (await stores.runs.getById(id))!;
    assert.deepEqual(body, {
      version: '1',
      type: 'run.finished',
      episodeId: `${id}:end`,
      run: {
        id,
        status: 'finished',
        finalAnswer: 'Imported 1,204 rows.',
        error: null,
        createdAt: run.createdAt.toISOString(),
        endedAt: run.endedAt!.toISOString(),
      },
    });
    assert.equal(call.headers['webhook-id'], `${id}:end`);
    assert.equal(call.headers['content-type'], 'application/json');
    assert.equal(await stores.claims.state(`cb|${id}:end`), 'delivered');
    // A replayed episode does not call back twice.
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    });
    const { startEpisode } = await import('../client/emitter');
    const { buildRunOutcome } = await import('../domain/outcome');
    await startEpisode(
      client,
      config.temporalTaskQueue,
      buildRunOutcome(run)!,
      { callbackRetrySeconds: [1] },
      'ALLOW_DUPLICATE',
    );
    assert.equal((await episodeResult(`${id}:end`)).callback, 'claimed_elsewhere');
    await emitter.emitRunOutcome(id);
    assert.equal(receiver.received.length, 1);
  });

  it('an attempt whose run read outlasted its start-to-close sends nothing: the next attempt sends it, once', async function () {
    this.timeout(120_000);
    const { id, secret } = await launch();
    // The attempt's start-to-close is CALLBACK_TIMEOUT_SECONDS + 20 s: Temporal starts its retry while the read
    // still runs, and both would POST.
    slowRunReadMs = 25_000;
    assert.equal((await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'ok' })).status, 200);
    const result = await episodeResult(`${id}:end`);
    assert.equal(result.callback, 'delivered');
    // The late attempt goes on after the episode: it either POSTs again or logs itself held back.
    await waitUntil(
      'the late attempt sent or held',
      async () =>
        receiver.received.length > 1 ||
        (await stores.callbackAttempts.listForEpisode(`${id}:end`, 10)).some((row) => row.error === 'paced'),
      { timeoutMs: 60_000 },
    );
    assert.equal(receiver.received.length, 1, 'POSTs of the callback');
    verify(secret, receiver.received[0]);
  });

  it('paused runs get no callback; the resume that finishes it does', async () => {
    const { id } = await launch();
    const paused = await alice.post(`/api/v1/runs/${id}/pause`, { prompt: 'ok?' });
    const pauseEpisode = `${id}:input:${paused.body.interactionId}`;
    assert.equal((await episodeResult(pauseEpisode)).callback, 'not_owed');
    await alice.post(`/api/v1/runs/${id}/interactions/${paused.body.interactionId}/answer`, {
      answer: 'yes',
    });
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });
    assert.equal((await episodeResult(`${id}:end`)).callback, 'delivered');
    assert.equal(receiver.received.length, 1);
    assert.equal(JSON.parse(receiver.received[0].body).type, 'run.finished');
  });

  it('failed and cancelled runs get theirs', async () => {
    const failed = await launch();
    await alice.post(`/api/v1/runs/${failed.id}/fail`, { error: { code: 'oom', message: 'Out of memory' } });
    const cancelled = await launch();
    await alice.post(`/api/v1/runs/${cancelled.id}/cancel`);
    await episodeResult(`${failed.id}:end`);
    await episodeResult(`${cancelled.id}:end`);
    const bodies = receiver.received.map((r) => JSON.parse(r.body));
    const byRun = new Map(bodies.map((b) => [b.run.id, b]));
    assert.equal(byRun.get(failed.id).type, 'run.failed');
    assert.deepEqual(byRun.get(failed.id).run.error, { code: 'oom', message: 'Out of memory' });
    assert.equal(byRun.get(cancelled.id).type, 'run.cancelled');
  });

  it('500 twice then 200: one success, the same webhook-id on all three attempts, each signed for its own time', async () => {
    receiver.answer({ status: 500 }, { status: 503, headers: { 'retry-after': '1' } });
    const { id, secret } = await launch();
    await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'x' });
    assert.equal((await episodeResult(`${id}:end`)).callback, 'delivered');
    assert.equal(receiver.received.length, 3);
    assert.deepEqual(
      receiver.received.map((r) => r.headers['webhook-id']),
      [`${id}:end`, `${id}:end`, `${id}:end`],
    );
    const stamps = receiver.received.map((r) => Number(r.headers['webhook-timestamp']));
    assert.ok(stamps[0] < stamps[2], 'fresh timestamp per attempt');
    for (const call of receiver.received) verify(secret, call); // throws if any signature is wrong
  });

  it("a receiver's Retry-After past any wait we keep is recorded at a bound, not as an infinite number the store refuses", async () => {
    const hundredYears = String(100 * 365 * 86_400);
    for (const retryAfter of ['9'.repeat(400), hundredYears]) {
      receiver.answerAlways({ status: 503, headers: { 'retry-after': retryAfter } });
      const { id } = await launch();
      await alice.post(`/api/v1/runs/${id}/cancel`);
      const [row] = await waitUntil('the attempt recorded', async () => {
        const rows = await stores.callbackAttempts.listForEpisode(`${id}:end`, 10);
        return rows.length ? rows : undefined;
      });
      assert.equal(row.status, 503);
      assert.equal(row.retryAfterSeconds, RETRY_AFTER_MAX_SECONDS, JSON.stringify(row));
      // Its next attempt is an hour away: this run's episode is not waited for.
      await client.workflow.getHandle(`${id}:end`).terminate('the test is done with it');
    }
  });

  it('a slow receiver hits the timeout and is retried', async () => {
    receiver.answer({ status: 200, delayMs: 3000 });
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    assert.equal((await episodeResult(`${id}:end`)).callback, 'delivered');
    assert.equal(receiver.received.length, 2);
  });

  it('what the owner is told of a callback that never got through is a category: timeout, http 503', async () => {
    // Two runs side by side, one per receiver: each schedule runs its five attempts to the end.
    receiver.answerAlways({ status: 200, delayMs: 3000 });
    other.answerAlways({ status: 503 });
    try {
      const slow = await launch();
      const down = await launch(other.url);
      await alice.post(`/api/v1/runs/${slow.id}/cancel`);
      await alice.post(`/api/v1/runs/${down.id}/cancel`);
      const [slowResult, downResult] = await Promise.all([
        episodeResult(`${slow.id}:end`),
        episodeResult(`${down.id}:end`),
      ]);
      assert.equal(slowResult.callback, 'gave_up');
      assert.equal((await stores.claims.describe(`cb|${slow.id}:end`)).result, 'gave_up: timeout');
      assert.equal(downResult.callback, 'gave_up');
      assert.equal((await stores.claims.describe(`cb|${down.id}:end`)).result, 'gave_up: http 503');
    } finally {
      other.answerAlways({ status: 204 });
    }
  });

  it('a 307 to another loopback receiver is not followed', async () => {
    receiver.answerAlways({ status: 307, headers: { location: other.url } });
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    assert.equal((await episodeResult(`${id}:end`)).callback, 'gave_up');
    assert.equal(other.received.length, 0);
    assert.equal(receiver.received.length, 5, 'a 3xx is a failed attempt: five attempts, then it gives up');
    const claim = await stores.claims.describe(`cb|${id}:end`);
    assert.equal(claim.state, 'delivered');
    assert.equal(claim.result, 'gave_up: http 307');
  });

  it('an attempt after a wait whose claim another holder took (stale in a backed-up queue) sends nothing: it says so', async () => {
    // A run ended without telling anyone: the test plays the schedule's second attempt by hand.
    const { createRunsService } = await import('../runs/service');
    const silent = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    const run = await silent.create({ userId: 'alice', teamId: 'acme' }, { callback: { url: receiver.url } });
    await silent.complete({ userId: 'alice', teamId: 'acme' }, run._id, 'done');
    const episodeId = `${run._id}:end`;
    const key = `cb|${episodeId}`;
    // The schedule's claim went stale and a recover took it over.
    assert.ok(await stores.claims.tryMark(key, 'recover|acme'));
    const activities = createActivities({ config, stores, client, log: () => undefined });
    const attempt = await activities.sendCallback(
      episodeId,
      run._id,
      { attempt: 2, trigger: 'episode', claim: { key, holder: `episode|${episodeId}/gone` } },
      'acme',
    );
    assert.deepEqual(attempt, { result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true });
    assert.equal(receiver.received.length, 0, 'nothing sent');
  });

  it('a first attempt taken up late (past half the grace) whose claim another holder took sends nothing; a prompt one is not held up', async () => {
    const { createRunsService } = await import('../runs/service');
    const silent = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    // The claims as the attempts see them, each renew counted: a prompt first attempt asks the store nothing.
    let renewed = 0;
    const claims = {
      ...stores.claims,
      renew: (...args: Parameters<typeof stores.claims.renew>) => (renewed++, stores.claims.renew(...args)),
    };
    const activities = createActivities({
      config,
      stores: { ...stores, claims },
      client,
      log: () => undefined,
    });
    const graceMs = config.claimGraceSeconds * 1000;
    const ended = async () => {
      const run = await silent.create(
        { userId: 'alice', teamId: 'acme' },
        { callback: { url: receiver.url } },
      );
      await silent.complete({ userId: 'alice', teamId: 'acme' }, run._id, 'done');
      return { runId: run._id, episodeId: `${run._id}:end`, key: `cb|${run._id}:end` };
    };
    // Claimed by the episode a grace ago; it went stale in the queue and a recover took it over.
    const late = await ended();
    assert.ok(await stores.claims.tryMark(late.key, 'recover|acme'));
    const heldSince = Date.now() - graceMs;
    const lateAttempt = await activities.sendCallback(
      late.episodeId,
      late.runId,
      {
        attempt: 1,
        trigger: 'episode',
        claim: { key: late.key, holder: `episode|${late.episodeId}/a`, heldSince },
      },
      'acme',
    );
    assert.deepEqual(lateAttempt, { result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true });
    assert.equal(receiver.received.length, 0, 'nothing sent');
    assert.equal(renewed, 1, 'held again before the request');
    // Claimed a moment ago: it cannot have gone stale, and goes without asking the store.
    const prompt = await ended();
    const holder = `episode|${prompt.episodeId}/a`;
    assert.ok(await stores.claims.tryMark(prompt.key, holder));
    const promptAttempt = await activities.sendCallback(
      prompt.episodeId,
      prompt.runId,
      { attempt: 1, trigger: 'episode', claim: { key: prompt.key, holder, heldSince: Date.now() } },
      'acme',
    );
    assert.equal(promptAttempt.result, 'delivered');
    assert.equal(receiver.received.length, 1);
    assert.equal(renewed, 1, 'the prompt attempt did not ask the store');
  });

  it('a 4xx other than 408/429 stops at once', async () => {
    receiver.answerAlways({ status: 410 });
    const { id } = await launch();
    await alice.post(`/api/v1/runs/${id}/cancel`);
    assert.equal((await episodeResult(`${id}:end`)).callback, 'gave_up');
    assert.equal(receiver.received.length, 1);
  });

  it('callback.events: an end filtered out owes no callback, and the sweep agrees; a wanted end calls back', async () => {
    const launched = await alice.post('/api/v1/runs', {
      callback: { url: receiver.url, events: ['run.failed'] },
    });
    assert.equal(launched.status, 201, launched.text);
    assert.deepEqual(launched.body.callback.events, ['run.failed']);
    const finished = launched.body.id as string;
    await alice.post(`/api/v1/runs/${finished}/complete`, { finalAnswer: 'done' });
    assert.equal((await episodeResult(`${finished}:end`)).callback, 'not_owed');
    assert.equal(await stores.claims.state(`cb|${finished}:end`), 'absent');
    // What the sweep lists for the run owes no callback either: nothing to replay.
    const since = new Date(Date.now() - 60_000);
    const refs = [];
    for await (const page of stores.runs.listNotifiableRefs(since, 1000)) refs.push(...page);
    const ref = refs.find((r) => r._id === finished);
    assert.ok(ref, 'the finished run is in the sweep window');
    assert.ok(!owedEpisode(ref, { ops: true })?.keys.includes(`cb|${finished}:end`));

    const failed = (
      await alice.post('/api/v1/runs', { callback: { url: receiver.url, events: ['run.failed'] } })
    ).body.id as string;
    await alice.post(`/api/v1/runs/${failed}/fail`, { error: { code: 'x', message: 'y' } });
    assert.equal((await episodeResult(`${failed}:end`)).callback, 'delivered');
    assert.deepEqual(
      receiver.received.map((r) => JSON.parse(r.body).type),
      ['run.failed'],
    );
  });

  it('launch refuses callback events that are empty, unknown or repeated', async () => {
    for (const events of [[], ['run.paused'], ['run.failed', 'run.failed'], 'run.failed']) {
      const res = await alice.post('/api/v1/runs', { callback: { url: receiver.url, events } });
      assert.equal(res.status, 400, JSON.stringify(events));
      assert.match(res.body.error, /^invalid request: callback\.events/);
    }
  });

  it("the test ping: one signed run.test event with its own webhook-id; answers the receiver's status", async () => {
    const { id, secret } = await launch();
    const ok = await alice.post(`/api/v1/runs/${id}/callback/test`);
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { delivered: true, status: 204 });
    assert.equal(receiver.received.length, 1);
    const [ping] = receiver.received;
    assert.deepEqual(verify(secret, ping), {
      version: '1',
      type: 'run.test',
      run: { id, status: 'running' },
    });
    assert.match(String(ping.headers['webhook-id']), new RegExp(`^${id}:test:`));

    receiver.answer({ status: 500 });
    const failing = await alice.post(`/api/v1/runs/${id}/callback/test`);
    assert.deepEqual(failing.body, { delivered: false, status: 500, category: 'http 500' });
    assert.notEqual(
      receiver.received[1].headers['webhook-id'],
      ping.headers['webhook-id'],
      'each ping its own id',
    );

    const plain = (await alice.post('/api/v1/runs', {})).body.id as string;
    const none = await alice.post(`/api/v1/runs/${plain}/callback/test`);
    assert.equal(none.status, 409);
    assert.equal(none.body.error, 'the run has no callback URL');
    const stranger = await alice.as('eve', 'other').post(`/api/v1/runs/${id}/callback/test`);
    assert.equal(stranger.status, 404);
    assert.equal(receiver.received.length, 2, 'nothing more was sent');
    // Three pings per run per window here (CALLBACK_TEST_RATE_LIMIT): the fourth is refused and sends nothing.
    assert.equal((await alice.post(`/api/v1/runs/${id}/callback/test`)).status, 200);
    const limited = await alice.post(`/api/v1/runs/${id}/callback/test`);
    assert.equal(limited.status, 429);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal(receiver.received.length, 3);
  });

  it('launch refuses a malformed callback URL with the reason', async () => {
    const res = await alice.post('/api/v1/runs', { callback: { url: 'gopher://example.com/x' } });
    assert.equal(res.status, 400);
    assert.match(res.body.error, /callback url must be an absolute http\(s\) URL/);
  });

  describe('the runner emitter', () => {
    it('a non-final disposition emits nothing; a final one starts the workflow the API would', async () => {
      const emitter = createOutcomeEmitter({
        client,
        taskQueue: config.temporalTaskQueue,
        runs: stores.runs,
        options: episodeOptions(config),
      });
      // A run the API never emits for: its outcome is the runner's to report.
      const { createRunsService } = await import('../runs/service');
      const silent = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
      const run = await silent.create(
        { userId: 'alice', teamId: 'acme' },
        { callback: { url: receiver.url } },
      );
      await silent.complete({ userId: 'alice', teamId: 'acme' }, run._id, 'from a runner pod');

      assert.deepEqual(
        await emitFromRunner(emitter, { runId: run._id, teamId: 'acme', disposition: 'retry' }),
        {
          emitted: false,
          reason: 'disposition retry is not final',
        },
      );
      const wrongTenant = await emitFromRunner(emitter, {
        runId: run._id,
        teamId: 'evil',
        disposition: 'ack',
      });
      assert.equal(wrongTenant.emitted, false);

      const env = {
        PATH: process.env.PATH ?? '',
        FLOW_NOTIFY_FROM_SOURCE: '1', // the code as it is, not an earlier build's dist/
        MONGO_URL: config.mongoUrl,
        MONGO_DB: config.mongoDb,
        TEMPORAL_ADDRESS: testStack().temporalAddress,
        TEMPORAL_TASK_QUEUE: config.temporalTaskQueue,
      };
      const cli = (disposition: string) =>
        spawnSync(
          path.join(PROJECT_ROOT, 'bin/flow-notify'),
          ['emit', '--run', run._id, '--team', 'acme', '--disposition', disposition],
          {
            env,
            encoding: 'utf8',
            timeout: 30_000,
          },
        );
      const notFinal = cli('requeue');
      assert.equal(notFinal.status, 0, notFinal.stderr);
      assert.equal(JSON.parse(notFinal.stdout).emitted, false);

      const endedAt = (await stores.runs.getById(run._id))!.endedAt!.toISOString();
      const final = cli('ack');
      assert.equal(final.status, 0, final.stderr);
      assert.deepEqual(JSON.parse(final.stdout), {
        emitted: true,
        episodeId: `${run._id}:end`,
        kind: 'run_finished',
        occurredAt: endedAt,
        started: true,
      });
      // The runner's view of the end reached the run's health workflow too.
      const health = await client.workflow.getHandle(`health:${run._id}`).describe();
      assert.ok(health.runId);
      assert.equal((await episodeResult(`${run._id}:end`)).callback, 'delivered');

      // The API process emitting the same episode now is a no-op: one workflow.
      assert.deepEqual(await emitter.emitRunOutcome(run._id), {
        episodeId: `${run._id}:end`,
        kind: 'run_finished',
        occurredAt: endedAt,
        started: false,
      });
      assert.equal(cli('bogus').status, 2);
    });
  });
});

describe('callback family in strict mode', () => {
  it('refuses the same loopback receiver: nothing is sent, and the episode settles as refused', async () => {
    const receiver = await CallbackReceiver.start();
    const f = await family({});
    try {
      const res = await f.alice.post('/api/v1/runs', { callback: { url: receiver.url } });
      await f.alice.post(`/api/v1/runs/${res.body.id}/cancel`);
      const result = (await f.client.workflow.getHandle(`${res.body.id}:end`).result()) as EpisodeResult;
      assert.equal(result.callback, 'gave_up');
      assert.equal(receiver.received.length, 0);
      const claim = await f.stores.claims.describe(`cb|${res.body.id}:end`);
      // Users see the category; the address behind the name is for operator logs only.
      assert.equal(claim.result, 'gave_up: refused: private address');
      assert.ok(
        f.logged.some((line) => /private or reserved address \(127\.0\.0\.1\)/.test(line)),
        f.logged.join('\n'),
      );
      // The test ping goes through the same guard: the user sees the category, never the address.
      const launched = await f.alice.post('/api/v1/runs', { callback: { url: receiver.url } });
      const ping = await f.alice.post(`/api/v1/runs/${launched.body.id}/callback/test`);
      assert.deepEqual(ping.body, { delivered: false, category: 'refused: private address' });
      assert.equal(receiver.received.length, 0);
    } finally {
      await f.stop();
      await receiver.close();
    }
  });
});

describe('callback family across a change of CALLBACK_TIMEOUT_SECONDS', () => {
  it('an episode started under a shorter timeout is still delivered by a worker given a longer one', async function () {
    this.timeout(120_000);
    const receiver = await CallbackReceiver.start();
    // The worker (and this stack's API) at 25 s; an API still at 1 s starts the episode, its attempts' start-to-close
    // made for that (21 s): too short for the worker's whole timeout and what follows the request.
    const f = await family({ CALLBACK_ALLOW_PRIVATE: '1', CALLBACK_TIMEOUT_SECONDS: '25' });
    const lagging = await startTestApi({ ...f.config, callbackTimeoutSeconds: 1 });
    try {
      const alice = lagging.client.as('alice', 'acme');
      const res = await alice.post('/api/v1/runs', { callback: { url: receiver.url } });
      assert.equal(res.status, 201, res.text);
      assert.equal(
        (await alice.post(`/api/v1/runs/${res.body.id}/complete`, { finalAnswer: 'ok' })).status,
        200,
      );
      const [delivered] = await receiver.waitFor(1, 30_000);
      assert.equal(delivered.headers['webhook-id'], `${res.body.id}:end`);
      const result = (await f.client.workflow.getHandle(`${res.body.id}:end`).result()) as EpisodeResult;
      assert.equal(result.callback, 'delivered');
    } finally {
      await lagging.api.close();
      await f.stop();
      await receiver.close();
    }
  });
});
