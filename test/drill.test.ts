// The fault drill, small: the invariants of `npm run drill` (bench/drillScenario.ts) on the shared test stack,
// with 20 episodes across 5 runs through one worker SIGKILL, one Temporal restart, one Mongo restart, 30 % of
// push requests answered 500 then 20 % answered 429, and failing receivers. It restarts the shared servers on
// their ports and data and leaves them running; .mocharc.js runs it last.
import assert from 'node:assert/strict';
import { FULL_FAULTS, formatDrill, runDrill } from '../bench/drillScenario';
import { testStack } from './support/stack';

describe('fault drill (small)', function () {
  this.timeout(300_000);

  it('20 episodes across 5 runs, emitted 3x from two processes, through a worker kill and server restarts: nothing lost, repeats only at the kill', async function () {
    const stack = testStack();
    if (!stack.mongoServer || !stack.temporalServer) this.skip(); // external servers: nothing to restart
    const lines: string[] = [];
    const counts = await runDrill({
      stack,
      runs: 5,
      episodesPerRun: 4,
      faults: { ...FULL_FAULTS, workerKills: 1 },
      log: (line) => lines.push(line),
      cliConcurrency: 2,
      settleTimeoutMs: 150_000,
      stepTimeoutMs: 120_000,
    });
    console.log(formatDrill(counts).replace(/^/gm, '      '));
    assert.equal(counts.episodes, 20);
    assert.ok(stack.mongoServer.running && stack.temporalServer.running, 'the shared servers are back up');
    assert.deepEqual(counts.violations, [], `the drill's log:\n${lines.join('\n')}`);
  });
});
