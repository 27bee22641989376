// Traces on real processes: the API and the worker started with OTEL_EXPORTER_OTLP_ENDPOINT at a loopback OTLP
// receiver; a run with a push subscriber and a callback ends; the receiver gets one trace from the request that
// ended the run, through the episode workflow and its activities, to the push send and the callback attempt,
// and the callback carried that trace's `traceparent`. Without the variable, nothing is exported and the
// callback carries no `traceparent`.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import webpush from 'web-push';
import { loadConfig } from '../config';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import { CallbackReceiver } from './support/callbackReceiver';
import { ApiClient } from './support/harness';
import { OtlpReceiver, type ReceivedSpan } from './support/otlpReceiver';
import { startProcess, terminate } from './support/processes';
import { deleteSweepScheduleOf, processStackVars } from './support/processStack';
import { startPushService, type PushService } from './support/pushService';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';
import { waitUntil } from './support/waitUntil';

/** OTLP's SpanKind numbers. */
const SERVER = 2;
const CLIENT = 3;

/** `traceparent: 00-<trace id>-<parent span id>-<flags>` (W3C Trace Context). */
function parseTraceparent(header: string | string[] | undefined): { traceId: string; spanId: string } {
  const match = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(String(header));
  assert.ok(match, `a W3C traceparent header, got ${String(header)}`);
  return { traceId: match[1], spanId: match[2] };
}

interface Scenario {
  push: PushService;
  callbacks: CallbackReceiver;
  worker?: WorkerProcess;
  api?: { child: ChildProcess; output: () => string };
  vars: Record<string, string>;
}

/** A push service, a callback receiver, and the worker and API processes with these variables. */
async function startScenario(name: string, extra: Record<string, string>): Promise<Scenario> {
  const push = await startPushService();
  const callbacks = await CallbackReceiver.start();
  const vapid = webpush.generateVAPIDKeys();
  const vars = processStackVars(
    { db: `t_${name}`, queue: name },
    {
      VAPID_PUBLIC_KEY: vapid.publicKey,
      VAPID_PRIVATE_KEY: vapid.privateKey,
      PUSH_ALLOW_PRIVATE: '1',
      CALLBACK_ALLOW_PRIVATE: '1',
      SWEEP_INTERVAL_SECONDS: '3600',
      PORT: String(await freePort()),
      ...extra,
    },
  );
  const scenario: Scenario = { push, callbacks, vars };
  scenario.worker = await WorkerProcess.start({ vars, trustCa: push.ca });
  scenario.api = await startProcess(
    PROJECT_ROOT,
    ['-r', 'ts-node/register', 'api/server.ts'],
    childProcessEnv(vars),
    'flow-notify api: listening',
  );
  return scenario;
}

async function stopScenario(scenario: Scenario | undefined): Promise<void> {
  if (!scenario) return;
  // SIGTERM: both flush what their exporters still hold before they exit.
  if (scenario.api) await terminate(scenario.api.child);
  await scenario.worker?.stop(20_000);
  await deleteSweepScheduleOf(loadConfig(scenario.vars));
  await scenario.push.close();
  await scenario.callbacks.close();
}

/** Alice subscribes a device, creates a run with a callback and completes it; answers the run's id. */
async function endARun(scenario: Scenario): Promise<string> {
  const alice = new ApiClient(`http://127.0.0.1:${scenario.vars.PORT}`).as('alice', 'acme');
  const sub = scenario.push.endpoint('alice-laptop');
  assert.equal((await alice.post('/api/v1/notifications/push/subscriptions', sub)).status, 201);
  const run = await alice.post('/api/v1/runs', {
    title: 'Traced',
    callback: { url: scenario.callbacks.url },
  });
  assert.equal(run.status, 201, run.text);
  const completed = await alice.post(`/api/v1/runs/${run.body.id}/complete`, { finalAnswer: 'ok' });
  assert.equal(completed.status, 200, completed.text);
  await scenario.callbacks.waitFor(1, 60_000);
  await scenario.push.waitFor(1, sub, 60_000);
  return run.body.id as string;
}

describe('traces', function () {
  this.timeout(300_000);

  describe('with OTEL_EXPORTER_OTLP_ENDPOINT set', () => {
    let otlp: OtlpReceiver;
    let scenario: Scenario | undefined;

    before(async () => {
      otlp = await OtlpReceiver.start();
      scenario = await startScenario('traces_on', {
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        // Batches leave every 200 ms instead of every 5 s.
        OTEL_BSP_SCHEDULE_DELAY: '200',
      });
    });

    after(async () => {
      await stopScenario(scenario);
      await otlp?.close();
    });

    it('one trace from the request that ended the run to the push send and the callback attempt', async () => {
      const s = scenario!;
      assert.match(s.worker!.output(), /traces on/);
      assert.match(s.api!.output(), /traces on/);
      const runId = await endARun(s);

      // The callback carried the trace: its traceparent names the trace and the callback attempt's span.
      const callback = s.callbacks.received[0];
      const { traceId, spanId } = parseTraceparent(callback.headers.traceparent);

      const has = (spans: ReceivedSpan[], test: (span: ReceivedSpan) => boolean) =>
        spans.some((span) => span.traceId === traceId && test(span));
      // This request sent the run's held events as one batch, which started the run's health workflow in this
      // trace; that workflow's run span ends only when it is reaped, so its spans' parent is not waited for.
      const inHealthWorkflow = (span: ReceivedSpan): boolean =>
        span.attributes.workflowType === 'runHealthWorkflow';
      await otlp.waitUntil(
        (spans) =>
          has(spans, (span) => span.name === 'POST /api/v1/runs/:id/complete') &&
          has(spans, (span) => span.name === 'RunWorkflow:episodeWorkflow') &&
          has(spans, (span) => span.name === 'push send') &&
          has(spans, (span) => span.spanId === spanId) &&
          // Every parent arrived too: the workflow's spans leave at its activations' ends, after their children.
          otlp
            .trace(traceId)
            .every(
              (span) =>
                !span.parentSpanId ||
                inHealthWorkflow(span) ||
                has(spans, (p) => p.spanId === span.parentSpanId),
            ),
        `the trace ${traceId} from the request to the push send and the callback attempt`,
      );
      const trace = otlp.trace(traceId);
      if (process.env.TRACE_DUMP)
        for (const x of trace) console.log(x.service, x.kind, x.name, x.spanId, '<-', x.parentSpanId);
      const one = (test: (span: ReceivedSpan) => boolean, what: string): ReceivedSpan => {
        const found = trace.filter(test);
        assert.equal(found.length, 1, `one ${what} in the trace, got ${found.map((x) => x.name).join(', ')}`);
        return found[0];
      };
      const byId = new Map(trace.map((span) => [span.spanId, span]));
      const parentOf = (span: ReceivedSpan): ReceivedSpan => {
        const parent = byId.get(span.parentSpanId);
        assert.ok(parent, `the parent of ${span.name} (${span.parentSpanId}) is in the trace`);
        return parent;
      };
      const ancestors = (span: ReceivedSpan): string[] => {
        const names: string[] = [];
        for (let at = span; at.parentSpanId;) {
          at = parentOf(at);
          names.push(at.name);
        }
        return names;
      };

      // The root: the API's server span of the request that ended the run.
      const request = one((x) => x.name === 'POST /api/v1/runs/:id/complete', 'request span');
      assert.equal(request.parentSpanId, '', 'the request span is the root');
      assert.equal(request.kind, SERVER);
      assert.equal(request.service, 'flow-notify-api');
      assert.equal(request.attributes['http.response.status_code'], 200);
      assert.equal(request.attributes['http.route'], '/api/v1/runs/:id/complete');

      // The API's start of the episode, under the request; the workflow under the start, on the worker.
      const start = one((x) => x.name === 'StartWorkflow:episodeWorkflow', 'episode start');
      assert.equal(start.service, 'flow-notify-api');
      assert.ok(ancestors(start).includes(request.name), 'the start is under the request');
      const workflow = one((x) => x.name === 'RunWorkflow:episodeWorkflow', 'episode workflow');
      assert.equal(workflow.service, 'flow-notify-worker');
      assert.equal(workflow.attributes.workflowId, `${runId}:end`);
      assert.equal(parentOf(workflow).spanId, start.spanId);

      // The push send: a client span in the push activity, under the workflow.
      const push = one((x) => x.name === 'push send', 'push send');
      assert.equal(push.kind, CLIENT);
      assert.equal(push.service, 'flow-notify-worker');
      assert.equal(push.attributes['push.result'], 'delivered');
      assert.equal(push.attributes['server.address'], '127.0.0.1');
      assert.match(parentOf(push).name, /^RunActivity:/);
      assert.ok(ancestors(push).includes(workflow.name), 'the push send is under the workflow');

      // The callback attempt: the span the traceparent named, in the sendCallback activity, under the workflow.
      const attempt = byId.get(spanId)!;
      assert.equal(attempt.name, 'callback attempt');
      assert.equal(attempt.kind, CLIENT);
      assert.equal(attempt.attributes['http.response.status_code'], 204);
      assert.equal(attempt.attributes['webhook.id'], `${runId}:end`);
      assert.equal(parentOf(attempt).name, 'RunActivity:sendCallback');
      assert.ok(ancestors(attempt).includes(workflow.name), 'the callback attempt is under the workflow');

      // Every span of the trace hangs from the request: no orphan, no second root.
      const underHealthWorkflow = (span: ReceivedSpan): boolean => {
        for (let at: ReceivedSpan | undefined = span; at; at = byId.get(at.parentSpanId))
          if (inHealthWorkflow(at)) return true;
        return false;
      };
      for (const span of trace) {
        if (span !== request && !underHealthWorkflow(span))
          assert.equal(ancestors(span).at(-1), request.name, `${span.name} reaches the root`);
      }
      assert.deepEqual([...otlp.contentTypes], ['application/x-protobuf'], 'OTLP/HTTP protobuf by default');
    });

    /** A trace context a caller could send: a fresh trace id, a parent span id, sampled. */
    const forcedContext = () => {
      const traceId = randomBytes(16).toString('hex');
      const spanId = randomBytes(8).toString('hex');
      return { traceId, spanId, traceparent: `00-${traceId}-${spanId}-01` };
    };
    /** The API's server span answering `status` to `method` (the only such request in the scenario). */
    const serverSpan = async (method: string, status: number): Promise<ReceivedSpan> => {
      const match = (span: ReceivedSpan) =>
        span.kind === SERVER &&
        span.service === 'flow-notify-api' &&
        span.attributes['http.request.method'] === method &&
        span.attributes['http.response.status_code'] === status;
      await otlp.waitUntil((spans) => spans.some(match), `the ${method} request's span (${status})`);
      return otlp.spans.filter(match)[0];
    };

    it("an unauthenticated request's traceparent and baggage are not honoured: its span starts a trace of its own", async () => {
      const forced = forcedContext();
      const res = await fetch(`http://127.0.0.1:${scenario!.vars.PORT}/api/v1/runs`, {
        method: 'PATCH',
        headers: { traceparent: forced.traceparent, baggage: 'forced=1' },
      });
      assert.equal(res.status, 401);
      const span = await serverSpan('PATCH', 401);
      assert.notEqual(span.traceId, forced.traceId, 'the caller chose the trace (and its sampling)');
      assert.equal(span.parentSpanId, '', 'a root of its own');
      assert.deepEqual(otlp.trace(forced.traceId), []);
    });

    it("an authenticated request continues the caller's trace", async () => {
      const forced = forcedContext();
      const alice = new ApiClient(`http://127.0.0.1:${scenario!.vars.PORT}`).as('alice', 'acme');
      const res = await alice.request('HEAD', '/api/v1/runs', undefined, { traceparent: forced.traceparent });
      assert.equal(res.status, 200);
      const span = await serverSpan('HEAD', 200);
      assert.deepEqual([span.traceId, span.parentSpanId], [forced.traceId, forced.spanId]);
    });

    it("a caller's baggage never reaches the callback its request causes", async () => {
      const s = scenario!;
      const alice = new ApiClient(`http://127.0.0.1:${s.vars.PORT}`).as('alice', 'acme');
      const run = await alice.post('/api/v1/runs', { title: 'Baggage', callback: { url: s.callbacks.url } });
      assert.equal(run.status, 201, run.text);
      const completed = await alice.request(
        'POST',
        `/api/v1/runs/${run.body.id}/complete`,
        { finalAnswer: 'ok' },
        { traceparent: forcedContext().traceparent, baggage: 'tenant=alice,secret=do-not-forward' },
      );
      assert.equal(completed.status, 200, completed.text);
      const episode = `${run.body.id}:end`;
      const callback = await waitUntil(
        `the callback of ${episode}`,
        () => s.callbacks.received.find((c) => c.headers['webhook-id'] === episode),
        { timeoutMs: 60_000 },
      );
      parseTraceparent(callback.headers.traceparent); // still traced
      assert.equal(callback.headers.baggage, undefined);
    });

    it('behind TRUST_PROXY the proxy in front vouches for the trace context: an unauthenticated request continues it', async () => {
      const vars = { ...scenario!.vars, PORT: String(await freePort()), TRUST_PROXY: '1' };
      const api = await startProcess(
        PROJECT_ROOT,
        ['-r', 'ts-node/register', 'api/server.ts'],
        childProcessEnv(vars),
        'flow-notify api: listening',
      );
      try {
        const forced = forcedContext();
        const res = await fetch(`http://127.0.0.1:${vars.PORT}/api/v1/runs`, {
          method: 'PUT',
          headers: { traceparent: forced.traceparent },
        });
        assert.equal(res.status, 401);
        const span = await serverSpan('PUT', 401);
        assert.deepEqual([span.traceId, span.parentSpanId], [forced.traceId, forced.spanId]);
      } finally {
        await terminate(api.child);
      }
    });
  });

  describe('without OTEL_EXPORTER_OTLP_ENDPOINT', () => {
    let otlp: OtlpReceiver | undefined;
    let scenario: Scenario | undefined;

    before(async () => {
      // A receiver where an SDK started by mistake would send (the OTLP/HTTP default, localhost:4318), when
      // that port is free here; the other OTEL_* variables are set, and none of them turns tracing on.
      otlp = await OtlpReceiver.start(4318).catch(() => undefined);
      scenario = await startScenario('traces_off', {
        OTEL_SERVICE_NAME: 'flow-notify-should-not-trace',
        OTEL_BSP_SCHEDULE_DELAY: '100',
        OTEL_TRACES_SAMPLER: 'always_on',
      });
    });

    after(async () => {
      await stopScenario(scenario);
      await otlp?.close();
    });

    it('starts no SDK: the callback carries no traceparent and nothing is exported', async () => {
      const s = scenario!;
      assert.match(s.worker!.output(), /traces off/);
      assert.doesNotMatch(s.api!.output(), /traces on/);
      await endARun(s);
      assert.equal(s.callbacks.received[0].headers.traceparent, undefined);
      // Both processes flush on SIGTERM: after it, an exporter that existed would have sent its batches.
      await stopScenario(s);
      scenario = undefined;
      if (process.env.TRACE_DUMP) console.log('4318 bound:', otlp !== undefined);
      if (otlp) assert.equal(otlp.requests, 0, 'no export request reached localhost:4318');
    });
  });
});
