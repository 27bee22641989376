// A loopback callback receiver: records every request it gets and answers from a script, so tests can check
// what a launcher's endpoint would see. Signatures are verified by the tests with the npm standardwebhooks library;
// every signed body is checked here against the JSON Schema the OpenAPI document publishes for its event type
// (closed: an undocumented field fails too), and close() fails the suite that received one that does not match.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { callbackEventJsonSchemas, teamEventJsonSchemas } from '../../api/openapi';
import { waitUntil } from './waitUntil';

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
const compiled = (schemas: Record<string, Record<string, unknown>>) =>
  new Map(Object.entries(schemas).map(([type, schema]) => [type, ajv.compile(schema)]));
const validators = compiled(callbackEventJsonSchemas({ closed: true }));
/** A team endpoint's events (they carry a sequence; a run's callbacks do not). */
const teamEventValidators = compiled(teamEventJsonSchemas({ closed: true }));

/** Why a callback body does not match the published schema of its type; undefined when it does. */
export function callbackSchemaMismatch(body: string): string | undefined {
  let event: { type?: unknown; sequence?: unknown };
  try {
    event = JSON.parse(body) as { type?: unknown; sequence?: unknown };
  } catch {
    return 'the body is not JSON';
  }
  const type = String(event?.type);
  const validate = (event?.sequence !== undefined ? teamEventValidators : validators).get(type);
  if (!validate) return `no published schema for the event type ${JSON.stringify(event?.type)}`;
  return validate(event) ? undefined : `${type}: ${ajv.errorsText(validate.errors)}`;
}

export interface ReceivedCallback {
  headers: http.IncomingHttpHeaders;
  body: string;
  at: Date;
  /** What it was answered. */
  status: number;
}

export interface ScriptedAnswer {
  status: number;
  headers?: Record<string, string>;
  /** Hold the answer this long (a slow receiver). */
  delayMs?: number;
  /** Hold the answer until this settles (a receiver answering when the test says). */
  heldUntil?: Promise<unknown>;
}

export class CallbackReceiver {
  readonly received: ReceivedCallback[] = [];
  /** Signed callbacks whose body did not match the published schema of its type: what, and the body. */
  readonly schemaMismatches: string[] = [];
  /** Requests arrived and not answered yet (a slow receiver holds them), and the most there were at once. */
  open = 0;
  peakOpen = 0;
  private script: ScriptedAnswer[] = [];
  private fallback: ScriptedAnswer = { status: 204 };
  /** Answers by request path, before the script and the fallback (one host serving several tenants' paths). */
  private byPath = new Map<string, ScriptedAnswer>();
  private readonly sockets = new Set<import('node:net').Socket>();

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<CallbackReceiver> {
    let receiver: CallbackReceiver | undefined = undefined;
    const server = http.createServer((req, res) => receiver!.handle(req, res));
    receiver = new CallbackReceiver(server);
    server.on('connection', (socket) => {
      receiver!.sockets.add(socket);
      socket.on('close', () => receiver!.sockets.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hooks/flow`;
  }

  /** Answers the next requests with these, in order, then with the fallback (204 unless set). */
  answer(...answers: ScriptedAnswer[]): void {
    this.script.push(...answers);
  }

  /** Scripted answers not used yet. */
  get pendingAnswers(): number {
    return this.script.length;
  }

  answerAlways(answer: ScriptedAnswer): void {
    this.fallback = answer;
  }

  /** Answers every request to `pathname` (on this receiver's origin) with this, whatever the script says. */
  answerPathAlways(pathname: string, answer: ScriptedAnswer): void {
    this.byPath.set(pathname, answer);
  }

  /** A URL of this receiver's origin with another path. */
  urlOf(pathname: string): string {
    return new URL(pathname, this.url).toString();
  }

  async waitFor(count: number, timeoutMs = 15_000): Promise<ReceivedCallback[]> {
    await waitUntil(`${count} callbacks`, () => this.received.length >= count, {
      timeoutMs,
      intervalMs: 50,
      seen: () => `${this.received.length} callbacks`,
    });
    return this.received;
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    // Open from arrival until answered, or until the client gave up on it.
    let closed = false;
    const close = (): void => {
      if (!closed) this.open--;
      closed = true;
    };
    this.peakOpen = Math.max(this.peakOpen, ++this.open);
    res.once('close', close);
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const pathname = new URL(req.url ?? '/', 'http://receiver').pathname;
      const answer = this.byPath.get(pathname) ?? this.script.shift() ?? this.fallback;
      this.received.push({ headers: req.headers, body, at: new Date(), status: answer.status });
      // Callbacks are the signed requests (operator alerts, which some suites send here too, are not).
      const mismatch = req.headers['webhook-signature'] ? callbackSchemaMismatch(body) : undefined;
      if (mismatch) this.schemaMismatches.push(`${mismatch}\n  body: ${body}`);
      const send = (): void => {
        close();
        if (!res.destroyed) res.writeHead(answer.status, answer.headers).end();
      };
      if (answer.heldUntil) void answer.heldUntil.finally(send);
      else if (answer.delayMs) setTimeout(send, answer.delayMs);
      else send();
    });
  }

  /** Stops listening; fails when a callback received did not match its published schema. */
  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    if (this.schemaMismatches.length)
      throw new Error(
        `callbacks that do not match the published schema of their type:\n${this.schemaMismatches.join('\n')}`,
      );
  }
}
