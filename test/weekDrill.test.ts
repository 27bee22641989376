// The week drill (test/drill/week.ts), short: one simulated day of two teams on the time-skipping server, with
// outages, quiet hours, do-not-disturb and bursts; nothing owed may be missing, nothing repeated. `npm run drill:week` (in `npm run drill`) runs seven days of three teams on seeds 2 and 3.
// WEEK_DRILL_SEED=<n>[,<n>...], WEEK_DRILL_DAYS and WEEK_DRILL_TEAMS reproduce any run.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { formatWeek, runWeekDrill } from './drill/week';
import { testStack } from './support/stack';
import { onTimeSkipping } from './support/timeSkipping';

const DAYS = Number(process.env.WEEK_DRILL_DAYS ?? 1);
const TEAMS = Number(process.env.WEEK_DRILL_TEAMS ?? 2);
const SEEDS = (process.env.WEEK_DRILL_SEED ?? '1')
  .split(',')
  .map(Number)
  .filter((n) => Number.isInteger(n));

describe('the week drill: nothing owed is lost', function () {
  this.timeout(Math.max(600_000, DAYS * TEAMS * 120_000));
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  for (const seed of SEEDS) {
    it(`seed ${seed}: ${DAYS} simulated day(s) of ${TEAMS} teams: every push, callback and operator alert delivered or given up visibly, none missing`, async () => {
      const report = await runWeekDrill({
        env,
        temporalAddress: env.connection.options.address,
        mongoUrl: testStack().mongoUrl,
        seed,
        days: DAYS,
        teams: TEAMS,
        peoplePerTeam: 3,
        log: (line) => console.log(`      ${line}`),
      });
      console.log(formatWeek(report).replace(/^/gm, '      '));
      assert.ok(
        report.push.owed > 0 && report.callback.owed > 0 && report.ops.owed > 0,
        'every family was owed',
      );
      assert.deepEqual(report.violations, []);
    });
  }
});
