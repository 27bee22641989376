// Mocha runs the TypeScript sources through ts-node; test/support/stack.ts starts the real servers once and
// shares them with the parallel workers. The suites run side by side (`jobs` files at a time): they mostly wait
// on the servers, and each has its own database, task queue and sweep schedule (testConfig), so none sees another's.
// `npx mocha test/x.test.ts` runs just that file, in this process: mocha adds command-line files to the configured
// spec, so the whole-suite list applies only when none are named.
const fs = require('node:fs');
const path = require('node:path');

const namedFiles = process.argv.slice(2).filter((arg) => /\.test\.ts$/.test(arg));

// The Go servers the suites start (FerretDB, the Temporal dev server) inherit this: their heaps are small, and
// collecting at 5x the live heap instead of 2x cut a FerretDB-bound suite's CPU by a fifth (the run is CPU-bound).
// Set GOGC yourself to override it.
process.env.GOGC ??= '400';

/**
 * The longest files first, so that none of them starts last and runs on alone while the others are done: first
 * those that mostly wait (on burst windows, restarts, rungs: long, but light on the two cores), then the heavy long
 * ones (the drills, the fuzzer). More files run at once than there are cores because so many of them wait: with six,
 * the cores sat a quarter idle for a minute and a half in mid-run. The other files follow by name, the unit files
 * last: each takes a second or two, so they fill the cores while the longer ones finish.
 */
const LONGEST_FIRST = [
  'test/pushBurst.test.ts',
  'test/pacing.test.ts',
  'test/callbackRestarts.test.ts',
  'test/drill.test.ts',
  'test/weekDrill.test.ts',
  'test/fuzz.part1.test.ts',
  'test/fuzz.part2.test.ts',
  'test/fuzz.part3.test.ts',
  'test/escalation.test.ts',
  'test/transitions.test.ts',
  'test/opsRetry.test.ts',
  'test/digestHistory.test.ts',
  'test/lifecycle.test.ts',
  'test/identity.test.ts',
  'test/startup.test.ts',
  'test/explain.test.ts',
  'test/temporalTls.test.ts',
  'test/scaleOut.test.ts',
  'test/dist.test.ts',
  'test/studio.test.ts',
  'test/ops.test.ts',
  'test/callbackLog.test.ts',
  'test/familyIndependence.test.ts',
  'test/pushPartial.test.ts',
  'test/ferretdbConformance.test.ts',
  'test/ferretdbPushdown.test.ts',
  'test/callback.test.ts',
  'test/workflows/digest.test.ts',
  'test/workflows/callbackSchedule.test.ts',
  'test/unit/replay.test.ts',
];

function testFiles(dir) {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) return testFiles(file);
      return entry.name.endsWith('.test.ts') ? [file] : [];
    })
    .sort();
}

function wholeSuite() {
  const all = testFiles('test');
  const first = LONGEST_FIRST.filter((file) => all.includes(file));
  const rest = all.filter((file) => !first.includes(file));
  const unit = (file) => file.startsWith('test/unit/');
  return [...first, ...rest.filter((file) => !unit(file)), ...rest.filter(unit)];
}

module.exports = {
  require: ['ts-node/register', 'test/support/stack.ts', 'test/support/cpuByFile.js'],
  spec: namedFiles.length ? [] : wholeSuite(),
  reporter: 'test/support/reporter.js',
  // One named file runs in this process (no worker to start; `.only` and a debugger work as usual).
  parallel: namedFiles.length !== 1,
  jobs: 8,
  timeout: 60000,
  exit: true,
};
