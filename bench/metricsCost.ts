// What recording metrics costs, alone: the calls one episode makes (an emit, three pushes, the first-push
// histogram, a callback attempt) and one scrape of the registry, timed in a loop. bench:episodes with
// BENCH_METRICS=1 measures the same in context; this gives the floor under its noise.
import { Registry } from 'prom-client';
import { createMetrics } from '../platform/metrics';
const m = createMetrics(new Registry());
const N = 200_000;
const episode = () => {
  m.episodeStarted('api', 'run_finished');
  for (let i = 0; i < 3; i++) m.pushSent('delivered');
  m.firstPush('run_finished', new Date(Date.now() - 120).toISOString(), new Date());
  m.callbackAttempt('delivered', 204, 0.012);
};
for (let i = 0; i < 20000; i++) episode();
const t0 = process.hrtime.bigint();
for (let i = 0; i < N; i++) episode();
const t1 = process.hrtime.bigint();
void (async () => {
  const s0 = process.hrtime.bigint();
  for (let i = 0; i < 100; i++) await m.registry.metrics();
  const s1 = process.hrtime.bigint();
  console.log(
    `recording per episode: ${(Number(t1 - t0) / N / 1000).toFixed(2)} µs; one scrape of the registry: ${(Number(s1 - s0) / 100 / 1e6).toFixed(2)} ms`,
  );
})();
