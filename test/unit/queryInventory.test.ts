// The query inventory (test/support/queryInventory.ts) stays complete: every query call site of a store module has an
// entry, every single-document write is keyed by _id (so it needs none), nothing outside store/ queries the
// database, every entry names an index its module declares, and docs/development.md shows the same table.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ALL_INDEXES } from '../../store';
import { QUERY_INVENTORY, inventoryMarkdown } from '../support/queryInventory';

const ROOT = path.join(__dirname, '..', '..');
const STORE = path.join(ROOT, 'store');

/** The source without its line comments (a comment may sit between a call and its filter). */
const sourceOf = (file: string): string => readFileSync(file, 'utf8').replace(/^\s*\/\/.*$/gm, '');

/** Driver calls that select rows by a filter: an arrow function argument is Array.prototype.find, not a query. */
const QUERY_CALL = /\.(find|countDocuments|deleteMany|updateMany)(<[^>()]*>)?\(\s*(?!\(|\w+\s*=>|async\b)/g;
/** findOne not keyed by _id is a query too. */
const FIND_ONE_NOT_BY_ID = /\.findOne\(\s*(?!\{\s*_id\b)/g;
/** The shared helpers that issue a query for their caller: a paged listing (store/paging.ts), a slot (slots.ts). */
const HELPER_CALL = /\b(pageNewestFirst|takeSlots?)\(\s*\w/g;
const HELPERS = ['paging', 'slots'];
const SINGLE_WRITE = /\.(updateOne|deleteOne|replaceOne)\(\s*(\{\s*_id\b)?/g;

function querySites(source: string): number {
  return (
    (source.match(QUERY_CALL)?.length ?? 0) +
    (source.match(FIND_ONE_NOT_BY_ID)?.length ?? 0) +
    (source.match(HELPER_CALL)?.length ?? 0)
  );
}

/** Store modules by their path under store/ without `.ts` (a family's collections sit in its folder). */
const storeModules = (readdirSync(STORE, { recursive: true }) as string[])
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3).split(path.sep).join('/'))
  .filter((m) => ![...HELPERS, 'queryInventory', 'index', 'mongo'].includes(m));
const SINGLE_WRITE_OPS = ['updateOne', 'deleteOne', 'replaceOne'];

describe('the query inventory', () => {
  it('lists every query call site of every store module', () => {
    const mismatches: string[] = [];
    for (const module of storeModules) {
      const sites = querySites(sourceOf(path.join(STORE, `${module}.ts`)));
      const listed = QUERY_INVENTORY.filter(
        (e) => e.module === module && !SINGLE_WRITE_OPS.includes(e.op),
      ).reduce((n, e) => n + (e.sites ?? 1), 0);
      if (sites !== listed)
        mismatches.push(`store/${module}.ts: ${sites} query call sites, ${listed} listed`);
    }
    assert.deepEqual(mismatches, [], 'add the new query to test/support/queryInventory.ts (and its index)');
    for (const entry of QUERY_INVENTORY) assert.ok(storeModules.includes(entry.module), entry.module);
  });

  it('each shared helper issues one query, the one its callers are listed with', () => {
    for (const helper of HELPERS) {
      const source = sourceOf(path.join(STORE, `${helper}.ts`));
      assert.equal(source.match(QUERY_CALL)?.length, 1, helper);
      assert.equal(source.match(FIND_ONE_NOT_BY_ID), null, helper);
      for (const match of source.matchAll(SINGLE_WRITE)) assert.ok(match[2], `${helper}: ${match[0]}`);
    }
  });

  it('every single-document write is keyed by an _id literal, or listed', () => {
    const mismatches: string[] = [];
    for (const module of storeModules) {
      const unkeyed = [...sourceOf(path.join(STORE, `${module}.ts`)).matchAll(SINGLE_WRITE)].filter(
        (m) => !m[2],
      );
      const listed = QUERY_INVENTORY.filter((e) => e.module === module && SINGLE_WRITE_OPS.includes(e.op));
      if (unkeyed.length !== listed.length)
        mismatches.push(
          `store/${module}.ts: ${unkeyed.length} writes not keyed by an _id literal, ${listed.length} listed`,
        );
    }
    assert.deepEqual(mismatches, [], 'key it by _id, or list it in test/support/queryInventory.ts');
  });

  it('nothing outside store/ (and tests, benchmarks) reaches a collection', () => {
    const offenders: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) {
        if (['node_modules', 'dist', 'store', 'test', 'bench', 'tools', '.git', '.data'].includes(entry.name))
          continue;
        const full = path.join(dir, entry.name);
        if (entry.isDirectory()) walk(full);
        else if (entry.name.endsWith('.ts') && /\.collection\(/.test(sourceOf(full)))
          offenders.push(path.relative(ROOT, full));
      }
    };
    walk(ROOT);
    assert.deepEqual(offenders, []);
  });

  it('names an index its collection declares', () => {
    for (const entry of QUERY_INVENTORY) {
      if (entry.index === '_id_' || entry.index === 'none') continue;
      assert.ok(
        ALL_INDEXES.some((spec) => spec.collection === entry.collection && spec.options.name === entry.index),
        `${entry.module}.${entry.method}: no index ${entry.index} on ${entry.collection}`,
      );
    }
  });

  it('is the table docs/development.md shows', () => {
    // Cells compared trimmed: a formatter may pad the columns.
    const normal = (markdown: string): string =>
      markdown
        .split('\n')
        .map((line) =>
          line
            .split('|')
            .map((cell) => cell.trim())
            .map((cell) => (/^:?-+:?$/.test(cell) ? '---' : cell))
            .join('|'),
        )
        .join('\n');
    const readme = readFileSync(path.join(ROOT, 'docs', 'development.md'), 'utf8');
    assert.ok(
      normal(readme).includes(normal(inventoryMarkdown())),
      'docs/development.md "Queries and indexes" differs: paste inventoryMarkdown() there (npx ts-node -e ...)',
    );
  });
});
