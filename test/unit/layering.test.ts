// Imports run downhill: which top-level folder (or root file) may import which is written here once, as a map
// of allowed edges, type imports and import() included; a file may always import from its own folder. A new
// folder fails this test until it is given its place.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import ts from 'typescript';

const ROOT = resolve(__dirname, '../..');

const BASE = ['config.ts', 'domain', 'contract', 'platform'] as const;
/** What each layer may import. Each entry is a folder, or a file at the root. */
const ALLOWED: Readonly<Record<string, readonly string[]>> = {
  domain: [], // pure: run status, outcomes, payloads, rules
  'config.ts': ['domain'],
  contract: ['domain'], // what both sides of Temporal share: ids, type names, args, signals, search attributes
  platform: ['config.ts', 'domain', 'contract'], // logs, metrics, tracing, deadlines, the embedded servers, HTTP glue
  store: [...BASE], // one module per collection, a family's collections in its folder
  delivery: [...BASE, 'store'], // each family's outbound mechanism: the push fan-out, the signed callback, the guard
  client: [...BASE, 'store'], // starting workflows, the connection, the runner
  workflows: ['domain', 'contract'], // deterministic: nothing that does I/O
  activities: [...BASE, 'store', 'delivery', 'client'],
  operator: [...BASE, 'store', 'client'], // explain, history decoding, rendering
  runs: [...BASE, 'store', 'client'], // the runs service
  api: [...BASE, 'store', 'delivery', 'client', 'operator', 'runs'],
  'worker.ts': [...BASE, 'store', 'delivery', 'client', 'workflows', 'activities', 'runs'],
  'cli.ts': [...BASE, 'store', 'client', 'operator', 'runs'],
  'index.ts': [...BASE, 'store', 'delivery', 'client', 'operator', 'runs', 'api', 'worker.ts'],
  scripts: [...BASE, 'store', 'delivery', 'client', 'operator', 'runs', 'api', 'worker.ts', 'workflows'],
};

/** Not part of the application's layers. */
const SKIPPED = new Set(['test', 'bench', 'tools', 'node_modules', 'dist', '.data', '.git']);

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

  it('every file sits in a layer of the map', () => {
    const unplaced = files.filter((file) => !(layerOf(file) in ALLOWED));
    if (unplaced.length) assert.fail(`not in ALLOWED (give each its place):\n  ${unplaced.join('\n  ')}`);
  });

  it('the map itself runs downhill: no layer reaches itself through the others', () => {
    const reaches = (from: string, to: string, seen = new Set<string>()): boolean =>
      (ALLOWED[from] ?? []).some(
        (next) => next === to || (!seen.has(next) && (seen.add(next), reaches(next, to, seen))),
      );
    const circular = Object.keys(ALLOWED).filter((layer) => reaches(layer, layer));
    assert.deepEqual(circular, [], `layers that reach themselves: ${circular.join(', ')}`);
  });

  it('no file imports a layer its own may not (type imports and import() included)', () => {
    const forbidden: string[] = [];
    for (const file of files) {
      const own = layerOf(file);
      const allowed = ALLOWED[own];
      if (!allowed) continue;
      for (const spec of specifiers(file)) {
        if (!spec.startsWith('.')) continue; // a package
        const theirs = layerOf(relative(ROOT, resolve(ROOT, dirname(file), spec)));
        if (theirs !== own && theirs in ALLOWED && !allowed.includes(theirs))
          forbidden.push(`${file} → ${spec} (${own} may not import ${theirs})`);
      }
    }
    if (forbidden.length) assert.fail(`imports outside the map:\n  ${forbidden.join('\n  ')}`);
  });
});
