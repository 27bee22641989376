// The API and the worker hold V8's young generation at its initial size while they start
// (platform/youngGeneration.ts): the flag it sets at run time must still be read by this Node's V8, and the module
// must load before any other.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import {
  GROW_YOUNG_GENERATION,
  HOLD_YOUNG_GENERATION,
  WORKFLOW_THREAD_SEMI_SPACE_MB,
} from '../../platform/youngGeneration';
import { PROJECT_ROOT } from '../../platform/embedded';

describe('young generation of the API and the worker', () => {
  for (const [entry, spec] of [
    ['api/server.ts', '../platform/youngGeneration'],
    ['worker.ts', './platform/youngGeneration'],
  ]) {
    it(`${entry} imports platform/youngGeneration before any other module`, () => {
      const source = readFileSync(path.join(PROJECT_ROOT, entry), 'utf8');
      const first = ts.preProcessFile(source, true, true).importedFiles[0]?.fileName;
      assert.equal(first, spec);
    });
  }

  it('set at run time, the hold keeps the young generation at its size and the release lets it grow', () => {
    // A plain node: the new space's largest size while 40 MiB of surviving objects are made and held, while 40 more
    // are, and while 40 more are after the release. Objects that survive scavenges are what grows it (as loading
    // modules does); the first scavenges commit its second half, hence the comparison from the first 40 MiB on.
    // The largest size, because V8 may also shrink the space when allocation slows (a loaded machine): a shrink is
    // not what the hold is about. Were the hold not read at run time, those first 40 MiB would take it to its
    // maximum (32 MiB) and it could not grow after the release.
    const script = `
      const v8 = require('node:v8');
      const newSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
      const kept = [];
      const largestWhileKeeping = (mib) => {
        let largest = 0;
        for (let m = 0; m < mib; m++) {
          kept.push(Array.from({ length: 20000 }, (_, i) => ({ i, s: 'x' + i })));
          largest = Math.max(largest, newSpace());
        }
        return largest;
      };
      v8.setFlagsFromString(process.argv[1]);
      const held = largestWhileKeeping(40);
      const stillHeld = largestWhileKeeping(40);
      v8.setFlagsFromString(process.argv[2]);
      const released = largestWhileKeeping(40);
      process.stdout.write(JSON.stringify([held, stillHeld, released, kept.length]));
    `;
    const flags = [HOLD_YOUNG_GENERATION, GROW_YOUNG_GENERATION];
    const child = spawnSync(process.execPath, ['-e', script, '--', ...flags], { encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    const [held, stillHeld, released] = JSON.parse(child.stdout) as number[];
    assert.ok(stillHeld <= held, `held: the new space grew from ${held} to ${stillHeld} bytes`);
    assert.ok(released > stillHeld, `released: the new space stayed at ${released} bytes`);
  });

  it("caps the young generation of a thread created meanwhile (the workflow thread's), and only of that one", function () {
    // Bounded work (three threads' allocations), CPU-bound: on a loaded machine it takes several times as long.
    this.timeout(120_000);
    // Three threads that each keep allocating (survivors included, so the new space grows): one created inside
    // withWorkflowThreadYoungGenerationCapped, one before and one after it: only the second is capped.
    const script = `
      const { Worker } = require('node:worker_threads');
      const { withWorkflowThreadYoungGenerationCapped } = require('./platform/youngGeneration');
      const busy = \`
        const v8 = require('node:v8');
        let kept = [];
        for (let i = 0; i < 4e6; i++) { kept.push({ i, s: 'x' + i }); if (kept.length > 300000) kept = []; }
        const space = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
        require('node:worker_threads').parentPort.postMessage(space);
      \`;
      // A thread's isolate is set up once it is online (the SDK's Worker.create waits for its workflow thread).
      const start = () => new Promise((resolve) => {
        const thread = new Worker(busy, { eval: true });
        const size = new Promise((done) => thread.once('message', done));
        thread.once('online', () => resolve({ size }));
      });
      (async () => {
        const before = await start();
        const capped = await withWorkflowThreadYoungGenerationCapped(start, true);
        const after = await start();
        const sizes = await Promise.all([before, capped, after].map((thread) => thread.size));
        process.stdout.write(JSON.stringify(sizes));
        process.exit(0);
      })();
    `;
    const child = spawnSync(process.execPath, ['-r', 'ts-node/register', '-e', script], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
    });
    assert.equal(child.status, 0, child.stderr);
    const [before, capped, after] = JSON.parse(child.stdout) as number[];
    const cap = 2 * WORKFLOW_THREAD_SEMI_SPACE_MB * 2 ** 20; // both semi-spaces
    assert.ok(capped <= cap, `the thread created meanwhile has a new space of ${capped} bytes (cap ${cap})`);
    assert.ok(before > cap, `the thread created before was capped too (${before} bytes)`);
    assert.ok(after > cap, `the thread created after was capped too (${after} bytes)`);
  });
});
