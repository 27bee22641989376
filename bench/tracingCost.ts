// What the tracing hooks cost with tracing off (OTEL_EXPORTER_OTLP_ENDPOINT unset), alone: the calls one episode
// makes on the worker's hot path (three push sends in their span helper, one callback attempt in its span with its
// trace headers), timed against the same calls without the helpers, in the same run. Off, no SDK is loaded, the
// API adds no middleware and the worker runs the plain workflow bundle (no interceptors), so these no-op API calls
// are all that tracing adds to an episode; bench:episodes measures the whole episode (its "CPU ms each"), far
// above this, where the difference drowns in its noise.
//
//   npx ts-node bench/tracingCost.ts
import type { SendOutcome } from '../domain/push';
import { inPushSendSpan, inSpan, SpanKind, traceHeaders } from '../platform/tracing';
import { median } from './support';

const N = 100_000;
const REPS = 7;
const ENDPOINT = 'https://fcm.googleapis.com/fcm/send/abc';
const outcome: SendOutcome = { result: 'delivered', status: 201, attempts: 1 };
const send = async (): Promise<SendOutcome> => outcome;
const attempt = async (): Promise<number> => Object.keys({ 'webhook-id': 'x' }).length;

/** One episode's traced calls. */
async function traced(): Promise<void> {
  for (let i = 0; i < 3; i++) await inPushSendSpan(ENDPOINT, send);
  await inSpan('callback attempt', { kind: SpanKind.CLIENT }, async () => {
    traceHeaders();
    return attempt();
  });
}

/** The same calls without the helpers. */
async function bare(): Promise<void> {
  for (let i = 0; i < 3; i++) await send();
  await attempt();
}

async function microsPerEpisode(episode: () => Promise<void>): Promise<number> {
  const start = process.hrtime.bigint();
  for (let i = 0; i < N; i++) await episode();
  return Number(process.hrtime.bigint() - start) / N / 1000;
}

void (async () => {
  for (let i = 0; i < 20_000; i++) await Promise.all([traced(), bare()]); // warm-up
  const rows: { traced: number; bare: number }[] = [];
  for (let rep = 0; rep < REPS; rep++) {
    // Alternating which goes first, so neither always runs on the warmer heap.
    const first = rep % 2 === 0 ? await microsPerEpisode(traced) : await microsPerEpisode(bare);
    const second = rep % 2 === 0 ? await microsPerEpisode(bare) : await microsPerEpisode(traced);
    rows.push(rep % 2 === 0 ? { traced: first, bare: second } : { traced: second, bare: first });
  }
  const extra = rows.map((r) => r.traced - r.bare);
  const fmt = (values: number[]) =>
    `${median(values).toFixed(2)} µs (${Math.min(...values).toFixed(2)}–${Math.max(...values).toFixed(2)})`;
  console.log(`tracing off, ${REPS} reps of ${N} episodes' traced calls (3 push sends, 1 callback attempt):`);
  console.log(`  with the span helpers  ${fmt(rows.map((r) => r.traced))} per episode`);
  console.log(`  without them           ${fmt(rows.map((r) => r.bare))} per episode`);
  console.log(`  what tracing off adds  ${fmt(extra)} per episode`);
})();
