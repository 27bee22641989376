// Metrics and logs of real processes: a worker (worker.ts, WORKER_METRICS_PORT) and an API (api/server.ts), both
// at LOG_LEVEL=debug in JSON, drive one episode of each family (a push, a signed callback, an operator alert),
// a callback that gives up, and a sweep pass that starts an episode whose emit was lost. Both /metrics endpoints
// are scraped before and after and every counter must have moved by exactly what happened; then every line both
// processes wrote is searched for the secrets they handled.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import webpush from 'web-push';
import { sweepScheduleId } from '../client/schedules';
import { loadConfig } from '../config';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import { mintToken } from '../api/auth';
import { CallbackReceiver } from './support/callbackReceiver';
import { JwksServer } from './support/jwksServer';
import { ApiClient, startTestApi, temporalClient } from './support/harness';
import { terminate } from './support/processes';
import { deleteSweepScheduleOf, processStackVars } from './support/processStack';
import { startPushService, type PushService } from './support/pushService';
import { TEST_JWT_SECRET, testConfig, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';
import { Registry } from 'prom-client';
import { createMetrics } from '../platform/metrics';
import { createClaimStore } from '../store/claims';
import { connectMongo } from '../store/mongo';
import { createStores } from '../store';
import { createRunsService } from '../runs/service';
import type { OutcomeEmitter } from '../client/emitter';

/** `name{labels} value` lines of a Prometheus text answer, keyed by `name{labels}` as written. */
export function parseMetrics(text: string): Map<string, number> {
  const series = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const at = line.lastIndexOf(' ');
    series.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return series;
}

async function scrape(url: string): Promise<{ text: string; series: Map<string, number> }> {
  const res = await fetch(url);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, series: parseMetrics(text) };
}

/** A child process whose every output line is kept (a secret must not hide in a line a tail dropped). */
async function startApiProcess(
  env: Record<string, string>,
  lines: string[],
): Promise<{ child: ChildProcess }> {
  const child = spawn(process.execPath, ['-r', 'ts-node/register', 'api/server.ts'], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let pending = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`api not ready:\n${lines.join('\n')}`)), 60_000);
    const onData = (chunk: Buffer): void => {
      pending += chunk.toString('utf8');
      const parts = pending.split('\n');
      pending = parts.pop() ?? '';
      lines.push(...parts);
      if (parts.some((line) => line.includes('flow-notify api: listening'))) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`api exited (${code}):\n${lines.join('\n')}`)));
  });
  return { child };
}

const OPS_QUERY_TOKEN = 'ops-query-token-0123456789abcdef';
const CALLBACK_QUERY_TOKEN = 'callback-query-token-0123456789abcdef';
const JWKS_QUERY_TOKEN = 'jwks-query-token-0123456789abcdef';
const AUDIENCE = 'flow-notify';

describe('observability: /metrics on the API and the worker, structured logs without secrets', function () {
  this.timeout(180_000);
  let push: PushService;
  let callbacks: CallbackReceiver;
  let opsHook: CallbackReceiver;
  let worker: WorkerProcess | undefined;
  let api: { child: ChildProcess } | undefined;
  let vars: Record<string, string>;
  const workerLines: string[] = [];
  const apiLines: string[] = [];
  let apiUrl: string;
  let workerMetricsUrl: string;
  let apiMetricsUrl: string;
  let idp: JwksServer;

  before(async () => {
    push = await startPushService();
    // An identity provider that is down: the API logs why it has no keys, naming the key set's URL.
    idp = await JwksServer.start();
    await idp.addKey('rsa-1', 'RS256');
    idp.failWith = 500;
    callbacks = await CallbackReceiver.start();
    opsHook = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    const metricsPort = await freePort();
    vars = processStackVars(
      { db: 't_obs', queue: 'obs' },
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1',
        // A token in the operator webhook's query string (as chat webhooks carry one): never logged.
        OPS_ALERT_WEBHOOK_URL: `${opsHook.url}?token=${OPS_QUERY_TOKEN}`,
        SWEEP_INTERVAL_SECONDS: '3600',
        PORT: String(await freePort()),
        // The API's metrics on their own loopback port (the API port answers 404 for /metrics).
        METRICS_PORT: String(await freePort()),
        // A token in the key set URL's query string: never logged.
        AUTH_JWKS_URL: `${idp.url}?token=${JWKS_QUERY_TOKEN}`,
        AUTH_ISSUER: idp.issuer,
        AUTH_AUDIENCE: AUDIENCE,
        LOG_LEVEL: 'debug',
        LOG_FORMAT: 'json',
      },
    );
    apiUrl = `http://127.0.0.1:${vars.PORT}`;
    apiMetricsUrl = `http://127.0.0.1:${vars.METRICS_PORT}/metrics`;
    workerMetricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    worker = await WorkerProcess.start({
      vars: { ...vars, WORKER_METRICS_PORT: String(metricsPort) },
      trustCa: push.ca,
      log: (line) => workerLines.push(line),
    });
    api = await startApiProcess(childProcessEnv(vars), apiLines);
  });

  after(async () => {
    if (api) await terminate(api.child);
    await worker?.stop();
    if (vars) await deleteSweepScheduleOf(loadConfig(vars));
    await push?.close();
    await idp?.stop();
    await callbacks?.close();
    await opsHook?.close();
  });

  /** Scrapes until `done` holds (the activity returns just after the outside party saw its request). */
  async function scrapeUntil(
    url: string,
    done: (series: Map<string, number>) => boolean,
  ): Promise<Map<string, number>> {
    let series = new Map<string, number>();
    return waitUntil(
      `the expected counts scraped from ${url}`,
      async () => {
        ({ series } = await scrape(url));
        return done(series) && series;
      },
      { timeoutMs: 60_000, intervalMs: 200, seen: () => series },
    );
  }

  const secrets: Record<string, string> = {};

  it('counts one episode of each family, a callback given up and a sweep pass that starts a lost episode, exactly', async () => {
    // The schedule's hourly interval falls on the hour (intervals count from the epoch): a run crossing it saw a
    // second pass. Only the pass this test triggers may run, so the schedule gets a time that never comes, and
    // whatever it started before has ended when the counts are read.
    const schedules = await temporalClient(loadConfig(vars));
    try {
      const schedule = schedules.client.schedule.getHandle(sweepScheduleId(vars.TEMPORAL_TASK_QUEUE));
      await schedule.update((previous) => ({ ...previous, spec: { calendars: [{ year: 2099 }] } }));
      await waitUntil(
        'no scheduled sweep pass running',
        async () => !(await schedule.describe()).info.runningActions.length,
      );
    } finally {
      await schedules.close();
    }
    const before = {
      api: (await scrape(apiMetricsUrl)).series,
      worker: (await scrape(workerMetricsUrl)).series,
    };
    const delta = (now: Map<string, number>, was: Map<string, number>, key: string): number =>
      (now.get(key) ?? 0) - (was.get(key) ?? 0);

    const alice = new ApiClient(
      apiUrl,
      mintToken(TEST_JWT_SECRET, 'alice', 'acme', '1d', { issuer: idp.issuer, audience: AUDIENCE }),
    );
    secrets.jwt = (await alice.token)!;
    secrets.jwtSecret = TEST_JWT_SECRET;
    secrets.vapidPrivateKey = vars.VAPID_PRIVATE_KEY;
    // The provider's keys cannot be had: 503, and the operator's log says why.
    const idpToken = await idp.sign('rsa-1', { sub: 'erin', team: 'acme' }, AUDIENCE);
    secrets.idpToken = idpToken;
    secrets.jwksQueryToken = JWKS_QUERY_TOKEN;
    assert.equal((await new ApiClient(apiUrl, idpToken).get('/api/v1/runs')).status, 503);
    // Credentials in headers and the query string that no route reads (a route without query parameters: the
    // paged listings refuse unknown ones).
    secrets.cookie = 'session-cookie-0123456789abcdef';
    secrets.apiKey = 'x-api-key-0123456789abcdef';
    secrets.accessToken = 'query-access-token-0123456789abcdef';
    const withHeaders = await alice.request(
      'GET',
      `/api/v1/notifications/prefs?access_token=${secrets.accessToken}`,
      undefined,
      {
        cookie: `session=${secrets.cookie}`,
        'x-api-key': secrets.apiKey,
      },
    );
    assert.equal(withHeaders.status, 200, withHeaders.text);
    const sub = push.endpoint('alice-laptop');
    secrets.p256dh = sub.keys.p256dh;
    secrets.auth = sub.keys.auth;
    assert.equal((await alice.post('/api/v1/notifications/push/subscriptions', sub)).status, 201);

    // The push family: a run asks a human.
    const asking = await alice.post('/api/v1/runs', { title: 'Needs a human' });
    assert.equal(asking.status, 201, asking.text);
    assert.equal(
      (await alice.post(`/api/v1/runs/${asking.body.id}/pause`, { prompt: 'Ship it?' })).status,
      200,
    );
    await push.waitFor(1, sub, 30_000);

    // Callback, operator alert (and a push): a run with a callback fails.
    const secret = `whsec_${Buffer.from('a-callback-secret-of-32-bytes!!!').toString('base64')}`;
    secrets.callbackSecret = secret;
    const failing = await alice.post('/api/v1/runs', {
      title: 'Doomed',
      callback: { url: callbacks.url, secret },
    });
    assert.equal(failing.status, 201, failing.text);
    assert.equal(
      (await alice.post(`/api/v1/runs/${failing.body.id}/fail`, { error: { code: 'E', message: 'boom' } }))
        .status,
      200,
    );
    await callbacks.waitFor(1, 30_000);
    await opsHook.waitFor(1, 30_000);
    await push.waitFor(2, sub, 30_000);

    // A callback the receiver refuses (400): one attempt, given up; the run completes (a push, no alert).
    callbacks.answerAlways({ status: 400 });
    secrets.opsQueryToken = OPS_QUERY_TOKEN;
    secrets.callbackQueryToken = CALLBACK_QUERY_TOKEN;
    const refused = await alice.post('/api/v1/runs', {
      title: 'Refused',
      callback: { url: `${callbacks.url}?token=${CALLBACK_QUERY_TOKEN}`, secret },
    });
    assert.equal(refused.status, 201, refused.text);
    assert.equal(
      (await alice.post(`/api/v1/runs/${refused.body.id}/complete`, { finalAnswer: 'done' })).status,
      200,
    );
    await callbacks.waitFor(2, 30_000);
    await push.waitFor(3, sub, 30_000);
    secrets.vapidJwt = push.received(sub)[0].jwt;

    // A run whose emit was lost (an engine whose emitter does nothing: the API died after the write): the sweep
    // owes it and starts its episode; it lists the four runs.
    const mongo = await connectMongo(vars.MONGO_URL, vars.MONGO_DB);
    try {
      const stores = createStores(mongo.db, { claimGraceSeconds: 300 });
      const lostEmit = { emitRunOutcome: async () => undefined } as unknown as OutcomeEmitter;
      const engine = createRunsService({ ...stores, emitter: lostEmit });
      const lost = await engine.create({ userId: 'alice', teamId: 'acme' }, { title: 'Lost emit' });
      await engine.complete({ userId: 'alice', teamId: 'acme' }, lost._id, 'done');
    } finally {
      await mongo.client.close();
    }
    const { client, close } = await temporalClient(loadConfig(vars));
    try {
      await client.schedule.getHandle(sweepScheduleId(vars.TEMPORAL_TASK_QUEUE)).trigger();
    } finally {
      await close();
    }
    await push.waitFor(4, sub, 30_000);

    const expectedWorker: Record<string, number> = {
      'flow_notify_push_sends_total{result="delivered"}': 4,
      'flow_notify_outcome_to_first_push_seconds_count{kind="run_paused"}': 1,
      'flow_notify_outcome_to_first_push_seconds_count{kind="run_failed"}': 1,
      'flow_notify_outcome_to_first_push_seconds_count{kind="run_finished"}': 2,
      'flow_notify_callback_attempts_total{result="delivered",status_class="2xx"}': 1,
      'flow_notify_callback_attempts_total{result="stop",status_class="4xx"}': 1,
      'flow_notify_callback_attempt_duration_seconds_count{result="delivered"}': 1,
      'flow_notify_callback_attempt_duration_seconds_count{result="stop"}': 1,
      flow_notify_callbacks_given_up_total: 1,
      'flow_notify_operator_alerts_total{kind="run_failed",result="sent"}': 1,
      // The refused callback gave up: the operator hears of it.
      'flow_notify_operator_alerts_total{kind="callback_exhausted",result="sent"}': 1,
      flow_notify_sweep_pass_seconds_count: 1,
      flow_notify_sweep_runs_listed_total: 4,
      flow_notify_sweep_episodes_owed_total: 1,
      flow_notify_sweep_episodes_started_total: 1,
      'flow_notify_episodes_started_total{emitter="sweep",kind="run_finished"}': 1,
      flow_notify_push_prunes_total: 0,
    };
    const expectedApi: Record<string, number> = {
      'flow_notify_episodes_started_total{emitter="api",kind="run_paused"}': 1,
      'flow_notify_episodes_started_total{emitter="api",kind="run_failed"}': 1,
      'flow_notify_episodes_started_total{emitter="api",kind="run_finished"}': 1,
    };
    const reached = (now: Map<string, number>, was: Map<string, number>, expected: Record<string, number>) =>
      Object.entries(expected).every(([key, value]) => delta(now, was, key) >= value);
    await scrapeUntil(workerMetricsUrl, (s) => reached(s, before.worker, expectedWorker));
    await scrapeUntil(apiMetricsUrl, (s) => reached(s, before.api, expectedApi));
    // Settled: a moment more must not move them past what happened.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const after = { api: (await scrape(apiMetricsUrl)).series, worker: await scrape(workerMetricsUrl) };
    const moved = (now: Map<string, number>, was: Map<string, number>, expected: Record<string, number>) =>
      Object.fromEntries(Object.keys(expected).map((key) => [key, delta(now, was, key)]));
    assert.deepEqual(moved(after.worker.series, before.worker, expectedWorker), expectedWorker);
    assert.deepEqual(moved(after.api, before.api, expectedApi), expectedApi);
    // Nothing else was started, anywhere: no other kind, no sweep start, no takeover, no other send result.
    for (const [key, value] of after.worker.series) {
      if (/^flow_notify_(push_sends|claim_takeovers|episodes_started|operator_alerts)_total/.test(key))
        assert.equal(value - (before.worker.get(key) ?? 0), expectedWorker[key] ?? 0, key);
    }
    // The Temporal SDK's own metrics, from the same endpoint.
    assert.match(after.worker.text, /^temporal_\w+/m);
    // Not on the API port: no METRICS_TOKEN was given.
    assert.equal((await fetch(`${apiUrl}/metrics`)).status, 404);
  });

  it('writes one JSON line per event, with run, episode, family and workflow where known, and no secret', () => {
    assert.equal(Object.keys(secrets).length, 14, 'the episodes ran and the secrets were gathered');
    const all = [...workerLines, ...apiLines];
    const entries = all.map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>;
      } catch {
        assert.fail(`not a JSON line: ${line}`);
      }
    });
    assert.ok(entries.some((e) => e.level === 'debug' && e.name === 'api' && e.msg === 'request'));
    // The SDK's own lines come through the same logger, with the Flow run and episode of an episode workflow.
    assert.ok(
      entries.some(
        (e) =>
          e.component === 'temporal' && e.family === 'callback' && typeof e.episodeId === 'string' && e.runId,
      ),
      'an SDK line about a callback activity names its run, episode and family',
    );
    // The key set's URL is named, without its query string.
    assert.ok(
      entries.some(
        (e) =>
          e.name === 'api' &&
          /keys could not be fetched from http:\/\/127\.0\.0\.1:\d+\/\.well-known\/jwks\.json\?\[redacted\]/.test(
            String(e.msg),
          ),
      ),
      'the API says which key set it could not fetch',
    );
    for (const [name, value] of Object.entries(secrets)) {
      assert.ok(value.length >= 16, name);
      const leaked = all.filter((line) => line.includes(value));
      assert.deepEqual(leaked, [], `${name} appears in the logs`);
    }
  });

  it('counts a stale claim taken over, by family, once per takeover', async () => {
    const mongo = await connectMongo(testStack().mongoUrl, `${vars.MONGO_DB}_takeover`);
    try {
      const metrics = createMetrics(new Registry(), { processMetrics: false });
      let clock = Date.now();
      const claims = createClaimStore(mongo.db, {
        graceSeconds: 60,
        now: () => new Date(clock),
        onTakeover: (key) => metrics.claimTakeover(key),
      });
      assert.ok(await claims.tryMark('cb|run_t:end', 'worker-a'));
      assert.equal(await claims.tryMark('cb|run_t:end', 'worker-b'), false, 'inside the grace: refused');
      clock += 61_000;
      assert.ok(await claims.tryMark('cb|run_t:end', 'worker-b'), 'past the grace: taken over');
      assert.ok(await claims.tryMark('cb|run_t:end', 'worker-b'), 'the new holder re-enters: no takeover');
      const series = parseMetrics(await metrics.registry.metrics());
      assert.equal(series.get('flow_notify_claim_takeovers_total{family="callback"}'), 1);
      assert.equal(series.get('flow_notify_claim_takeovers_total{family="push"}'), undefined);
    } finally {
      await mongo.db.dropDatabase();
      await mongo.client.close();
    }
  });
});

describe("the API's /metrics: off by default, on METRICS_PORT or behind METRICS_TOKEN", () => {
  const metricsToken = 'metrics-token-0123456789abcdef';

  it('by default the API port answers 404 for /metrics, with a user token or without', async () => {
    const { api, client } = await startTestApi(testConfig());
    try {
      for (const caller of [client, client.as('alice', 'acme')]) {
        const res = await caller.get('/metrics');
        assert.equal(res.status, 404, res.text);
        assert.deepEqual(res.body, { error: 'not found' });
      }
    } finally {
      await api.close();
    }
  });

  it('METRICS_TOKEN: the API port serves /metrics to that bearer only', async () => {
    const { api, client } = await startTestApi(testConfig({ METRICS_TOKEN: metricsToken }));
    try {
      for (const [what, caller] of [
        ['no token', client],
        ['another token', new ApiClient(api.url, 'another-token-0123456789abcdef')],
        ["a user's token", client.as('alice', 'acme')],
      ] as const) {
        const res = await caller.get('/metrics');
        assert.equal(res.status, 401, `${what}: ${res.text}`);
      }
      const ok = await new ApiClient(api.url, metricsToken).get('/metrics');
      assert.equal(ok.status, 200, ok.text);
      assert.match(ok.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      assert.match(ok.text, /^flow_notify_\w+/m);
    } finally {
      await api.close();
    }
  });

  it('METRICS_PORT: its own port serves /metrics without a token; the API port answers 404', async () => {
    const port = await freePort();
    const { api, client } = await startTestApi(testConfig({ METRICS_PORT: String(port) }));
    try {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(res.status, 200);
      assert.match(await res.text(), /^flow_notify_\w+/m);
      assert.equal((await client.get('/metrics')).status, 404);
    } finally {
      await api.close();
    }
    await assert.rejects(fetch(`http://127.0.0.1:${port}/metrics`), 'closed with the API');
  });

  it('METRICS_HOST beyond loopback: its own port asks for the METRICS_TOKEN bearer; HOST alone keeps it on loopback', async () => {
    const port = await freePort();
    const config = testConfig({
      METRICS_PORT: String(port),
      METRICS_HOST: '0.0.0.0',
      METRICS_TOKEN: metricsToken,
    });
    assert.equal(testConfig({ HOST: '0.0.0.0', METRICS_PORT: String(port) }).metricsHost, '127.0.0.1');
    const { api } = await startTestApi(config);
    try {
      const refused = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(refused.status, 401);
      const ok = await fetch(`http://127.0.0.1:${port}/metrics`, {
        headers: { authorization: `Bearer ${metricsToken}` },
      });
      assert.equal(ok.status, 200);
      assert.match(await ok.text(), /^flow_notify_\w+/m);
    } finally {
      await api.close();
    }
  });

  it('a METRICS_TOKEN shorter than 16 characters or a bad METRICS_PORT is one line naming it', () => {
    const base = { MONGO_URL: 'mongodb://127.0.0.1:1', AUTH_JWT_SECRET: TEST_JWT_SECRET };
    assert.throws(
      () => loadConfig({ ...base, METRICS_TOKEN: 'short' }),
      /^ConfigError: METRICS_TOKEN must be/,
    );
    assert.throws(
      () => loadConfig({ ...base, METRICS_PORT: 'x' }),
      /^ConfigError: METRICS_PORT must be a TCP port/,
    );
    const config = loadConfig({ ...base, METRICS_PORT: '9464', METRICS_TOKEN: metricsToken });
    assert.equal(config.metricsPort, 9464);
    assert.equal(config.metricsToken, metricsToken);
  });
});
