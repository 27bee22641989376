// CPU per test file: each file's process (a worker of `mocha --parallel`, or the one process) notes the CPU it
// and the child processes it waited for (a worker or servers it started) used while the file ran, in the log the
// reporter named (FLOW_NOTIFY_TEST_CPU_LOG); the reporter prints the costliest files at the end. The suite is
// CPU-bound on two cores: its time is about the sum of these, plus the shared servers', over two.
'use strict';
const { appendFileSync, readFileSync } = require('node:fs');

const TICKS_PER_SECOND = 100; // USER_HZ, 100 on Linux

/** utime + stime + cutime + cstime of this process, in seconds (/proc/self/stat fields 14 to 17). */
function cpuSeconds() {
  const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ');
  return fields.slice(11, 15).reduce((sum, ticks) => sum + Number(ticks), 0) / TICKS_PER_SECOND;
}

let started;
exports.mochaHooks = {
  beforeAll() {
    started = process.env.FLOW_NOTIFY_TEST_CPU_LOG ? { cpu: cpuSeconds(), at: Date.now() } : undefined;
  },
  afterAll() {
    if (!started) return;
    const file = this.test?.parent?.suites?.[0]?.file;
    const line = {
      file,
      cpuSeconds: cpuSeconds() - started.cpu,
      wallSeconds: (Date.now() - started.at) / 1000,
    };
    appendFileSync(process.env.FLOW_NOTIFY_TEST_CPU_LOG, `${JSON.stringify(line)}\n`);
  },
};
