// npm run bench:events: what one chatty run costs its health workflow. One run reports BENCH_EVENTS_RATE events a
// second (100) for BENCH_EVENTS_SECONDS (60) through `POST /runs/:id/events` of one API process, with a silence of
// the stall time plus 2 s in the middle (a stall, then its recovery) and spend crossing 80 % and 100 % of its
// budget; then the run completes. Once with HEALTH_BATCH_MS=0 (a signal per event, as before batches) and once with
// the default window, one after the other on the same servers and worker. Read off the health workflow's histories
// (every execution of the run's chain): signals per second, Temporal Cloud actions, and the alerts; and the p99 of
// the route. Prints the targets and whether each is met.
//
// Actions counted, after Temporal Cloud's list: a workflow started (the first signal-with-start, each continue-as-
// new, each operator alert's workflow), a signal, an activity scheduled, a timer started, a search-attribute
// upsert, and the local activities of one workflow task as one. Patch markers are not actions.
import assert from 'node:assert/strict';
import { temporal } from '@temporalio/proto';
import type { Client } from '@temporalio/client';
import { loadConfig, type Config } from '../config';
import { healthWorkflowId } from '../contract/workflows';
import type { OperatorAlert } from '../domain/ops';
import { CallbackReceiver, startServers } from '../test/support';
import { TEST_JWT_SECRET } from '../test/support/stack';
import {
  openStores,
  startTestApi,
  startTestWorker,
  temporalClient,
  type ApiClient,
} from '../test/support/harness';
import { waitUntil } from '../test/support/waitUntil';
import { installQuietRuntime, log, nowMs, percentile, round, runMain, uniqueName } from './support';

const RATE = Number(process.env.BENCH_EVENTS_RATE ?? 100);
const SECONDS = Number(process.env.BENCH_EVENTS_SECONDS ?? 60);
const STALL_SECONDS = 5;
const BUDGET = 100;
const T = temporal.api.enums.v1.EventType;

interface Phase {
  batchMs: number;
  runId: string;
  latenciesMs: number[];
}

/** Sends the run's events on a fixed schedule (no catching up in a burst after a slow answer). */
async function report(api: ApiClient, runId: string): Promise<number[]> {
  const total = RATE * SECONDS;
  const silenceFrom = Math.floor(total / 2);
  const silenceMs = (STALL_SECONDS + 2) * 1000;
  const start = nowMs();
  const latencies: number[] = [];
  const inFlight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const dueAt = start + (i * 1000) / RATE + (i >= silenceFrom ? silenceMs : 0);
    const wait = dueAt - nowMs();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    // Spend climbs to 120 % of the budget over the run; every other event is a step.
    const body =
      i % 2
        ? { type: 'usage', spent: round((1.2 * BUDGET * i) / total, 2) }
        : { type: 'node_started', node: `n${i}` };
    inFlight.push(
      (async () => {
        const sent = nowMs();
        const answer = await api.post(`/api/v1/runs/${runId}/events`, body);
        assert.equal(answer.status, 201, JSON.stringify(answer.body));
        latencies.push(nowMs() - sent);
      })(),
    );
  }
  await Promise.all(inFlight);
  return latencies;
}

/** The health workflow's chain of executions, oldest first, and what each history holds. */
async function historyCounts(client: Client, runId: string) {
  const events = [];
  for await (const execution of client.workflow.list({
    query: `WorkflowId = '${healthWorkflowId(runId)}'`,
  })) {
    const history = await client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
    events.push(...(history.events ?? []));
  }
  const signalSeconds = new Map<number, number>();
  let actions = 0;
  let localActivityTask = false;
  for (const e of events) {
    const type = e.eventType;
    if (type === T.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED) {
      const second = Number(e.eventTime?.seconds ?? 0);
      signalSeconds.set(second, (signalSeconds.get(second) ?? 0) + 1);
    }
    if (type === T.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) localActivityTask = false;
    const localActivity =
      type === T.EVENT_TYPE_MARKER_RECORDED &&
      e.markerRecordedEventAttributes?.markerName === 'core_local_activity';
    if (localActivity && !localActivityTask) {
      localActivityTask = true;
      actions++;
    }
    if (
      type === T.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED ||
      type === T.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED ||
      type === T.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED ||
      type === T.EVENT_TYPE_TIMER_STARTED ||
      type === T.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED ||
      type === T.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
    )
      actions++;
  }
  const signals = [...signalSeconds.values()].reduce((a, b) => a + b, 0);
  return {
    events: events.length,
    signals,
    maxSignalsPerSecond: Math.max(0, ...signalSeconds.values()),
    actions,
  };
}

runMain(async () => {
  installQuietRuntime();
  const stack = await startServers('bench-events', { temporal: true });
  const webhook = await CallbackReceiver.start();
  const cleanups: (() => Promise<void>)[] = [() => stack.stop(), () => webhook.close()];
  try {
    const config: Config = loadConfig({
      MONGO_URL: stack.mongoUrl,
      MONGO_DB: uniqueName('bench_events'),
      TEMPORAL_ADDRESS: stack.temporalAddress!,
      TEMPORAL_TASK_QUEUE: uniqueName('flow-notify-bench-events'),
      AUTH_JWT_SECRET: TEST_JWT_SECRET,
      OPS_ALERT_WEBHOOK_URL: webhook.url,
      STALL_AFTER_SECONDS: String(STALL_SECONDS),
      SWEEP_INTERVAL_SECONDS: '86400',
    });
    const { mongo, stores } = await openStores(config);
    cleanups.unshift(() => mongo.client.close());
    const worker = await startTestWorker(config, stores);
    cleanups.unshift(() => worker.stop());
    const { client, close } = await temporalClient(config);
    cleanups.unshift(close);

    const alertsOf = (runId: string): string[] =>
      webhook.received
        .map((r) => JSON.parse(r.body) as OperatorAlert)
        .filter((a) => a.runId === runId)
        .map((a) => a.kind)
        .sort();
    const phases: Phase[] = [];
    for (const batchMs of [0, config.healthBatchMs]) {
      const { api, client: anonymous } = await startTestApi({ ...config, healthBatchMs: batchMs });
      try {
        const alice = anonymous.as('alice', 'acme');
        const created = await alice.post('/api/v1/runs', { title: 'Chatty', budget: { limit: BUDGET } });
        const runId = created.body.id as string;
        log(`bench:events: HEALTH_BATCH_MS=${batchMs}: ${RATE} events/s for ${SECONDS} s, run ${runId}`);
        const latenciesMs = await report(alice, runId);
        assert.equal(
          (await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'done' })).status,
          200,
        );
        await waitUntil('the run health to see the end', async () => {
          const health = await alice.get(`/api/v1/runs/${runId}/health`);
          return health.body.phase === 'terminal';
        });
        await waitUntil('four alerts', () => alertsOf(runId).length >= 4, { timeoutMs: 60_000 });
        phases.push({ batchMs, runId, latenciesMs });
      } finally {
        await api.close();
      }
    }

    const rows = [];
    for (const p of phases) {
      const counts = await historyCounts(client, p.runId);
      rows.push({ ...p, ...counts, p99: round(percentile(p.latenciesMs, 99)), alerts: alertsOf(p.runId) });
    }
    const [before, after] = rows;
    console.log(
      '\n| HEALTH_BATCH_MS | signals | max signals/s | actions | history events | p50 ms | p99 ms | alerts |',
    );
    console.log('|---|---|---|---|---|---|---|---|');
    for (const r of rows)
      console.log(
        `| ${r.batchMs} | ${r.signals} | ${r.maxSignalsPerSecond} | ${r.actions} | ${r.events} | ` +
          `${round(percentile(r.latenciesMs, 50))} | ${r.p99} | ${r.alerts.join(', ')} |`,
      );
    const minuteScale = 60 / SECONDS;
    const targets = [
      [
        `at most 2 health signals a second (batched: ${after.maxSignalsPerSecond})`,
        after.maxSignalsPerSecond <= 2,
      ],
      [
        `at most 150 actions for the minute (batched: ${round(after.actions * minuteScale, 0)}, unbatched: ${round(before.actions * minuteScale, 0)})`,
        after.actions * minuteScale <= 150,
      ],
      [
        `route p99 no worse than unbatched (${after.p99} ms against ${before.p99} ms)`,
        after.p99 <= before.p99,
      ],
      [
        `the same alerts (${after.alerts.join(', ')})`,
        JSON.stringify(after.alerts) === JSON.stringify(before.alerts) && after.alerts.length === 4,
      ],
    ] as const;
    console.log('');
    for (const [what, met] of targets) console.log(`target: ${what}: ${met ? 'met' : 'NOT MET'}`);
  } finally {
    for (const cleanup of cleanups) await cleanup().catch(() => undefined);
  }
});
