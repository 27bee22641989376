// The fault drill, small: the invariants of `npm run drill` (test/drill/scenario.ts) with 20 episodes across 5 runs
// through one worker SIGKILL, one Temporal restart, one Mongo restart, 30 % of push requests answered 500 then 20 %
// answered 429, and failing receivers; its questions answered from notifications, snoozed and escalated, and the
// first team's endpoints hearing every event they subscribed to. It runs on a throwaway Temporal and FerretDB of its own, as the full drill
// does: the shared test servers may be external, and other suites should never see a restart.
import assert from 'node:assert/strict';
import { FULL_FAULTS, formatDrill, runDrill } from './drill/scenario';
import { startServers } from './support';

describe('fault drill (small)', function () {
  this.timeout(300_000);

  it('20 episodes across 5 runs, emitted 3x from two processes, through a worker kill and server restarts: nothing lost, repeats only at the kill', async () => {
    const stack = await startServers('drill-test', { temporal: true, external: false });
    try {
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
      assert.equal(counts.faults.temporalRestarts, 1, 'Temporal was restarted');
      assert.equal(counts.faults.mongoRestarts, 1, 'Mongo was restarted');
      assert.deepEqual(counts.violations, [], `the drill's log:\n${lines.join('\n')}`);
      // It did what it says: questions answered from notifications, snoozed, escalated; endpoints owed events.
      const { questions, endpoints } = counts;
      assert.ok(questions.byAction > 0 && questions.snoozes.taken > 0, JSON.stringify(questions));
      assert.ok(questions.rungs.delivered > 0 && questions.closes.delivered > 0, JSON.stringify(questions));
      assert.ok(endpoints.endpoints === 4 && endpoints.delivered > 0, JSON.stringify(endpoints));
    } finally {
      await stack.stop();
    }
  });
});
