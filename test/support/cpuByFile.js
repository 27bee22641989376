// CPU per test file: each file's process (a worker of `mocha --parallel`, or the one process) notes the CPU it
// and the child processes it waited for (a worker or servers it started) used while the file ran, in the log the
// reporter named (FLOW_NOTIFY_TEST_CPU_LOG); the reporter prints the costliest files at the end. The suite is
// CPU-bound on two cores: its time is about the sum of these, plus the shared servers', over two.
'use strict';
const { appendFileSync, readFileSync } = require('node:fs');

const TICKS_PER_SECOND = 100; // USER_HZ, 100 on Linux

/**
 * This process's CPU (utime + stime) and its waited-for children's (cutime + cstime), in seconds (/proc/self/stat
 * fields 14 to 17).
 */
function cpuSeconds() {
  const ticks = readFileSync('/proc/self/stat', 'utf8').split(') ')[1].split(' ').slice(11, 15).map(Number);
  return {
    self: (ticks[0] + ticks[1]) / TICKS_PER_SECOND,
    children: (ticks[2] + ticks[3]) / TICKS_PER_SECOND,
  };
}

let started;
exports.mochaHooks = {
  beforeAll() {
    started = process.env.FLOW_NOTIFY_TEST_CPU_LOG ? { cpu: cpuSeconds(), at: Date.now() } : undefined;
  },
  afterAll() {
    if (!started) return;
    const file = this.test?.parent?.suites?.[0]?.file;
    const now = cpuSeconds();
    const childSeconds = now.children - started.cpu.children;
    const line = {
      file,
      cpuSeconds: now.self - started.cpu.self + childSeconds,
      childSeconds,
      wallSeconds: (Date.now() - started.at) / 1000,
      startedAt: started.at,
    };
    appendFileSync(process.env.FLOW_NOTIFY_TEST_CPU_LOG, `${JSON.stringify(line)}\n`);
  },
};
