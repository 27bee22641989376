// The OpenTelemetry SDK of one process, loaded and started only when tracing is on (platform/tracing.ts).
// Spans go out in batches over OTLP/HTTP; the endpoint, headers, timeout, sampler, batch delays, propagators
// and resource attributes come from the standard OTEL_* variables, which the SDK reads itself.
import { OTLPTraceExporter as OtlpJsonExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OtlpProtobufExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { envDetectorSync, Resource } from '@opentelemetry/resources';
import { BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import {
  makeWorkflowExporter,
  OpenTelemetryActivityInboundInterceptor,
  OpenTelemetryActivityOutboundInterceptor,
  OpenTelemetryWorkflowClientInterceptor,
} from '@temporalio/interceptors-opentelemetry';
import type { ClientInterceptors } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';
import type { TracingConfig } from '../config';

/** The SDK started for one process, and what its Temporal client and worker need to carry the trace. */
export interface Tracing {
  /** For `new Client({ interceptors })`: workflow starts and signals carry the active span. */
  clientInterceptors: ClientInterceptors;
  /** For Worker.create: activity interceptors and the sink workflow spans leave the sandbox through. */
  workerOptions: Required<Pick<WorkerOptions, 'interceptors' | 'sinks'>>;
  /** Exports what is still buffered, then stops. */
  shutdown(): Promise<void>;
}

export function startTracingSdk(config: TracingConfig, serviceName: string): Tracing {
  // Ours over the SDK's defaults, OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES over ours.
  const resource = new Resource(
    Resource.default()
      .merge(new Resource({ 'service.name': serviceName }))
      .merge(envDetectorSync.detect()).attributes,
  );
  const exporter = config.protocol === 'http/json' ? new OtlpJsonExporter() : new OtlpProtobufExporter();
  const processor = new BatchSpanProcessor(exporter);
  const provider = new NodeTracerProvider({ resource, spanProcessors: [processor] });
  // Global: the API's tracer, the AsyncLocalStorage context and the W3C propagator (OTEL_PROPAGATORS).
  provider.register();
  return {
    clientInterceptors: { workflow: [new OpenTelemetryWorkflowClientInterceptor()] },
    workerOptions: {
      interceptors: {
        activity: [
          (ctx) => ({
            inbound: new OpenTelemetryActivityInboundInterceptor(ctx),
            outbound: new OpenTelemetryActivityOutboundInterceptor(ctx),
          }),
        ],
      },
      // The workflow interceptors' spans are made in the sandbox and handed out through this sink.
      sinks: { exporter: makeWorkflowExporter(processor, resource) },
    },
    shutdown: () => provider.shutdown(),
  };
}
