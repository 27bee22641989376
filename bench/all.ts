// npm run bench: the three benchmarks in sequence, each on its own throwaway stack, then a summary of the ratios.
// Results: bench/results/latest.json, latest.md and latency.svg. Exits non-zero if any benchmark failed to run
// (a missed target is a figure to report, not a failure).
import { runEpisodesBench } from './episodes';
import { runPushBench } from './push';
import { runSweepBench } from './sweep';
import { log, nowMs, round, runMain } from './support';

const BENCHES = [
  { name: 'push', run: runPushBench },
  { name: 'episodes', run: runEpisodesBench },
  { name: 'sweep', run: runSweepBench },
] as const;

runMain(async () => {
  const only = (process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
  const summary: string[] = [];
  const failures: string[] = [];
  for (const bench of BENCHES) {
    if (only.length && !only.includes(bench.name)) continue;
    log(`\n=== ${bench.name} ===`);
    const start = nowMs();
    try {
      const result = await bench.run();
      summary.push(
        `${bench.name.padEnd(9)} ${JSON.stringify(result)} (${round((nowMs() - start) / 1000, 0)} s)`,
      );
    } catch (err) {
      failures.push(bench.name);
      console.error(
        `${bench.name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`,
      );
    }
  }
  log('\n=== summary ===');
  for (const line of summary) log(line);
  log('results: bench/results/latest.json, bench/results/latest.md, bench/results/latency.svg');
  if (failures.length) throw new Error(`benchmarks failed: ${failures.join(', ')}`);
});
