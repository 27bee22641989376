// A loopback Slack incoming webhook: answers `ok` with 200 as Slack does, and refuses a body whose shape Slack's
// documentation does not allow with 400 `invalid_blocks` (or `invalid_payload` when it is not JSON), so a wrong
// shape fails the sender's attempt, and the test that counts what arrived.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { slackShapeProblems } from './slackShape';

export interface SlackPost {
  headers: http.IncomingHttpHeaders;
  body: string;
  /** What Slack would have said: 200 `ok`, or the refusal. */
  status: number;
  problems: string[];
}

/** Slack's incoming webhooks refuse a body over this (its documented limit is on text; this bounds the stand-in). */
const MAX_BODY_BYTES = 1024 * 1024;

export class SlackStandIn {
  readonly posts: SlackPost[] = [];

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<SlackStandIn> {
    let standIn: SlackStandIn | undefined = undefined;
    const server = http.createServer((req, res) => standIn!.handle(req, res));
    standIn = new SlackStandIn(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return standIn;
  }

  /** Shaped like a Slack webhook URL's path (the host is loopback). */
  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/services/T000/B000/XXXX`;
  }

  /** The posts Slack would have shown (answered `ok`), parsed. */
  get accepted(): { text: string; blocks: Record<string, unknown>[] }[] {
    return this.posts.filter((p) => p.status === 200).map((p) => JSON.parse(p.body));
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_BODY_BYTES) chunks.push(chunk);
    });
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const [status, answer, problems] = this.judge(req, body, size);
      this.posts.push({ headers: req.headers, body, status, problems });
      res.writeHead(status, { 'content-type': 'text/plain' }).end(answer);
    });
  }

  private judge(req: http.IncomingMessage, body: string, size: number): [number, string, string[]] {
    if (req.method !== 'POST') return [405, 'invalid_request', [`method ${req.method}`]];
    if (size > MAX_BODY_BYTES) return [400, 'invalid_payload', ['the body is too large']];
    let message: unknown;
    try {
      message = JSON.parse(body);
    } catch {
      return [400, 'invalid_payload', ['the body is not JSON']];
    }
    const problems = slackShapeProblems(message);
    return problems.length ? [400, 'invalid_blocks', problems] : [200, 'ok', []];
  }

  close(): Promise<void> {
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeAllConnections();
    return closed;
  }
}
