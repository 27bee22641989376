// Operator alerts outlast webhook trouble: each alert is its own ops|<key> workflow that retries on durable
// timers for OPS_ALERT_RETRY_HOURS with its claim kept pending and renewed, then settles gave_up with the reason.
// Real servers; the operator webhook is a loopback receiver that answers 503 for a while.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Worker } from '@temporalio/worker';
import { routeDecisionAlert, type OperatorAlert } from '../domain/ops';
import { operatorAlertWorkflowId } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { saveHistory, type ApiClient } from './support/harness';
import { operatorAlertWorkflow } from '../workflows/operatorAlert';
import { waitUntil } from './support/waitUntil';
import { workflowBundle } from './support/workflowBundle';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/**
 * A router alert's history (first POST refused, the second through) per version: before alerts retried on
 * durable timers, and now. RECORD_OPS_HISTORY=1 records the current one.
 */
const FIXTURES = [
  'fixtures/operator-alert-history-inline-retry.json',
  'fixtures/operator-alert-history-timers.json',
].map((f) => path.resolve(__dirname, f));
const CURRENT = FIXTURES[FIXTURES.length - 1];

/** The operator webhook (a loopback receiver) and the system alerting it. */
interface Suite extends FamilyStack {
  webhook: CallbackReceiver;
  alice: ApiClient;
}

async function startSuite(overrides: Record<string, string>): Promise<Suite> {
  const webhook = await CallbackReceiver.start();
  const stack = await startFamilyStack({
    OPS_ALERT_WEBHOOK_URL: webhook.url,
    SWEEP_INTERVAL_SECONDS: '3600',
    ...overrides,
  }).catch(async (err: unknown) => {
    await webhook.close();
    throw err;
  });
  return { ...stack, webhook, alice: stack.anonymous.as('alice', 'acme') };
}

async function stopSuite(s: Suite | undefined): Promise<void> {
  await s?.stop();
  await s?.webhook.close();
}

const alertsIn = (webhook: CallbackReceiver, since = 0) =>
  webhook.received.filter((r) => r.at.getTime() >= since).map((r) => JSON.parse(r.body) as OperatorAlert);

describe('operator alerts retry through webhook trouble', function () {
  let s: Suite;
  before(async () => {
    // A 4 s claim grace: the alert's retry waits are capped at a third of it (2 s, then 1.3 s).
    s = await startSuite({
      STALL_AFTER_SECONDS: '3',
      HEALTH_REAP_SECONDS: '3600',
      CLAIM_GRACE_SECONDS: '4',
      OPS_ALERT_RETRY_HOURS: '1',
    });
    if (process.env.RECORD_OPS_HISTORY === '1') {
      s.webhook.answer({ status: 503 });
      const alert = routeDecisionAlert(
        { runId: 'run_recorded', teamId: 'acme', decisionId: 'dec_1', error: { code: 'x', message: 'y' } },
        new Date().toISOString(),
      );
      const id = operatorAlertWorkflowId(alert.episodeKey);
      await s.client.workflow.execute(operatorAlertWorkflow, {
        workflowId: id,
        taskQueue: s.config.temporalTaskQueue,
        args: [alert],
      });
      saveHistory(s.config, id, CURRENT);
      s.webhook.received.length = 0;
    }
  });
  after(() => stopSuite(s));

  it('the receiver answers 503 until every alert was tried (the router alert past its claim grace), then 200: every alert (stall, stall_recovered, budget, router, failed run) arrives exactly once', async () => {
    const { webhook, alice, stores } = s;
    webhook.answerAlways({ status: 503 });
    const newRun = async (body: Record<string, unknown> = {}) => {
      const created = await alice.post('/api/v1/runs', { title: 'Outage', ...body });
      assert.equal(created.status, 201, created.text);
      return created.body.id as string;
    };
    const spender = await newRun({ budget: { limit: 10 } });
    await alice.post(`/api/v1/runs/${spender}/events`, { type: 'usage', spent: 9 });
    await alice.post(`/api/v1/runs/${spender}/events`, { type: 'usage', spent: 12 });
    await alice.post(`/api/v1/runs/${spender}/complete`, { finalAnswer: 'done' });
    const staller = await newRun();
    await alice.post(`/api/v1/runs/${staller}/events`, { type: 'node_started', node: 'plan' });
    const router = await newRun();
    const routed = await alice.post(`/api/v1/runs/${router}/route-decision-errors`, {
      decisionId: 'dec_1',
      error: { code: 'no_route', message: 'nothing matched' },
    });
    assert.equal(routed.status, 202);
    await alice.post(`/api/v1/runs/${router}/fail`, { error: { code: 'oom', message: 'killed' } });
    const keysTried = () => alertsIn(webhook).map((a) => a.episodeKey);
    // The staller stalls (3 s), then recovers while the webhook is still down.
    await waitUntil(
      'the stall alert to be tried',
      () => alertsIn(webhook).some((a) => a.runId === staller && a.kind === 'stall'),
      { timeoutMs: 60_000, intervalMs: 200, seen: keysTried },
    );
    await alice.post(`/api/v1/runs/${staller}/events`, { type: 'node_started', node: 'write' });
    await alice.post(`/api/v1/runs/${staller}/complete`, { finalAnswer: 'ok' });

    const expected = [
      `health:${spender}:budget_warning`,
      `health:${spender}:budget_exceeded`,
      `health:${staller}:stall:1`,
      `health:${staller}:stall_recovered:1`,
      `route:${router}:dec_1`,
      `${router}:end`,
    ];
    const tried = () => new Set(keysTried());
    // The outage lasts until every alert was tried, and the router alert five times: its waits (2 s, then 1.3 s)
    // are durable timers, so its fifth attempt comes at least 6 s after the first, past the claim's 4 s grace.
    const routerAttempts = () => keysTried().filter((key) => key === `route:${router}:dec_1`).length;
    await waitUntil(
      'every alert tried during the outage, the router alert five times',
      () => expected.every((key) => tried().has(key)) && routerAttempts() >= 5,
      { timeoutMs: 60_000, intervalMs: 200, seen: keysTried },
    );
    const routerKey = `ops|route:${router}:dec_1`;
    assert.equal(await stores.claims.state(routerKey), 'pending', 'still in hand while it retries');
    assert.ok(await stores.claims.isMarked(routerKey), 'renewed: past its first grace it still shields');

    const recovered = Date.now();
    webhook.answerAlways({ status: 204 });
    const delivered = () => alertsIn(webhook, recovered).map((a) => a.episodeKey);
    await waitUntil(
      'every alert tried during the outage delivered after it',
      () => [...tried()].every((k) => delivered().includes(k)),
      { timeoutMs: 30_000, intervalMs: 200, seen: delivered },
    );
    await sleep(3000); // nothing more may come: more than twice the longest retry wait (1.3 s)
    const counts: Record<string, number> = {};
    for (const key of delivered()) counts[key] = (counts[key] ?? 0) + 1;
    for (const key of tried())
      assert.equal(counts[key], 1, `${key} after the outage: ${JSON.stringify(counts)}`);
    for (const key of expected) assert.equal(await stores.claims.state(`ops|${key}`), 'delivered', key);
  }).timeout(120_000);

  it('replays recorded alert histories (inline retries, and durable timers) with the current code', async () => {
    for (const fixture of FIXTURES) {
      const history: unknown = JSON.parse(readFileSync(fixture, 'utf8'));
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history);
    }
  });
});

describe('an operator alert past its retry window', function () {
  let s: Suite;
  // 0.002 h = 7.2 s; waits capped at 2 s (claim grace 6 s / 3): attempts at 0, 2, 4 and 6 s, then it gives up.
  before(async () => (s = await startSuite({ OPS_ALERT_RETRY_HOURS: '0.002', CLAIM_GRACE_SECONDS: '6' })));
  after(() => stopSuite(s));

  it('settles gave_up with the reason, and a later report of it sends nothing', async () => {
    s.webhook.answerAlways({ status: 503 });
    const alert = routeDecisionAlert(
      {
        runId: `run_gone_${Date.now()}`,
        teamId: 'acme',
        decisionId: 'd',
        error: { code: 'x', message: 'y' },
      },
      new Date().toISOString(),
    );
    const run = () =>
      s.client.workflow.execute(operatorAlertWorkflow, {
        workflowId: operatorAlertWorkflowId(alert.episodeKey),
        taskQueue: s.config.temporalTaskQueue,
        args: [alert],
      });
    assert.equal(await run(), 'gave_up');
    // Attempts 2 s apart until the 7.2 s window closes: at 0, 2, 4 and 6 s when each is on time. On a loaded
    // machine the attempts come late (seen: 0, 3,185 and 7,610 ms; once a single attempt), so the schedule itself
    // is the time-skipping test's (test/workflows/operatorAlertRetry); here: never more attempts than the window
    // holds, each after a durable-timer wait (which starts only once the previous attempt failed).
    const attempts = s.webhook.received.map((r) => r.at.getTime() - s.webhook.received[0].at.getTime());
    const gaps = attempts.slice(1).map((at, i) => at - attempts[i]);
    assert.ok(
      attempts.length >= 1 && attempts.length <= 4 && gaps.every((gap) => gap >= 1900),
      `attempts at ${attempts.join(', ')} ms`,
    );
    assert.deepEqual(await s.stores.claims.describe(`ops|${alert.episodeKey}`), {
      state: 'delivered',
      result: 'gave_up: operator webhook answered 503',
    });
    s.webhook.answerAlways({ status: 204 });
    assert.equal(await run(), 'claimed_elsewhere');
    assert.equal(s.webhook.received.length, attempts.length);
  }).timeout(60_000);
});

describe('an operator alert attempt whose claim read outlasted its start-to-close', function () {
  this.timeout(180_000);
  /** While set, the worker's next read of an ops| claim takes this long (a store slow under load). */
  let slowReadMs = 0;
  const logged: string[] = [];
  let webhook: CallbackReceiver;
  let stack: FamilyStack;

  before(async () => {
    webhook = await CallbackReceiver.start();
    stack = await startFamilyStack(
      { OPS_ALERT_WEBHOOK_URL: webhook.url, SWEEP_INTERVAL_SECONDS: '3600' },
      {
        workerLog: (line) => logged.push(line),
        workerStores: (stores) => ({
          ...stores,
          claims: {
            ...stores.claims,
            // Its answer, as read then, arrives that much later.
            wasDelivered: async (key) => {
              const delay = key.startsWith('ops|') ? slowReadMs : 0;
              if (delay) slowReadMs = 0;
              const answer = await stores.claims.wasDelivered(key);
              if (delay) await sleep(delay);
              return answer;
            },
          },
        }),
      },
    );
  });
  after(async () => {
    await stack?.stop();
    await webhook?.close();
  });

  it("sends nothing: Temporal's next attempt sends the alert, once", async () => {
    // Past the attempt's 30 s start-to-close: Temporal gives up on it while the read still runs; both would POST.
    slowReadMs = 35_000;
    const alert = routeDecisionAlert(
      { runId: 'run_slow_read', teamId: 'acme', decisionId: 'dec_slow', error: { code: 'x', message: 'y' } },
      new Date().toISOString(),
    );
    const result = await stack.client.workflow.execute(operatorAlertWorkflow, {
      workflowId: operatorAlertWorkflowId(alert.episodeKey),
      taskQueue: stack.config.temporalTaskQueue,
      args: [alert],
    });
    assert.equal(result, 'delivered');
    // The late attempt goes on after the workflow: it either POSTs again or says it held back.
    await waitUntil(
      'the late attempt sent or held back',
      () => webhook.received.length > 1 || logged.some((line) => line.includes('not sent: too little')),
      { timeoutMs: 60_000 },
    );
    assert.equal(webhook.received.length, 1, 'POSTs of the alert');
  });
});
