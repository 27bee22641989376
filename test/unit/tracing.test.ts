// Traces without servers: which variables turn them on (and which stop start-up), and that off, nothing is
// started: the helpers run their work and carry no context.
import assert from 'node:assert/strict';
import { ConfigError, loadConfig } from '../../config';
import { inSpan, startTracing, traceHeaders } from '../../platform/tracing';

const BASE = { MONGO_URL: 'mongodb://127.0.0.1:1/', AUTH_JWT_SECRET: 'x'.repeat(32) };
const tracingOf = (env: Record<string, string>) => loadConfig({ ...BASE, ...env }).tracing;

describe('tracing', () => {
  it('is off unless an OTLP endpoint is set', () => {
    assert.equal(tracingOf({}), undefined);
    assert.equal(tracingOf({ OTEL_SERVICE_NAME: 'x', OTEL_TRACES_SAMPLER: 'always_on' }), undefined);
    assert.deepEqual(tracingOf({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }), {
      protocol: 'http/protobuf',
    });
    assert.deepEqual(tracingOf({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://c.example/v1/traces' }), {
      protocol: 'http/protobuf',
    });
  });

  it('stays off when the SDK is disabled or the traces exporter is none', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    assert.equal(tracingOf({ ...on, OTEL_SDK_DISABLED: 'true' }), undefined);
    assert.equal(tracingOf({ ...on, OTEL_TRACES_EXPORTER: 'none' }), undefined);
    assert.ok(tracingOf({ ...on, OTEL_TRACES_EXPORTER: 'otlp' }));
  });

  it('takes the protocol, the traces-only variable first', () => {
    const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    assert.equal(tracingOf({ ...on, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })?.protocol, 'http/json');
    assert.equal(
      tracingOf({
        ...on,
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf',
      })?.protocol,
      'http/protobuf',
    );
  });

  it('stops start-up on an endpoint that is no URL, a protocol it cannot speak, an unknown exporter', () => {
    const refused = (env: Record<string, string>, pattern: RegExp) =>
      assert.throws(
        () => tracingOf(env),
        (err: unknown) => err instanceof ConfigError && pattern.test(err.message),
      );
    refused({ OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }, /OTEL_EXPORTER_OTLP_ENDPOINT/);
    refused({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'ftp://c/' }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/);
    refused(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
      /OTEL_EXPORTER_OTLP_PROTOCOL must be one of http\/protobuf, http\/json/,
    );
    refused(
      { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'zipkin' },
      /OTEL_TRACES_EXPORTER/,
    );
  });

  it('off: nothing is started, spans are no-ops that still run their work, no context is carried', async () => {
    assert.equal(await startTracing(undefined, 'flow-notify-test'), undefined);
    const result = await inSpan('work', {}, async (span) => {
      assert.equal(span.isRecording(), false);
      return traceHeaders();
    });
    assert.deepEqual(result, {});
    await assert.rejects(
      inSpan('failing work', {}, () => Promise.reject(new Error('boom'))),
      /boom/,
    );
  });
});
