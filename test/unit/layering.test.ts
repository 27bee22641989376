// Imports run downhill: a file may import from its own folder or a lower one, type imports and import() included.
// The order is written here once; a new folder fails this test until it is given its place.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '../..');

/** Low to high. Each entry is a folder, or a file at the root; one rank may hold several. */
const LAYERS: readonly (readonly string[])[] = [
  ['lib'], // tiny generic helpers: imports nothing of the project
  ['config.ts'],
  ['domain'],
  ['contract'], // what both sides of Temporal share: ids, type names, args, signals, search attributes
  ['net'],
  ['observability'],
  ['store'],
  ['stack'],
  ['client'], // starting workflows, the connection, the runner
  ['workflows'],
  ['activities'],
  ['operator'], // operator tools: explain, history decoding, rendering
  ['runs'], // the runs service
  ['api'],
  ['worker.ts', 'cli.ts', 'index.ts', 'scripts', 'bench'],
];

/** Not part of the application's layers. */
const SKIPPED = new Set(['test', 'bench', 'tools', 'node_modules', 'dist', '.data', '.git']);

const rank = new Map(LAYERS.flatMap((names, i) => names.map((name) => [name, i] as const)));

/** The layer a project path belongs to: its first segment (a folder, or a root file). */
const layerOf = (path: string): string => path.split('/')[0];

function sourceFiles(dir = ROOT): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return SKIPPED.has(entry.name) ? [] : sourceFiles(path);
    return entry.name.endsWith('.ts') ? [relative(ROOT, path)] : [];
  });
}

/** Every module a file names: import / export … from, import type, side-effect imports, import(), require(). */
function specifiers(file: string): string[] {
  const source = readFileSync(join(ROOT, file), 'utf8');
  return ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName);
}

describe('layering', () => {
  const files = sourceFiles();

  it('finds the project’s files', () => {
    assert.ok(files.length > 50, `only ${files.length} files found under ${ROOT}`);
  });

  it('every file sits in a layer of the order', () => {
    const unplaced = files.filter((file) => !rank.has(layerOf(file)));
    if (unplaced.length) assert.fail(`not in LAYERS (give each its place):\n  ${unplaced.join('\n  ')}`);
  });

  it('no file imports a higher layer (type imports and import() included)', () => {
    const upward: string[] = [];
    for (const file of files) {
      const own = rank.get(layerOf(file));
      if (own === undefined) continue;
      for (const spec of specifiers(file)) {
        if (!spec.startsWith('.')) continue; // a package
        const target = relative(ROOT, resolve(ROOT, dirname(file), spec));
        const theirs = rank.get(layerOf(target));
        if (theirs !== undefined && theirs > own)
          upward.push(`${file} → ${spec} (${layerOf(file)} imports ${layerOf(target)})`);
      }
    }
    if (upward.length) assert.fail(`imports that run uphill:\n  ${upward.join('\n  ')}`);
  });
});
