// A loopback OTLP/HTTP trace receiver (what an OpenTelemetry Collector listens with on :4318): takes
// POST /v1/traces in either encoding the exporters speak (application/x-protobuf, decoded with the OTLP
// schema the OpenTelemetry exporter itself encodes with, or application/json) and keeps every span.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { gunzipSync } from 'node:zlib';
import { waitUntil } from './waitUntil';

export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  /** '' for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP's SpanKind number: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  kind: number;
  service: string;
  attributes: Record<string, unknown>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: number | string | { toString(): string };
  boolValue?: boolean;
  doubleValue?: number;
}
interface OtlpKeyValue {
  key: string;
  value?: OtlpValue;
}
interface OtlpSpan {
  traceId: Uint8Array | string;
  spanId: Uint8Array | string;
  parentSpanId?: Uint8Array | string;
  name: string;
  kind?: number;
  attributes?: OtlpKeyValue[];
}
interface OtlpRequest {
  resourceSpans?: {
    resource?: { attributes?: OtlpKeyValue[] };
    scopeSpans?: { spans?: OtlpSpan[] }[];
  }[];
}

interface ProtobufType {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: { defaults: boolean }): unknown;
}
// The exporter's own generated OTLP schema (protobufjs), so the receiver decodes what the exporter encodes.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const protoRoot = require('@opentelemetry/otlp-transformer/build/src/generated/root') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtobufType } } } } };
};
const EXPORT_REQUEST = protoRoot.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

const hex = (id: Uint8Array | string | undefined): string =>
  id === undefined ? '' : typeof id === 'string' ? id.toLowerCase() : Buffer.from(id).toString('hex');

function valueOf(value: OtlpValue | undefined): unknown {
  if (!value) return undefined;
  if (value.stringValue !== undefined) return value.stringValue;
  if (value.intValue !== undefined) return Number(value.intValue.toString());
  if (value.boolValue !== undefined) return value.boolValue;
  return value.doubleValue;
}

const attributesOf = (list: OtlpKeyValue[] = []): Record<string, unknown> =>
  Object.fromEntries(list.map((kv) => [kv.key, valueOf(kv.value)]));

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  /** Export requests received, whatever they held. */
  requests = 0;
  /** The encodings seen (content types). */
  readonly contentTypes = new Set<string>();

  private constructor(private readonly server: http.Server) {}

  static async start(port = 0): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | undefined = undefined;
    const server = http.createServer((req, res) => receiver!.handle(req, res));
    receiver = new OtlpReceiver(server);
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', resolve);
    });
    return receiver;
  }

  /** The base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (the exporter adds /v1/traces). */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((span) => span.traceId === traceId);
  }

  /** Waits until `done` holds for the spans so far (checked every 100 ms). */
  async waitUntil(done: (spans: ReceivedSpan[]) => boolean, what: string, timeoutMs = 30_000): Promise<void> {
    await waitUntil(`OTLP receiver: ${what}`, () => done(this.spans), {
      timeoutMs,
      seen: () => this.spans.map((s) => `${s.service} ${s.name} ${s.traceId}`),
    });
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end();
          return;
        }
        let body = Buffer.concat(chunks);
        if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
        const type = (req.headers['content-type'] ?? '').split(';')[0].trim();
        this.contentTypes.add(type);
        this.requests++;
        const request =
          type === 'application/json'
            ? (JSON.parse(body.toString('utf8')) as OtlpRequest)
            : (EXPORT_REQUEST.toObject(EXPORT_REQUEST.decode(body), { defaults: false }) as OtlpRequest);
        this.keep(request);
        // An empty ExportTraceServiceResponse: everything accepted.
        if (type === 'application/json') res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        else res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      } catch (err) {
        res.writeHead(400).end(String(err));
      }
    });
  }

  private keep(request: OtlpRequest): void {
    for (const resourceSpans of request.resourceSpans ?? []) {
      const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '');
      for (const scope of resourceSpans.scopeSpans ?? []) {
        for (const span of scope.spans ?? []) {
          this.spans.push({
            traceId: hex(span.traceId),
            spanId: hex(span.spanId),
            parentSpanId: hex(span.parentSpanId),
            name: span.name,
            kind: span.kind ?? 0,
            service,
            attributes: attributesOf(span.attributes),
          });
        }
      }
    }
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
