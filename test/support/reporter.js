// Mocha's spec reporter, then the 10 slowest tests (title, file, ms), the 10 files that used the most CPU
// (cpuByFile.js; every file's in test-results/cpu-by-file.tsv), the suite's time, then one plain closing line
// ("tests: N passed, N failed[, N skipped]") that CI reads. Under `mocha --parallel` this runs in the main process
// on the tests the workers send back, which carry their title, file and duration too.
'use strict';
const { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = require('node:fs');
const { tmpdir } = require('node:os');
const path = require('node:path');
const Mocha = require('mocha');

const SLOWEST = 10;

class SpecWithTotals extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const finished = [];
    // Named before `mocha --parallel` starts its workers, which inherit it.
    const cpuDir = mkdtempSync(path.join(tmpdir(), 'flow-notify-test-cpu-'));
    process.env.FLOW_NOTIFY_TEST_CPU_LOG = path.join(cpuDir, 'files.jsonl');
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
      printCpuByFile(process.env.FLOW_NOTIFY_TEST_CPU_LOG);
      rmSync(cpuDir, { recursive: true, force: true });
      const { passes, failures, pending, duration } = this.stats;
      // The suite's own time, set-up and install excluded: what the six-minute goal is about.
      if (typeof duration === 'number') process.stdout.write(`\nsuite: ${(duration / 1000).toFixed(0)} s\n`);
      process.stdout.write(
        `\ntests: ${passes} passed, ${failures} failed${pending ? `, ${pending} skipped` : ''}\n`,
      );
    });
  }
}

function printCpuByFile(log) {
  let lines;
  try {
    lines = readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line));
  } catch {
    return; // no file finished
  }
  lines.sort((a, b) => b.cpuSeconds - a.cpuSeconds);
  const where = (file) => (file ? path.relative(process.cwd(), file) : '?');
  // Every file, with when it started (seconds into the run): where the two cores sat idle shows as gaps.
  const first = Math.min(...lines.map((l) => l.startedAt));
  mkdirSync('test-results', { recursive: true });
  writeFileSync(
    path.join('test-results', 'cpu-by-file.tsv'),
    [
      'cpu_s\tof_which_children_s\twall_s\tstart_s\tfile',
      ...lines.map((l) =>
        [
          l.cpuSeconds.toFixed(1),
          l.childSeconds.toFixed(1),
          l.wallSeconds.toFixed(0),
          ((l.startedAt - first) / 1000).toFixed(0),
          where(l.file),
        ].join('\t'),
      ),
    ].join('\n') + '\n',
  );
  const total = lines.reduce((sum, line) => sum + line.cpuSeconds, 0);
  process.stdout.write(
    `\nCPU of the test files: ${total.toFixed(0)} s in all (the shared servers' not counted); the most:\n`,
  );
  for (const { file, cpuSeconds, wallSeconds } of lines.slice(0, SLOWEST)) {
    process.stdout.write(
      `  ${cpuSeconds.toFixed(1).padStart(6)} s CPU  ${wallSeconds.toFixed(0).padStart(4)} s  ${where(file)}\n`,
    );
  }
}

module.exports = SpecWithTotals;
