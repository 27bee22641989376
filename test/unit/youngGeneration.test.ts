// The API and the worker hold V8's young generation at its initial size while they start
// (platform/youngGeneration.ts): the flag it sets at run time must still be read by this Node's V8, and the module
// must load before any other.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { GROW_YOUNG_GENERATION, HOLD_YOUNG_GENERATION } from '../../platform/youngGeneration';
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
    // A plain node: the new space's size after 40 MiB of surviving objects held, after 40 more held, and after 40
    // more released. Objects that survive scavenges are what grows it (as loading modules does); the first
    // scavenges commit its second half, hence the comparison from the first 40 MiB on. Were the hold not read at
    // run time, those first 40 MiB would take it to its maximum (32 MiB) and it could not grow after the release.
    const script = `
      const v8 = require('node:v8');
      const newSpace = () => v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size;
      const survivors = (mib) => Array.from({ length: mib * 20000 }, (_, i) => ({ i, s: 'x' + i }));
      const kept = [];
      v8.setFlagsFromString(process.argv[1]);
      kept.push(survivors(40));
      const held = newSpace();
      kept.push(survivors(40));
      const stillHeld = newSpace();
      v8.setFlagsFromString(process.argv[2]);
      kept.push(survivors(40));
      process.stdout.write(JSON.stringify([held, stillHeld, newSpace(), kept.length]));
    `;
    const flags = [HOLD_YOUNG_GENERATION, GROW_YOUNG_GENERATION];
    const child = spawnSync(process.execPath, ['-e', script, '--', ...flags], { encoding: 'utf8' });
    assert.equal(child.status, 0, child.stderr);
    const [held, stillHeld, released] = JSON.parse(child.stdout) as number[];
    assert.equal(stillHeld, held, `held: the new space grew from ${held} to ${stillHeld} bytes`);
    assert.ok(released > stillHeld, `released: the new space stayed at ${released} bytes`);
  });
});
