// Traces (OpenTelemetry). Off unless an OTLP endpoint is configured (config.tracing): then each process starts
// the SDK once (tracingSdk.ts, loaded only then) and the helpers here record real spans. Off, nothing is loaded
// or started and they are calls on the OpenTelemetry API's no-op tracer.
import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Span,
} from '@opentelemetry/api';
import type { TracingConfig } from '../config';
import type { SendOutcome } from '../domain/push';
import type { Tracing } from './tracingSdk';

/**
 * The workflow interceptors of Temporal's OpenTelemetry package: a workflow bundle built with them carries the
 * trace from the start through the workflow to its activities. Tracing off, bundles are built without them.
 * `from`: resolved from that folder's node_modules (a build's copy), so the bundle holds one @temporalio/workflow.
 */
export const tracingWorkflowInterceptors = (from?: string): string =>
  require.resolve(
    '@temporalio/interceptors-opentelemetry/lib/workflow-interceptors',
    from ? { paths: [from] } : undefined,
  );

export type { Tracing };

/** Starts the SDK when tracing is on; `serviceName` unless OTEL_SERVICE_NAME names the service. */
export async function startTracing(
  config: TracingConfig | undefined,
  serviceName: string,
): Promise<Tracing | undefined> {
  if (!config) return undefined;
  const { startTracingSdk } = await import('./tracingSdk');
  return startTracingSdk(config, serviceName);
}

const tracer = () => trace.getTracer('flow-notify');

export interface SpanOptions<T> {
  kind?: SpanKind;
  attributes?: Attributes;
  /** What only the result tells (a status code). */
  resultAttributes?: (result: T) => Attributes;
  /** A result that is a failure though nothing threw (a 5xx answer). */
  failed?: (result: T) => boolean;
}

/**
 * Runs `fn` in a span, a child of the active one; the span ends when `fn` settles, marked as an error if it
 * throws or its result is `failed`.
 */
export function inSpan<T>(name: string, options: SpanOptions<T>, fn: (span: Span) => Promise<T>): Promise<T> {
  return tracer().startActiveSpan(
    name,
    { kind: options.kind ?? SpanKind.INTERNAL, attributes: options.attributes },
    async (span) => {
      try {
        const result = await fn(span);
        if (options.resultAttributes) span.setAttributes(options.resultAttributes(result));
        if (options.failed?.(result)) span.setStatus({ code: SpanStatusCode.ERROR });
        return result;
      } catch (err) {
        span.recordException(err instanceof Error ? err : String(err));
        span.setStatus({ code: SpanStatusCode.ERROR, message: String(err).split('\n')[0] });
        throw err;
      } finally {
        span.end();
      }
    },
  );
}

/**
 * A server span for one incoming request. `trusted`: the caller's headers, when the request may continue the
 * caller's trace (`traceparent`, which also carries its sampling decision); absent, the span is a root of its
 * own. Baggage is never taken in: nothing here reads it, and it would ride into workflow headers and on to the
 * outbound calls of other requests. `fn` runs inside it; `describe` names it and adds attributes once the answer
 * is known.
 */
export function inServerSpan(
  trusted: Record<string, string | string[] | undefined> | undefined,
  fn: () => Promise<void>,
  describe: () => { name: string; attributes: Attributes; failed: boolean },
): Promise<void> {
  const parent = trusted
    ? propagation.deleteBaggage(propagation.extract(ROOT_CONTEXT, trusted))
    : ROOT_CONTEXT;
  return context.with(parent, () =>
    tracer().startActiveSpan('request', { kind: SpanKind.SERVER, root: !trusted }, async (span) => {
      try {
        await fn();
      } finally {
        const { name, attributes, failed } = describe();
        span.updateName(name);
        span.setAttributes(attributes);
        if (failed) span.setStatus({ code: SpanStatusCode.ERROR });
        span.end();
      }
    }),
  );
}

/** One push send as a client span: the push service's host, then the sender's verdict on the endpoint. */
export function inPushSendSpan(endpoint: string, send: () => Promise<SendOutcome>): Promise<SendOutcome> {
  return inSpan(
    'push send',
    {
      kind: SpanKind.CLIENT,
      attributes: serverAddress(endpoint),
      resultAttributes: (outcome) => ({
        'push.result': outcome.result,
        'push.attempts': outcome.attempts,
        ...(outcome.status !== undefined ? { 'http.response.status_code': outcome.status } : {}),
      }),
      failed: (outcome) => outcome.result !== 'delivered',
    },
    send,
  );
}

/** The host an outbound call goes to, as the span attribute (never the URL: its path or query may hold a token). */
export function serverAddress(url: string): Attributes {
  try {
    return { 'server.address': new URL(url).hostname };
  } catch {
    return {};
  }
}

/**
 * The active span as W3C Trace Context headers (`traceparent`, `tracestate`) for an outbound call; none when
 * tracing is off. Never baggage: whatever a workflow's headers carry (histories from before it was refused at
 * the door included) stays inside.
 */
export function traceHeaders(): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(propagation.deleteBaggage(context.active()), carrier);
  return carrier;
}

export { SpanKind };
