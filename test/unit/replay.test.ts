// Replay without servers: every recorded history in test/fixtures/ replays with the current workflow code (one
// bundle, one replay worker, no Temporal server), and again with the bundle a worker with tracing on runs (the
// tracing workflow interceptors record nothing in a history: turning traces on or off breaks none), every patched() id in workflows/ has its row in
// docs/versioning.md, and every fixture is named there. A change that breaks histories still running, a patch
// without a row, or a fixture nobody replays fails here, in the fast layer. The suites on real servers record the
// fixtures (RECORD_*_HISTORY=1, see docs/versioning.md).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';
import { Runtime, Worker, type ReplayResult } from '@temporalio/worker';
import { workflowBundle } from '../support/workflowBundle';

const ROOT = path.resolve(__dirname, '../..');
const FIXTURES_DIR = path.join(ROOT, 'test', 'fixtures');
const WORKFLOWS_DIR = path.join(ROOT, 'workflows');
/** Where the patch ids' constants may be declared: workflows/, or the contract both sides of Temporal share. */
const CONSTANT_DIRS = [WORKFLOWS_DIR, path.join(ROOT, 'contract')].filter((dir) => existsSync(dir));
const VERSIONING_DOC = path.join(ROOT, 'docs', 'versioning.md');

const FIXTURES = readdirSync(FIXTURES_DIR)
  .filter((name) => /history.*\.json$/.test(name))
  .sort();

const sourcesIn = (dir: string): string[] =>
  readdirSync(dir)
    .filter((name) => name.endsWith('.ts'))
    .map((name) => readFileSync(path.join(dir, name), 'utf8'));

/** Every id workflows/ passes to patched() or deprecatePatch(): a string, or a constant declared with one. */
function patchIdsInWorkflows(): Set<string> {
  const constants = new Map<string, string>();
  for (const source of CONSTANT_DIRS.flatMap(sourcesIn))
    for (const [, name, , value] of source.matchAll(/\bconst (\w+)\s*=\s*(['"`])(.+?)\2/g))
      constants.set(name, value);
  const ids = new Set<string>();
  for (const source of sourcesIn(WORKFLOWS_DIR)) {
    for (const [call, arg] of source.matchAll(/\b(?:patched|deprecatePatch)\(\s*([^)]*?)\s*\)/g)) {
      const literal = /^(['"`])(.+)\1$/.exec(arg)?.[2];
      const id = literal ?? constants.get(arg);
      assert.ok(id, `${call}: neither a string nor a constant declared with one`);
      ids.add(id);
    }
  }
  return ids;
}

/** The ids of the table's rows: the first cell of each, in backquotes. */
function idsInVersioningDoc(doc: string): Set<string> {
  return new Set([...doc.matchAll(/^\|\s*`([^`]+)`\s*\|/gm)].map((m) => m[1]));
}

describe('workflow replay without servers', function () {
  const results = new Map<string, ReplayResult>();
  const tracedResults = new Map<string, ReplayResult>();

  before(async function () {
    this.timeout(300_000);
    const quiet = { log() {}, trace() {}, debug() {}, info() {}, warn() {}, error() {} };
    try {
      Runtime.install({ logger: quiet });
    } catch {
      // already in use in this process: its logger stays
    }
    const histories = FIXTURES.map((name) => ({
      // The fixture's file name stands for its workflow id, so each result says which fixture it replayed.
      workflowId: name,
      history: historyFromJSON(JSON.parse(readFileSync(path.join(FIXTURES_DIR, name), 'utf8'))),
    }));
    for (const [traced, into] of [
      [false, results],
      [true, tracedResults],
    ] as const) {
      const bundle = await workflowBundle({ traced });
      for await (const result of Worker.runReplayHistories({ workflowBundle: bundle }, histories))
        into.set(result.workflowId, result);
    }
  });

  it('finds the recorded histories', () => {
    assert.ok(FIXTURES.length >= 18, `only ${FIXTURES.length} fixtures in test/fixtures`);
  });

  for (const fixture of FIXTURES) {
    it(`${fixture} replays with the current workflow code`, () => {
      const result = results.get(fixture);
      assert.ok(result, `${fixture} was not replayed`);
      if (result.error) throw result.error;
    });
    it(`${fixture} replays with the current workflow code and the tracing interceptors`, () => {
      const result = tracedResults.get(fixture);
      assert.ok(result, `${fixture} was not replayed with the tracing interceptors`);
      if (result.error) throw result.error;
    });
  }

  it('replayed every fixture, and nothing else', () => {
    assert.deepEqual([...results.keys()].sort(), FIXTURES);
    assert.deepEqual([...tracedResults.keys()].sort(), FIXTURES);
  });

  it('every patched() id in workflows/ has its row in docs/versioning.md, and every row a patched() id', () => {
    const inCode = patchIdsInWorkflows();
    assert.ok(inCode.size >= 8, `only ${inCode.size} patch ids found in workflows/`);
    const inDoc = idsInVersioningDoc(readFileSync(VERSIONING_DOC, 'utf8'));
    const missing = [...inCode].filter((id) => !inDoc.has(id));
    assert.deepEqual(missing, [], `patched() ids without a row in docs/versioning.md: ${missing.join(', ')}`);
    const stale = [...inDoc].filter((id) => !inCode.has(id));
    assert.deepEqual(
      stale,
      [],
      `rows of docs/versioning.md whose id workflows/ no longer uses: ${stale.join(', ')}`,
    );
  });

  it('docs/versioning.md names every fixture, and only fixtures that exist', () => {
    const doc = readFileSync(VERSIONING_DOC, 'utf8');
    const unnamed = FIXTURES.filter((name) => !doc.includes(name));
    assert.deepEqual(unnamed, [], `fixtures docs/versioning.md does not name: ${unnamed.join(', ')}`);
    const named = [...new Set([...doc.matchAll(/[\w-]*history[\w-]*\.json/g)].map((m) => m[0]))];
    const gone = named.filter((name) => !FIXTURES.includes(name));
    assert.deepEqual(gone, [], `docs/versioning.md names fixtures that do not exist: ${gone.join(', ')}`);
  });
});
