// An entry run from sources (npm start's worker and API, the tests' worker processes): ts-node in its main thread
// only. Its worker threads (the workflow threads run the prebuilt bundle, plain JavaScript) must not load ts-node
// and TypeScript as well, which a `-r ts-node/register` flag does: threads inherit the process's flags.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../../platform/embedded';
import { sourceEntryArgs } from '../../scripts/sourceEntry';

/** A TypeScript entry that prints whether it is the main module and whether its worker thread can load .ts. */
const ENTRY = `
import { Worker } from 'node:worker_threads';
const typed: string = 'typescript ran';
const thread = new Worker("require('node:worker_threads').parentPort.postMessage(typeof require.extensions['.ts'])", { eval: true });
thread.once('message', (inThread: string) => {
  console.log(JSON.stringify({ typed, main: require.main === module, inThread, argv: process.argv.slice(2) }));
  void thread.terminate();
});
`;

describe('an entry run from sources', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'flow-notify-entry-'));
    writeFileSync(path.join(dir, 'entry.ts'), ENTRY);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('runs as the main module with its arguments, and its worker threads load no ts-node', () => {
    const child = spawnSync(
      process.execPath,
      sourceEntryArgs(path.join(dir, 'entry.ts'), '--user', 'alice'),
      {
        cwd: PROJECT_ROOT,
        encoding: 'utf8',
      },
    );
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), {
      typed: 'typescript ran',
      main: true,
      inThread: 'undefined',
      argv: ['--user', 'alice'],
    });
  });
});
