// npm run drill: the fault drill at full size, on a stack of its own so it can restart the servers.
//   npm run drill -- [--runs 50] [--episodes-per-run 4]
// Prints the counts (sent, repeated, lost, ...) and the invariants; exits 1 when one did not hold.
import { parseArgs } from 'node:util';
import { startServers } from '../support';
import { formatDrill, FULL_FAULTS, runDrill } from './scenario';

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '50' },
      'episodes-per-run': { type: 'string', default: '4' },
      json: { type: 'boolean', default: false },
    },
  });
  const runs = Number(values.runs);
  const episodesPerRun = Number(values['episodes-per-run']);
  const started = Date.now();
  // Servers of its own, whatever MONGO_URL / TEMPORAL_ADDRESS say: the drill restarts them.
  const stack = await startServers('drill', { temporal: true, external: false });
  const log = (line: string) =>
    console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`);
  log(
    `drill: stack up (mongo ${stack.mongoUrl}, temporal ${stack.temporalAddress}); ${runs} runs x ${episodesPerRun} episodes`,
  );
  try {
    const counts = await runDrill({
      stack,
      runs,
      episodesPerRun,
      faults: FULL_FAULTS,
      log,
      cliConcurrency: 2,
      runConcurrency: 10,
      // Generous: on a small shared machine a freshly started worker can take tens of seconds per task.
      stepTimeoutMs: 600_000,
      settleTimeoutMs: 600_000,
    });
    console.log(formatDrill(counts));
    if (values.json) console.log(JSON.stringify(counts, null, 2));
    return counts.violations.length ? 1 : 0;
  } finally {
    await stack.stop();
  }
}

// Ctrl-C: exit through process.exit so the stack's and the workers' exit hooks kill every child.
process.once('SIGINT', () => process.exit(130));
process.once('SIGTERM', () => process.exit(143));
main().then(
  (code) => process.exit(code),
  (err) => {
    console.error(`drill: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    process.exit(1);
  },
);
