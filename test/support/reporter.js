// Mocha's spec reporter, then the 10 slowest tests (title, file, ms), then one plain closing line
// ("tests: N passed, N failed[, N skipped]") that CI reads. Under `mocha --parallel` this runs in the main process
// on the tests the workers send back, which carry their title, file and duration too.
'use strict';
const path = require('node:path');
const Mocha = require('mocha');

const SLOWEST = 10;

class SpecWithTotals extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const finished = [];
    const { EVENT_TEST_PASS, EVENT_TEST_FAIL, EVENT_RUN_END } = Mocha.Runner.constants;
    const note = (test) => {
      if (typeof test.duration === 'number')
        finished.push({ title: test.fullTitle(), file: test.file, ms: test.duration });
    };
    runner.on(EVENT_TEST_PASS, note);
    runner.on(EVENT_TEST_FAIL, note);
    runner.once(EVENT_RUN_END, () => {
      const slowest = finished.sort((a, b) => b.ms - a.ms).slice(0, SLOWEST);
      if (slowest.length) {
        process.stdout.write(`\nslowest ${slowest.length} tests:\n`);
        for (const { title, file, ms } of slowest) {
          const where = file ? path.relative(process.cwd(), file) : '?';
          process.stdout.write(`  ${String(ms).padStart(7)} ms  ${where}  ${title}\n`);
        }
      }
      const { passes, failures, pending } = this.stats;
      process.stdout.write(
        `\ntests: ${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}\n`,
      );
    });
  }
}

module.exports = SpecWithTotals;
