// Conformance of the project's FerretDB (v1.24.2 with the patch in tools/ferretdb/patch) to MongoDB's semantics,
// on a FerretDB of its own (tools/bin/ferretdb, a throwaway data folder per test).
//
// What it proves, and how:
// - atomic writes: concurrent updates of one document (from 50 connections) lose nothing, a compare-and-swap has
//   exactly one winner per revision (by _id, through a secondary index, with findOneAndUpdate), overlapping
//   updateMany calls, findOneAndDelete and upserts count every call once, and an updateMany that fails midway
//   keeps the documents it updated before the failure (as MongoDB does). Exact tables, every run.
// - answers like MongoDB: fixed cases (a sort over mixed types served by an index; doubles and longs between 2^53
//   and 2^63 and beyond), then a differential test. Random documents over mixed BSON types go into two collections:
//   `indexed` (secondary indexes, so the patch pushes filters and sorts down to SQLite) and `plain` (no index:
//   FerretDB evaluates everything in Go, upstream's behaviour). The plain twin is the oracle for WHICH documents a
//   filter matches; a JS model of MongoDB's sort order (mongoOrder below) is the oracle for ORDER, skip and limit.
//   Random finds, counts, type-changing updates and deletes run against both; every difference is a failure. The
//   writes are also held to a model of each document as MongoDB keeps it (what they report, what is stored after).
// - unique indexes: a unique index means what it means in MongoDB (true and 1 differ, null collides with null and
//   with a missing field, 1, 1.0 and Long 1 collide), also on a data folder an unpatched FerretDB wrote, which must
//   start (twice) and keep that meaning.
//
// CONFORMANCE_SEED (default below) seeds the random parts, CONFORMANCE_QUERIES (default 1000, about 15 s) sizes the
// differential test (the drill runs it bigger, e.g. 20000); every failure names the seed and the query (canonical
// EJSON). Tests wait on the server's answers, never on time.
// CONFORMANCE_FERRETDB names another FerretDB binary to hold to the same (default: the stack's, tools/bin/ferretdb).
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import {
  BSON,
  Double,
  Int32,
  Long,
  MongoClient,
  ObjectId,
  type Collection,
  type Document,
  type Filter,
  type FindOptions,
  type MongoClientOptions,
  MongoBulkWriteError,
} from 'mongodb';
import { launchMongo, PROJECT_ROOT, readStackSpec, type ServerProcess } from '../platform/embedded';
import { random } from './support/seeded';
import { failWhenStalled } from './support/stallGuard';

const SEED = Number(process.env.CONFORMANCE_SEED ?? 20261203);
const QUERIES = Number(process.env.CONFORMANCE_QUERIES ?? 1000);
/** The differential test fails when this long passes without a query answered (or the servers started). */
const NO_PROGRESS_MS = 120_000;
const REPRO = `CONFORMANCE_SEED=${SEED} CONFORMANCE_QUERIES=${QUERIES}`;

/** Exact BSON printing (Int32, Long and Double stay apart), for failure messages. */
const ejson = (value: unknown): string => BSON.EJSON.stringify(value, { relaxed: false });

/** An error's message, its first line, without the Go call-site prefixes FerretDB puts before it. */
const messageOf = (err: unknown): string =>
  (err instanceof Error ? err.message : String(err)).split('\n')[0].replace(/^(\[\S+\.go:\d+ \S+\]\s*)+/, '');

/** Fails listing how many went wrong and the first few (each names its query), when any did. */
function noFailures(failures: string[], what: string): void {
  if (failures.length === 0) return;
  const first = failures.slice(0, 12).map((f) => `\n  - ${f}`);
  assert.fail(`${failures.length} ${what}; the first ${first.length}:${first.join('')}`);
}

/** The documents here: string _ids. */
interface Doc extends Document {
  _id: string;
}

/** Reads that keep every value's BSON type (Int32, Long, Double wrappers), so twins compare exactly. */
const EXACT = { promoteValues: false, promoteLongs: false } as const;

/**
 * A value as FerretDB keeps it: a double's negative zero becomes zero (MongoDB keeps the sign; a known divergence,
 * docs/store.md). Everything else as written.
 */
function storedAsFerretDB(value: unknown): unknown {
  if (value instanceof Double) return Object.is(value.value, -0) ? new Double(0) : value;
  if (Array.isArray(value)) return value.map(storedAsFerretDB);
  if (
    value !== null &&
    typeof value === 'object' &&
    bsonTypeOf(value) === undefined &&
    !(value instanceof Date)
  )
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, storedAsFerretDB(v)]));
  return value;
}

// ---------------------------------------------------------------------------------------------------------------
// The order oracle: MongoDB's comparison of BSON values (the "Comparison/Sort Order" of the MongoDB manual).
// ---------------------------------------------------------------------------------------------------------------

/** A sort key of an empty array: below null and missing, in both directions. */
const EMPTY_ARRAY = Symbol('empty array');

const bsonTypeOf = (v: unknown): string | undefined =>
  v !== null && typeof v === 'object' ? (v as { _bsontype?: string })._bsontype : undefined;

/** MongoDB's canonical type rank: MinKey < null/missing < numbers < string < object < array < binData < ObjectId
 * < boolean < Date < Timestamp < regex < MaxKey. */
function typeRank(v: unknown): number {
  if (v === EMPTY_ARRAY) return 1;
  if (v === undefined || v === null) return 2;
  if (typeof v === 'number' || typeof v === 'bigint') return 3;
  if (typeof v === 'string') return 4;
  if (typeof v === 'boolean') return 9;
  if (v instanceof Date) return 10;
  if (Array.isArray(v)) return 6;
  switch (bsonTypeOf(v)) {
    case 'MinKey':
      return 0;
    case 'Int32':
    case 'Double':
    case 'Long':
      return 3;
    case 'BSONSymbol':
      return 4;
    case undefined:
      return 5;
    case 'Binary':
      return 7;
    case 'ObjectId':
      return 8;
    case 'Timestamp':
      return 11;
    case 'BSONRegExp':
      return 12;
    case 'MaxKey':
      return 13;
    default:
      throw new Error(`the order model does not know ${String(bsonTypeOf(v))}`);
  }
}

/** A number, exactly: integers (Int32, Long) as BigInt, doubles as they are. */
type Exact = { int: bigint } | { dbl: number };

function exactNumber(v: unknown): Exact {
  if (typeof v === 'number') return { dbl: v };
  if (typeof v === 'bigint') return { int: v };
  if (v instanceof Int32) return { int: BigInt(v.value) };
  if (v instanceof Long) return { int: v.toBigInt() };
  if (v instanceof Double) return { dbl: v.value };
  throw new Error(`not a number: ${String(v)}`);
}

const sign = (n: number | bigint): number => (n > 0 ? 1 : n < 0 ? -1 : 0);

/** A double against an integer, exactly (a double beyond 2^53 is not rounded to the integer's neighbourhood). */
function compareDoubleInt(d: number, i: bigint): number {
  if (Number.isNaN(d)) return -1; // NaN sorts below every other number
  if (!Number.isFinite(d)) return d > 0 ? 1 : -1;
  if (Number.isInteger(d)) return sign(BigInt(d) - i);
  const floor = BigInt(Math.floor(d)); // d is strictly between floor and floor + 1
  return i <= floor ? 1 : -1;
}

function compareNumbers(a: unknown, b: unknown): number {
  const x = exactNumber(a);
  const y = exactNumber(b);
  if ('int' in x && 'int' in y) return sign(x.int - y.int);
  if ('dbl' in x && 'dbl' in y) {
    if (Number.isNaN(x.dbl) || Number.isNaN(y.dbl))
      return Number.isNaN(x.dbl) ? (Number.isNaN(y.dbl) ? 0 : -1) : 1;
    return sign(x.dbl - y.dbl); // -0 equals 0
  }
  return 'dbl' in x
    ? compareDoubleInt(x.dbl, (y as { int: bigint }).int)
    : -compareDoubleInt((y as { dbl: number }).dbl, x.int);
}

/** Strings compare by their UTF-8 bytes (not JavaScript's UTF-16 code units). */
const compareStrings = (a: string, b: string): number => sign(Buffer.compare(Buffer.from(a), Buffer.from(b)));

/** Embedded documents: field by field, each by its value's type, then its name, then its value; shorter first. */
function compareObjects(a: Record<string, unknown>, b: Record<string, unknown>): number {
  const x = Object.entries(a);
  const y = Object.entries(b);
  for (let i = 0; ; i++) {
    if (i === x.length || i === y.length) return sign(x.length - y.length);
    const byType = sign(typeRank(x[i][1]) - typeRank(y[i][1]));
    if (byType) return byType;
    const byName = compareStrings(x[i][0], y[i][0]);
    if (byName) return byName;
    const byValue = mongoOrder(x[i][1], y[i][1]);
    if (byValue) return byValue;
  }
}

function compareArrays(a: unknown[], b: unknown[]): number {
  for (let i = 0; ; i++) {
    if (i === a.length || i === b.length) return sign(a.length - b.length);
    const byType = sign(typeRank(a[i]) - typeRank(b[i]));
    if (byType) return byType;
    const byValue = mongoOrder(a[i], b[i]);
    if (byValue) return byValue;
  }
}

/** MongoDB's order of two BSON values: negative, 0 or positive. */
function mongoOrder(a: unknown, b: unknown): number {
  const byType = sign(typeRank(a) - typeRank(b));
  if (byType) return byType;
  switch (typeRank(a)) {
    case 3:
      return compareNumbers(a, b);
    case 4:
      return compareStrings(String(a), String(b));
    case 5:
      return compareObjects(a as Record<string, unknown>, b as Record<string, unknown>);
    case 6:
      return compareArrays(a as unknown[], b as unknown[]);
    case 8:
      return compareStrings((a as ObjectId).toHexString(), (b as ObjectId).toHexString());
    case 9:
      return sign(Number(a) - Number(b));
    case 10:
      return sign((a as Date).getTime() - (b as Date).getTime());
    default:
      return 0; // MinKey, null, MaxKey, and the empty-array key: one value each
  }
}

type SortSpec = Record<string, 1 | -1>;

/** A document's key for one sort field: missing is null; an array sorts by its least element ascending and its
 * greatest descending, and an empty array below null. */
function sortKey(doc: Document, field: string, direction: 1 | -1): unknown {
  const value: unknown = doc[field];
  if (!Array.isArray(value)) return value ?? null;
  if (value.length === 0) return EMPTY_ARRAY;
  return value.reduce((best: unknown, v: unknown) => (mongoOrder(v, best) * direction < 0 ? v : best));
}

const bySort =
  (sort: SortSpec) =>
  (a: Document, b: Document): number => {
    for (const [field, direction] of Object.entries(sort)) {
      const c = mongoOrder(sortKey(a, field, direction), sortKey(b, field, direction));
      if (c) return c * direction;
    }
    return 0;
  };

// ---------------------------------------------------------------------------------------------------------------

const big = (n: bigint): Long => Long.fromBigInt(n);
const P53 = 2n ** 53n;
const P60 = 2n ** 60n;
const P63 = 2n ** 63n;

/** How a sorted read departs from `groups` (in order, ties within a group; reversed for a descending sort) in
 * its window, or undefined when it does not. */
function orderProblem(
  actual: Document[],
  groups: string[][],
  window: { skip?: number; limit?: number },
): string | undefined {
  const groupOf = new Map(groups.flatMap((group, g) => group.map((id) => [id, g] as const)));
  const positions = groups.flatMap((group, g) => group.map(() => g));
  const skip = window.skip ?? 0;
  const expected = positions.slice(skip, window.limit ? skip + window.limit : undefined);
  const ids = actual.map((doc) => String(doc._id));
  if (new Set(ids).size !== ids.length) return `returned a document twice: ${ids.join(', ')}`;
  if (ids.map((id) => groupOf.get(id) ?? -1).join() === expected.join()) return undefined;
  return `got ${ids.join(', ')}; MongoDB's order is ${groups.map((g) => g.join(' = ')).join(' < ')}`;
}

describe('FerretDB conformance to MongoDB (the project patch)', function () {
  this.timeout(120_000);
  let dataRoot: string;
  let server: ServerProcess | undefined;
  let url: string;
  const clients: MongoClient[] = [];

  async function launch(): Promise<void> {
    const spec = readStackSpec();
    if (process.env.CONFORMANCE_FERRETDB) spec.mongo.binaries = [process.env.CONFORMANCE_FERRETDB];
    const launched = await launchMongo(spec, { freePorts: true, dataRoot, test: true });
    server = launched.server;
    url = launched.url;
  }

  async function connect(options: MongoClientOptions = {}): Promise<MongoClient> {
    const client = new MongoClient(url, { serverSelectionTimeoutMS: 5000, ...options });
    clients.push(client);
    await client.connect();
    return client;
  }

  async function shutdown(): Promise<void> {
    for (const client of clients.splice(0)) await client.close();
    await server?.stop();
    server = undefined;
  }

  beforeEach(() => {
    dataRoot = mkdtempSync(path.join(tmpdir(), 'flow-notify-conformance-'));
  });

  afterEach(async () => {
    await shutdown();
    rmSync(dataRoot, { recursive: true, force: true });
  });

  describe('atomic writes', () => {
    /** A client with 50 connections, so the calls below do run side by side in FerretDB. */
    async function pool(): Promise<Collection<Doc>> {
      await launch();
      const client = await connect({ maxPoolSize: 50, maxConnecting: 50 });
      return client.db('atomic').collection<Doc>('docs');
    }

    it('500 concurrent $inc of one document add up to 500', async () => {
      const docs = await pool();
      await docs.insertOne({ _id: 'c', n: 0 });
      const results = await Promise.all(
        Array.from({ length: 500 }, () => docs.updateOne({ _id: 'c' }, { $inc: { n: 1 } })),
      );
      const doc = await docs.findOne({ _id: 'c' });
      assert.equal(doc?.n, 500, `500 × updateOne({_id}, {$inc: {n: 1}}) over 50 connections: n = ${doc?.n}`);
      assert.equal(results.filter((r) => r.modifiedCount === 1).length, 500, 'every $inc reports its change');
    });

    it('200 concurrent $set of different fields of one document keep all 200', async () => {
      const docs = await pool();
      await docs.insertOne({ _id: 'c' });
      await Promise.all(
        Array.from({ length: 200 }, (_, i) => docs.updateOne({ _id: 'c' }, { $set: { [`f${i}`]: i } })),
      );
      const doc: Document = (await docs.findOne({ _id: 'c' })) ?? {};
      const missing = Array.from({ length: 200 }, (_, i) => `f${i}`).filter((f) => !(f in doc));
      assert.equal(
        missing.length,
        0,
        `200 × updateOne({_id}, {$set: {f<i>: i}}): ${missing.length} fields lost (${missing.slice(0, 8)}, …)`,
      );
      for (let i = 0; i < 200; i++) assert.equal(doc[`f${i}`], i);
    });

    /**
     * Compare-and-swap: writers loop (read rev k, try to move it to k + 1, retry) until rev reaches `revisions`.
     * `attempt` answers whether the writer's swap of k won. Exactly one writer may win each k.
     */
    async function compareAndSwap(
      what: string,
      read: () => Promise<Document | null>,
      attempt: (k: number, writer: number) => Promise<boolean>,
      revisions = 60,
      writers = 25,
    ): Promise<void> {
      const winners: number[][] = Array.from({ length: revisions }, () => []);
      await Promise.all(
        Array.from({ length: writers }, async (_, writer) => {
          // Bounded, so a server that lets revisions go backwards still ends the test (with a failure).
          for (let round = 0; round < revisions * 20; round++) {
            const k = Number((await read())?.rev);
            if (k >= revisions) return;
            if (await attempt(k, writer)) winners[k].push(writer);
          }
        }),
      );
      const doubled = winners
        .map((w, k) => ({ k, w }))
        .filter(({ w }) => w.length !== 1)
        .map(({ k, w }) => `rev ${k}: ${w.length} winners (${w.join(', ')})`);
      noFailures(doubled, `revisions without exactly one winner, ${writers} writers doing ${what}`);
      const wins = winners.reduce((sum, w) => sum + w.length, 0);
      const final = Number((await read())?.rev);
      assert.equal(final, wins, `${what}: the final rev (${final}) must equal the number of winning swaps`);
    }

    it('compare-and-swap by _id: one winner per revision', async () => {
      const docs = await pool();
      await docs.insertOne({ _id: 'c', rev: 0 });
      await compareAndSwap(
        'updateOne({_id, rev: k}, {$set: {rev: k + 1}})',
        () => docs.findOne({ _id: 'c' }),
        async (k, writer) =>
          (await docs.updateOne({ _id: 'c', rev: k }, { $set: { rev: k + 1, by: writer } })).modifiedCount ===
          1,
      );
    });

    it('compare-and-swap through a secondary index: one winner per revision', async () => {
      const docs = await pool();
      await docs.createIndex({ g: 1, rev: 1 }, { name: 'g_rev' });
      await docs.insertMany([
        { _id: 'c', g: 'x', rev: 0 },
        ...Array.from({ length: 20 }, (_, i) => ({ _id: `o${i}`, g: 'y', rev: i })),
      ]);
      await compareAndSwap(
        'updateOne({g: "x", rev: k}, {$set: {rev: k + 1}}) (index g_rev)',
        () => docs.findOne({ g: 'x' }),
        async (k, writer) =>
          (await docs.updateOne({ g: 'x', rev: k }, { $set: { rev: k + 1, by: writer } })).modifiedCount ===
          1,
      );
      assert.equal(await docs.countDocuments({ g: 'y' }), 20);
    });

    it('compare-and-swap with findOneAndUpdate: one winner per revision, each seeing its own write', async () => {
      const docs = await pool();
      await docs.insertOne({ _id: 'c', rev: 0 });
      const foreign: string[] = [];
      await compareAndSwap(
        'findOneAndUpdate({_id, rev: k}, {$set: {rev: k + 1}}, {returnDocument: "after"})',
        () => docs.findOne({ _id: 'c' }),
        async (k, writer) => {
          const after = await docs.findOneAndUpdate(
            { _id: 'c', rev: k },
            { $set: { rev: k + 1, by: writer } },
            { returnDocument: 'after' },
          );
          if (after && (after.rev !== k + 1 || after.by !== writer))
            foreign.push(`writer ${writer} swapping ${k} got ${ejson(after)}`);
          return after !== null;
        },
      );
      noFailures(foreign, 'winners got back a document other than the one they wrote');
    });

    it('10 overlapping updateMany calls each increment all 600 documents', async () => {
      const docs = await pool();
      await docs.insertMany(Array.from({ length: 600 }, (_, i) => ({ _id: `d${i}`, n: 0 })));
      const results = await Promise.all(
        Array.from({ length: 10 }, () => docs.updateMany({}, { $inc: { n: 1 } })),
      );
      assert.deepEqual(
        results.map((r) => r.modifiedCount),
        Array(10).fill(600),
      );
      const ns = (await docs.find({}).toArray()).map((doc) => Number(doc.n));
      const sum = ns.reduce((a, b) => a + b, 0);
      const short = ns.filter((n) => n !== 10).length;
      assert.equal(
        sum,
        6000,
        `10 × updateMany({}, {$inc: {n: 1}}) on 600 documents: sum ${sum}, ${short} short`,
      );
      assert.equal(await docs.countDocuments({ n: 10 }), 600);
    });

    it('concurrent findOneAndDelete calls return each document exactly once', async () => {
      const docs = await pool();
      await docs.insertMany(Array.from({ length: 200 }, (_, i) => ({ _id: `d${i}`, i })));
      const taken: string[] = [];
      await Promise.all(
        Array.from({ length: 25 }, async () => {
          for (;;) {
            const doc = await docs.findOneAndDelete({});
            if (!doc) return;
            taken.push(String(doc._id));
          }
        }),
      );
      const twice = taken.filter((id, i) => taken.indexOf(id) !== i);
      assert.equal(
        twice.length,
        0,
        `25 clients × findOneAndDelete({}) over 200 documents returned ${twice.length} twice: ` +
          twice.slice(0, 10).join(', '),
      );
      assert.equal(taken.length, 200);
      assert.equal(await docs.countDocuments({}), 0);
    });

    it('concurrent upserts of one _id make one document counting every call', async () => {
      const docs = await pool();
      const results = await Promise.allSettled(
        Array.from({ length: 100 }, () => docs.updateOne({ _id: 'u' }, { $inc: { n: 1 } }, { upsert: true })),
      );
      const failed = results.flatMap((r) => (r.status === 'rejected' ? [messageOf(r.reason)] : []));
      noFailures(failed, 'of 100 concurrent updateOne({_id: "u"}, {$inc: {n: 1}}, {upsert: true}) failed');
      assert.equal(await docs.countDocuments({}), 1);
      assert.equal((await docs.findOne({ _id: 'u' }))?.n, 100, '100 × upsert {$inc: {n: 1}}');
      assert.equal(results.filter((r) => r.status === 'fulfilled' && r.value.upsertedCount === 1).length, 1);
    });

    it('deleteMany racing updates: deleted documents stay deleted, survivors keep every update', async () => {
      const docs = await pool();
      await docs.createIndex({ k: 1 }, { name: 'k' });
      await docs.insertMany(Array.from({ length: 400 }, (_, i) => ({ _id: `d${i}`, k: i, m: 0 })));
      const [deletes, , many] = await Promise.all([
        Promise.all(Array.from({ length: 4 }, () => docs.deleteMany({ k: { $lt: 200 } }))),
        Promise.all(
          Array.from({ length: 400 }, (_, i) =>
            docs.updateOne({ _id: `d${i}` }, { $set: { touched: true } }),
          ),
        ),
        Promise.all(Array.from({ length: 3 }, () => docs.updateMany({ k: { $gte: 0 } }, { $inc: { m: 1 } }))),
      ]);
      const deleted = deletes.reduce((sum, r) => sum + r.deletedCount, 0);
      assert.equal(await docs.countDocuments({ k: { $lt: 200 } }), 0, 'a deleted document came back');
      assert.equal(await docs.countDocuments({}), 200);
      assert.equal(deleted, 200, `4 × deleteMany({k: {$lt: 200}}) reported ${deleted} deletions`);
      assert.equal(await docs.countDocuments({ touched: true }), 200, 'a $set on a survivor was lost');
      assert.equal(
        await docs.countDocuments({ m: 3 }),
        200,
        'an updateMany increment of a survivor was lost',
      );
      assert.ok(many.every((r) => r.matchedCount >= 200));
    });

    it('a deleteMany of more documents than SQLite binds in one statement (32,766) deletes them all, indexed or not', async () => {
      const docs = await pool();
      const twin = docs.db.collection<Doc>('twin');
      await docs.createIndex({ at: 1 }, { name: 'at' });
      const old = new Date('2026-01-01T00:00:00Z');
      const cutoff = new Date('2026-02-01T00:00:00Z');
      const expired = 40_000;
      for (const c of [docs, twin]) {
        for (let from = 0; from < expired; from += 5000)
          await c.insertMany(Array.from({ length: 5000 }, (_, i) => ({ _id: `x${from + i}`, at: old })));
        await c.insertMany(Array.from({ length: 100 }, (_, i) => ({ _id: `k${i}`, at: cutoff })));
      }
      for (const [name, c] of [
        ['indexed', docs],
        ['unindexed', twin],
      ] as const) {
        const { deletedCount } = await c.deleteMany({ at: { $lt: cutoff } });
        assert.equal(deletedCount, expired, `${name}: deleteMany deleted ${deletedCount} of ${expired}`);
        assert.equal(await c.countDocuments({}), 100, `${name}: the documents left`);
      }
    });

    it('an update command of many statements answers as MongoDB: each failure at its own index, unordered ones going on', async () => {
      const docs = await pool();
      await docs.insertOne({ _id: 'b', n: 'text' });
      // The middle statement fails ($inc of a string); the others upsert.
      const statements = [
        { updateOne: { filter: { _id: 'a' }, update: { $inc: { n: 1 } }, upsert: true } },
        { updateOne: { filter: { _id: 'b' }, update: { $inc: { n: 1 } }, upsert: true } },
        { updateOne: { filter: { _id: 'c' }, update: { $inc: { n: 1 } }, upsert: true } },
      ];
      const unordered = await docs.bulkWrite(statements, { ordered: false }).then(
        () => assert.fail('the failing statement was not reported'),
        (err: MongoBulkWriteError) => err,
      );
      assert.deepEqual(
        unordered.writeErrors instanceof Array
          ? unordered.writeErrors.map((e) => [e.index, e.code])
          : [[unordered.writeErrors.index, unordered.writeErrors.code]],
        [[1, 14]],
      );
      assert.deepEqual(unordered.result.upsertedIds, { 0: 'a', 2: 'c' });
      assert.deepEqual([unordered.result.upsertedCount, unordered.result.matchedCount], [2, 0]);
      assert.deepEqual(
        (await docs.find({}).sort({ _id: 1 }).toArray()).map((d) => [d._id, d.n]),
        [
          ['a', 1],
          ['b', 'text'],
          ['c', 1],
        ],
      );
      // Ordered, it stops at the failure: the statement after it is not made.
      await docs.deleteMany({ _id: { $in: ['a', 'c'] } });
      const ordered = await docs.bulkWrite(statements, { ordered: true }).then(
        () => assert.fail('the failing statement was not reported'),
        (err: MongoBulkWriteError) => err,
      );
      assert.deepEqual(
        ordered.writeErrors instanceof Array
          ? ordered.writeErrors.map((e) => e.index)
          : [ordered.writeErrors.index],
        [1],
      );
      assert.deepEqual(
        (await docs.find({}).sort({ _id: 1 }).toArray()).map((d) => d._id),
        ['a', 'b'],
      );
      // What a failure's neighbours did is counted: a $set that changed a document, one that matched and did not.
      const counted = await docs
        .bulkWrite(
          [
            { updateOne: { filter: { _id: 'a' }, update: { $set: { n: 5 } } } },
            { updateOne: { filter: { _id: 'b' }, update: { $inc: { n: 1 } } } },
            { updateOne: { filter: { _id: 'a' }, update: { $set: { n: 5 } } } },
          ],
          { ordered: false },
        )
        .then(
          () => assert.fail('the failing statement was not reported'),
          (err: MongoBulkWriteError) => err,
        );
      assert.deepEqual([counted.result.matchedCount, counted.result.modifiedCount], [2, 1]);
    });

    it('an updateMany that fails midway keeps the documents it updated before the failure', async () => {
      const docs = await pool();
      const ids = Array.from({ length: 1200 }, (_, i) => `b${String(i).padStart(4, '0')}`);
      await docs.insertMany(ids.map((id, i) => ({ _id: id, n: i === 700 ? 'text' : 0 })));
      await assert.rejects(docs.updateMany({}, { $inc: { n: 1 } }), /Cannot apply \$inc|non-numeric/);
      const updated = (await docs.find({ n: 1 }, { projection: { _id: 1 } }).toArray()).map((d) =>
        String(d._id),
      );
      updated.sort();
      assert.equal(
        updated.length,
        700,
        `updateMany({}, {$inc: {n: 1}}) over 1200 documents, the 701st holding a string: ` +
          `${updated.length} of the 700 documents before it stay updated`,
      );
      assert.deepEqual(updated, ids.slice(0, 700), 'exactly the documents before the failing one');
      assert.equal((await docs.findOne({ _id: 'b0700' }))?.n, 'text');
      assert.equal(await docs.countDocuments({ n: 0 }), 499);
    });
  });

  describe('answers like MongoDB', () => {
    it('sorts values of mixed types from an index in BSON order, across skip, limit and getMore batches', async () => {
      await launch();
      const client = await connect();
      const docs = client.db('order').collection<Doc>('docs');
      await docs.createIndex({ teamId: 1, createdAt: 1 }, { name: 'team_created' });
      await docs.createIndex({ t: 1, val: 1 }, { name: 't_val' });
      await docs.insertMany([
        // The example: a number above a date's milliseconds sorts before the date.
        { _id: 'm1', teamId: 'm', createdAt: new Date(1_000_000) },
        { _id: 'm2', teamId: 'm', createdAt: 2_000_000 },
        // Numbers, booleans and dates in one field.
        { _id: 'num5', t: 'mix', val: 5 },
        { _id: 'dt3', t: 'mix', val: new Date(3) },
        { _id: 'true', t: 'mix', val: true },
        { _id: 'false', t: 'mix', val: false },
        { _id: 'dbl1.5', t: 'mix', val: 1.5 },
        { _id: 'long7', t: 'mix', val: Long.fromNumber(7) },
        { _id: 'dtneg', t: 'mix', val: new Date(-86_400_000) },
        { _id: 'dbl2^60', t: 'mix', val: new Double(2 ** 60) },
        { _id: 'str', t: 'mix', val: 'a' },
        // Strings and ObjectIds.
        { _id: 'zzz', t: 'oid', val: 'zzz' },
        { _id: 'a', t: 'oid', val: 'a' },
        { _id: 'empty', t: 'oid', val: '' },
        { _id: 'oid1', t: 'oid', val: new ObjectId('000000000000000000000001') },
        { _id: 'oidf', t: 'oid', val: new ObjectId('ffffffffffffffffffffffff') },
        { _id: 'oid6', t: 'oid', val: new ObjectId('600000000000000000000000') },
        // Embedded documents: field by field, the value's type before the field's name.
        { _id: 'x2', t: 'doc', val: { x: 2 } },
        { _id: 'x10', t: 'doc', val: { x: 10 } },
        { _id: 'xa', t: 'doc', val: { x: 'a' } },
        { _id: 'y1', t: 'doc', val: { y: 1 } },
        { _id: 'x2y1', t: 'doc', val: { x: 2, y: 1 } },
        { _id: '{}', t: 'doc', val: {} },
        // null and missing tie, below everything else.
        { _id: 'null', t: 'null', val: null },
        { _id: 'missing', t: 'null' },
        { _id: 'zero', t: 'null', val: 0 },
        { _id: 'neg', t: 'null', val: -0.5 },
        { _id: 'txt', t: 'null', val: '' },
      ]);
      const cases: { filter: Document; field: string; groups: string[][] }[] = [
        { filter: { teamId: 'm' }, field: 'createdAt', groups: [['m2'], ['m1']] },
        {
          filter: { t: 'mix' },
          field: 'val',
          groups: [
            ['dbl1.5'],
            ['num5'],
            ['long7'],
            ['dbl2^60'],
            ['str'],
            ['false'],
            ['true'],
            ['dtneg'],
            ['dt3'],
          ],
        },
        {
          filter: { t: 'oid' },
          field: 'val',
          groups: [['empty'], ['a'], ['zzz'], ['oid1'], ['oid6'], ['oidf']],
        },
        { filter: { t: 'doc' }, field: 'val', groups: [['{}'], ['x2'], ['x2y1'], ['x10'], ['y1'], ['xa']] },
        { filter: { t: 'null' }, field: 'val', groups: [['null', 'missing'], ['neg'], ['zero'], ['txt']] },
      ];
      const windows = [
        {},
        { limit: 1 },
        { limit: 3 },
        { skip: 1, limit: 2 },
        { skip: 2 },
        { skip: 4, limit: 3 },
      ];
      const failures: string[] = [];
      for (const { filter, field, groups } of cases) {
        // The fixed expectations agree with the model (and so does the model with these cases).
        const all = await docs.find(filter).toArray();
        const modelled = [...all].sort(bySort({ [field]: 1 })).map((doc) => String(doc._id));
        assert.deepEqual(
          modelled.map((id) => groups.findIndex((g) => g.includes(id))),
          groups.flatMap((g, i) => g.map(() => i)),
          `the order model disagrees with the case ${ejson(filter)}`,
        );
        for (const direction of [1, -1] as const) {
          for (const window of windows) {
            for (const batchSize of [undefined, 2]) {
              const options: FindOptions = { sort: { [field]: direction }, ...window };
              if (batchSize) options.batchSize = batchSize;
              const query = { filter, ...options };
              try {
                const actual = await docs.find(filter, options).toArray();
                const problem = orderProblem(
                  actual,
                  direction === 1 ? groups : [...groups].reverse(),
                  window,
                );
                if (problem) failures.push(`${ejson(query)}: ${problem}`);
              } catch (err) {
                failures.push(`${ejson(query)}: ${messageOf(err)}`);
              }
            }
          }
        }
      }
      noFailures(failures, 'sorted reads answered unlike MongoDB');
    });

    it('finds, sorts and deletes doubles and longs between 2^53 and 2^63 and beyond through an index', async () => {
      await launch();
      const client = await connect();
      const docs = client.db('wide').collection<Doc>('docs');
      await docs.createIndex({ g: 1, v: 1 }, { name: 'g_v' });
      await docs.createIndex({ v: 1 }, { name: 'v' });
      const values: [string, unknown][] = [
        ['lmin', big(-P63)],
        ['dneg63', new Double(-(2 ** 63))],
        ['dneg60', new Double(-(2 ** 60))],
        ['lneg60', big(-P60)],
        ['lneg53m1', big(-P53 - 1n)],
        ['i5', 5],
        ['d53', new Double(2 ** 53)],
        ['l53p1', big(P53 + 1n)],
        ['d60', new Double(2 ** 60)],
        ['l60', big(P60)],
        ['l60p1', big(P60 + 1n)],
        ['d62', new Double(2 ** 62)],
        ['l63m1', big(P63 - 1n)],
        ['d63', new Double(2 ** 63)],
        ['d1e19', new Double(1e19)],
        ['d2^64', new Double(2 ** 64)],
      ];
      await docs.insertMany([
        ...values.map(([id, v]) => ({ _id: id, g: 'b', v })),
        { _id: 'other', g: 'c', v: new Double(2 ** 60) },
      ]);
      const cases: [Filter<Doc>, string[]][] = [
        [{ g: 'b', v: new Double(2 ** 60) }, ['d60', 'l60']],
        [{ g: 'b', v: big(P60) }, ['d60', 'l60']],
        [{ v: big(P60 + 1n) }, ['l60p1']],
        [{ v: new Double(2 ** 53) }, ['d53']],
        [{ v: big(P53 + 1n) }, ['l53p1']],
        [{ g: 'b', v: new Double(2 ** 63) }, ['d63']],
        [{ g: 'b', v: big(P63 - 1n) }, ['l63m1']],
        [{ v: new Double(1e19) }, ['d1e19']],
        [{ v: new Double(-(2 ** 63)) }, ['dneg63', 'lmin']],
        [
          { g: 'b', v: { $in: [new Double(2 ** 53), big(P60 + 1n), new Double(2 ** 64)] } },
          ['d2^64', 'd53', 'l60p1'],
        ],
        [{ g: 'b', v: { $gt: big(P60) } }, ['d1e19', 'd2^64', 'd62', 'd63', 'l60p1', 'l63m1']],
        [
          { g: 'b', v: { $gte: new Double(2 ** 60), $lt: new Double(2 ** 63) } },
          ['d60', 'd62', 'l60', 'l60p1', 'l63m1'],
        ],
        [{ v: { $gt: new Double(2 ** 63) } }, ['d1e19', 'd2^64']],
        [{ g: 'b', v: { $gte: big(P63 - 1n) } }, ['d1e19', 'd2^64', 'd63', 'l63m1']],
        [{ g: 'b', v: { $lt: big(-P53) } }, ['dneg60', 'dneg63', 'lmin', 'lneg53m1', 'lneg60']],
        [{ g: 'b', v: { $lte: new Double(-(2 ** 60)), $gt: big(-P63) } }, ['dneg60', 'lneg60']],
        [{ g: 'b', v: { $gt: 5, $lte: new Double(2 ** 53) } }, ['d53']],
      ];
      const failures: string[] = [];
      for (const [filter, expected] of cases) {
        try {
          const ids = (await docs.find(filter).toArray()).map((doc) => String(doc._id)).sort();
          if (ids.join() !== [...expected].sort().join())
            failures.push(
              `find ${ejson(filter)}: got [${ids.join(', ')}], MongoDB matches [${expected.join(', ')}]`,
            );
          const count = await docs.countDocuments(filter);
          if (count !== expected.length)
            failures.push(`count ${ejson(filter)}: ${count}, not ${expected.length}`);
        } catch (err) {
          failures.push(`find ${ejson(filter)}: ${messageOf(err)}`);
        }
      }
      const ascending = [
        ['lmin', 'dneg63'],
        ['dneg60', 'lneg60'],
        ['lneg53m1'],
        ['i5'],
        ['d53'],
        ['l53p1'],
        ['d60', 'l60'],
        ['l60p1'],
        ['d62'],
        ['l63m1'],
        ['d63'],
        ['d1e19'],
        ['d2^64'],
      ];
      for (const direction of [1, -1] as const) {
        for (const window of [{}, { limit: 3 }, { skip: 5, limit: 4 }]) {
          const options: FindOptions = { sort: { v: direction }, ...window, batchSize: 2 };
          const query = { filter: { g: 'b' }, ...options };
          try {
            const actual = await docs.find({ g: 'b' }, options).toArray();
            const problem = orderProblem(
              actual,
              direction === 1 ? ascending : [...ascending].reverse(),
              window,
            );
            if (problem) failures.push(`${ejson(query)}: ${problem}`);
          } catch (err) {
            failures.push(`${ejson(query)}: ${messageOf(err)}`);
          }
        }
      }
      for (const [filter, expected] of [
        [{ g: 'b', v: new Double(2 ** 60) }, 2],
        [{ v: { $gt: big(P63 - 1n) } }, 3],
        [{ g: 'b', v: { $in: [big(P53 + 1n), new Double(-(2 ** 63))] } }, 3],
      ] as [Filter<Doc>, number][]) {
        try {
          const { deletedCount } = await docs.deleteMany(filter);
          if (deletedCount !== expected)
            failures.push(
              `deleteMany ${ejson(filter)}: deleted ${deletedCount}, MongoDB deletes ${expected}`,
            );
        } catch (err) {
          failures.push(`deleteMany ${ejson(filter)}: ${messageOf(err)}`);
        }
      }
      const left = (await docs.find({}).toArray()).map((doc) => String(doc._id)).sort();
      if (
        left.join() !== ['d53', 'd62', 'dneg60', 'i5', 'l60p1', 'l63m1', 'lneg53m1', 'lneg60', 'other'].join()
      )
        failures.push(`left after the deletes: ${left.join(', ')}`);
      noFailures(failures, 'answers unlike MongoDB');
    });

    it(`answers random queries on an indexed collection like its unindexed twin, in MongoDB's order (seed ${SEED})`, async function () {
      // Bounded by its queries, not by a time a loaded machine can reach: what fails it is a stall, this long
      // without a step done.
      await failWhenStalled(this, NO_PROGRESS_MS, async (stepped) => {
        await launch();
        const client = await connect();
        const db = client.db('differential');
        const indexed = db.collection<Doc>('indexed');
        const plain = db.collection<Doc>('plain');
        const rand = random(SEED);
        const pick = <T>(values: readonly T[]): T => values[Math.floor(rand() * values.length)];
        const int = (lo: number, hi: number): number => lo + Math.floor(rand() * (hi - lo + 1));

        // The values, of every BSON type the pushdown has to get right.
        const hex = (): string => Array.from({ length: 24 }, () => '0123456789abcdef'[int(0, 15)]).join('');
        const objectIds = [
          new ObjectId('000000000000000000000000'),
          new ObjectId('ffffffffffffffffffffffff'),
          ...Array.from({ length: 4 }, () => new ObjectId(hex())),
        ];
        const strings = ['', 'a', 'ab', 'b', 'Z', '[x', '{x', '1', 'é', '\uFFFD', '😀'];
        const int32s = [-7, -1, 0, 1, 2, 5, 1000, 2_147_483_647].map((n) => new Int32(n));
        const longs = [
          0n,
          2n,
          -3n,
          5n,
          P53 + 1n,
          P60,
          P60 + 1n,
          2n ** 62n + 3n,
          P63 - 1n,
          -P53 - 1n,
          -P60,
          -P63,
        ].map(big);
        const doubles = [
          2,
          2.5,
          -0.5,
          -0,
          0.1,
          1000.5,
          2 ** 53,
          2 ** 60,
          2 ** 62,
          2 ** 63,
          1e19,
          2 ** 64,
          1e300,
          -(2 ** 60),
          -1e19,
          -(2 ** 63),
        ].map((d) => new Double(d));
        const dates = [0, 2, 5, 1000, -86_400_000, -1, 1_000_000, 2e12].map((ms) => new Date(ms));
        // Small pools, so that two documents often hold the same values under other names or in another order.
        const embedded = (): Document =>
          Object.fromEntries(
            (rand() < 0.5 ? ['x', 'y'] : ['y', 'x'])
              .filter(() => rand() < 0.6)
              .map((key) => [key, pick<unknown>([new Int32(2), new Int32(10), 'a', new Double(2)])]),
          );
        const arrays = (): unknown[] =>
          pick([
            [new Int32(1), 'a'],
            [new Date(3), new Int32(3)],
            [],
            [null],
            [new Double(2.5), objectIds[1]],
          ]);
        const scalar = (): unknown =>
          pick<() => unknown>([
            () => pick(strings),
            () => pick(objectIds),
            () => pick(int32s),
            () => pick(longs),
            () => pick(longs),
            () => pick(doubles),
            () => pick(doubles),
            () => pick(dates),
            () => rand() < 0.5,
            () => null,
            () => embedded(),
          ])();
        /** A field's value: undefined for a missing field; arrays only where `arraysToo`. */
        const value = (arraysToo: boolean): unknown => {
          const r = rand();
          if (r < 0.08) return undefined;
          if (arraysToo && r < 0.11) return arrays();
          return scalar();
        };
        const gs = ['a', 'b', 'c', 'd'];

        // v never holds an array at first (so every index on it is pushed down); w sometimes does.
        const docs: Doc[] = Array.from({ length: 320 }, (_, i) => {
          const doc: Doc = { _id: `d${String(i).padStart(3, '0')}`, g: pick(gs) };
          for (const [field, v] of [
            ['v', value(false)],
            ['w', value(true)],
          ] as const)
            if (v !== undefined) doc[field] = v;
          return doc;
        });
        for (const [key, name] of [
          [{ g: 1, v: 1 }, 'g_v'],
          [{ g: 1, v: -1, w: 1 }, 'g_v_w'],
          [{ v: 1 }, 'v'],
          [{ w: 1 }, 'w'],
        ] as const)
          await indexed.createIndex(key, { name });
        await indexed.insertMany(docs);
        await plain.insertMany(docs);
        stepped();

        const condition = (): unknown => {
          const r = rand();
          if (r < 0.45) return scalar();
          if (r < 0.65) return { $in: Array.from({ length: int(1, 4) }, scalar) };
          const ops = pick([
            ['$gt'],
            ['$gte'],
            ['$lt'],
            ['$lte'],
            ['$gt', '$lt'],
            ['$gte', '$lte'],
            ['$gte', '$lt'],
          ]);
          // Mostly bounds of one type (a range that selects something), sometimes of two.
          const first = scalar();
          return Object.fromEntries(
            ops.map((op, i) => {
              if (i === 0 || rand() < 0.25) return [op, i === 0 ? first : scalar()];
              const again = pick([int32s, longs, doubles, strings, dates, objectIds] as unknown[][]).find(
                (v) => typeRank(v) === typeRank(first) && mongoOrder(v, first) > 0,
              );
              return [op, again ?? scalar()];
            }),
          );
        };
        const filter = (): Document => {
          const f: Document = {};
          const r = rand();
          if (r < 0.6) f.g = pick(gs);
          else if (r < 0.75) f.g = { $in: [pick(gs), pick(gs)] };
          if (rand() < 0.75) f.v = condition();
          if (rand() < 0.3) f.w = condition();
          return f;
        };
        const sorts: (SortSpec | undefined)[] = [
          undefined,
          { v: 1 },
          { v: -1 },
          { v: 1 },
          { v: -1 },
          { v: -1, w: 1 },
          { v: 1, w: -1 },
          { w: 1 },
          { w: -1 },
          { v: 1, w: 1 },
          { g: 1, v: 1 },
          { g: -1, v: -1 },
          { v: 1, _id: 1 },
        ];
        interface Query {
          filter: Document;
          sort?: SortSpec;
          skip?: number;
          limit?: number;
          batchSize?: number;
        }
        const query = (): Query => {
          const q: Query = { filter: filter() };
          const sort = pick(sorts);
          if (sort) q.sort = sort;
          if (rand() < 0.3) q.skip = int(1, 8);
          if (rand() < 0.5) q.limit = int(1, 15);
          if (rand() < 0.4) q.batchSize = int(2, 5);
          return q;
        };

        const mismatches: string[] = [];
        let explained = 0;
        let pushed = 0;
        const record = (where: string, what: unknown, problem: string): void => {
          mismatches.push(`seed ${SEED} ${where}: ${ejson(what)}: ${problem}`);
        };

        /** One query against both twins: undefined when the indexed one answers as MongoDB would. */
        async function check(q: Query, n: number): Promise<string | undefined> {
          let matches: Document[];
          try {
            matches = await plain.find(q.filter, EXACT).toArray();
          } catch (err) {
            return `the unindexed twin failed: ${messageOf(err)}`;
          }
          let actual: Document[];
          try {
            const options: FindOptions = { ...EXACT, sort: q.sort, skip: q.skip, limit: q.limit };
            if (q.batchSize) options.batchSize = q.batchSize;
            actual = await indexed.find(q.filter, options).toArray();
          } catch (err) {
            return `failed: ${messageOf(err)} (MongoDB matches ${matches.length} documents)`;
          }
          const matched = new Set(matches.map(ejson));
          const seen = new Set<string>();
          for (const doc of actual) {
            const id = ejson(doc._id);
            if (seen.has(id)) return `returned ${id} twice`;
            seen.add(id);
            if (!matched.has(ejson(doc)))
              return `returned ${ejson(doc)}, which the filter does not match (or not with these values)`;
          }
          const skip = q.skip ?? 0;
          const expectedLength = Math.max(0, Math.min(q.limit || Infinity, matches.length - skip));
          if (actual.length !== expectedLength) {
            const missing = matches.filter((doc) => !seen.has(ejson(doc._id))).map((doc) => String(doc._id));
            return (
              `returned ${actual.length} documents, MongoDB returns ${expectedLength} of ${matches.length} matching` +
              (q.limit || q.skip ? '' : ` (missing ${missing.slice(0, 5).join(', ')})`)
            );
          }
          // Sorted: the window [skip, skip + limit) of all matches in MongoDB's order, up to ties: the same sort key
          // at every position (with the membership above, a document whose key is unique is in its exact place).
          if (q.sort) {
            const order = bySort(q.sort);
            const expected = [...matches].sort(order).slice(skip, skip + expectedLength);
            for (let i = 0; i < actual.length; i++)
              if (order(actual[i], expected[i]) !== 0)
                return `at ${skip + i} returned ${ejson(actual[i])}, MongoDB's order puts ${ejson(expected[i])} there`;
          }
          if (!q.skip && !q.limit && n % 4 === 0) {
            const count = await indexed.countDocuments(q.filter);
            if (count !== matches.length) return `countDocuments ${count}, MongoDB counts ${matches.length}`;
          }
          if (n % 10 === 0) {
            const explain = await indexed.find(q.filter, { sort: q.sort, limit: q.limit }).explain();
            explained++;
            if (explain.filterPushdown || explain.sortPushdown) pushed++;
          }
          return undefined;
        }

        let asked = 0;
        async function queries(phase: string, count: number): Promise<void> {
          for (let i = 0; i < count; i++) {
            const q = query();
            const problem = await check(q, asked++);
            if (problem) record(`${phase} query #${i}`, q, problem);
            stepped();
          }
        }

        /** Both twins hold the same documents. */
        async function sameDocuments(when: string): Promise<void> {
          const all = async (c: Collection<Doc>): Promise<string[]> =>
            (await c.find({}, { ...EXACT, sort: { _id: 1 } }).toArray()).map(ejson);
          const [a, b] = await Promise.all([all(indexed), all(plain)]);
          const onlyIndexed = a.filter((doc) => !b.includes(doc));
          const onlyPlain = b.filter((doc) => !a.includes(doc));
          if (onlyIndexed.length || onlyPlain.length)
            mismatches.push(
              `seed ${SEED} ${when}: the twins differ: indexed only ${onlyIndexed.slice(0, 3).join(' ')}; ` +
                `unindexed only ${onlyPlain.slice(0, 3).join(' ')}`,
            );
        }

        /**
         * The oracle of writes: each document as MongoDB keeps it. `$set` puts the value in the field's place (a new
         * field last) and modifies the document unless the value there is the same BSON (type, field names, their
         * order and bytes, as MongoDB's binaryEqualValues); `$unset` modifies it when the field was there.
         */
        const model = new Map(docs.map((doc) => [doc._id, storedAsFerretDB({ ...doc }) as Doc]));
        const applyToModel = (id: string, field: string, written: unknown): boolean => {
          const doc = model.get(id);
          if (!doc) return false;
          if (written === undefined) return field in doc && delete doc[field];
          const v = storedAsFerretDB(written);
          if (field in doc && ejson({ v: doc[field] }) === ejson({ v })) return false;
          doc[field] = v;
          return true;
        };
        /** The ids the unindexed twin matches (the oracle of which documents a filter matches). */
        const idsMatching = async (f: Document): Promise<string[]> =>
          (await plain.find(f, { projection: { _id: 1 } }).toArray()).map((doc) => doc._id);

        /** The same write on both twins, which must report the same, and what the model says MongoDB reports. */
        async function write(
          where: string,
          what: Document,
          op: (c: Collection<Doc>) => Promise<Record<string, unknown>>,
          expected: Record<string, unknown>,
        ): Promise<void> {
          const outcome = async (c: Collection<Doc>): Promise<string> => {
            try {
              return JSON.stringify(await op(c));
            } catch (err) {
              return `error ${messageOf(err)}`;
            }
          };
          const [a, b] = [await outcome(indexed), await outcome(plain)];
          const mongo = JSON.stringify(expected);
          if (a !== b || a !== mongo) record(where, what, `indexed ${a}, unindexed ${b}, MongoDB ${mongo}`);
          stepped();
        }

        /** The indexed twin holds what the model holds. */
        async function asModelled(when: string): Promise<void> {
          const stored = (await indexed.find({}, { ...EXACT, sort: { _id: 1 } }).toArray()).map(ejson);
          const modelled = [...model.values()].sort((a, b) => (a._id < b._id ? -1 : 1)).map(ejson);
          const wrong = stored.filter((doc) => !modelled.includes(doc));
          if (wrong.length || stored.length !== modelled.length)
            mismatches.push(
              `seed ${SEED} ${when}: ${stored.length} documents stored, ${modelled.length} in MongoDB; stored unlike ` +
                `MongoDB: ${wrong.slice(0, 3).join(' ')}; MongoDB's: ${modelled
                  .filter((doc) => !stored.includes(doc))
                  .slice(0, 3)
                  .join(' ')}`,
            );
        }

        const phase1 = Math.round(QUERIES * 0.5);
        const phase2 = Math.round(QUERIES * 0.35);
        await queries('phase 1', phase1);

        // Midway: change the types of fields after the indexes were built, through pushed-down filters too.
        for (let i = 0; i < 40; i++) {
          const doc = pick(docs);
          const id = doc._id as string;
          const field = pick(['v', 'w']);
          // A third of them an embedded document over what is there (often one of the same values, other names).
          const v = rand() < 0.3 ? embedded() : value(field === 'w' || doc.g === 'd'); // arrays in v: only in g 'd'
          const update = v === undefined ? { $unset: { [field]: '' } } : { $set: { [field]: v } };
          const expected = { matched: model.has(id) ? 1 : 0, modified: applyToModel(id, field, v) ? 1 : 0 };
          await write(
            `update #${i}`,
            { filter: { _id: id }, update },
            async (c) => {
              const r = await c.updateOne({ _id: id }, update);
              return { matched: r.matchedCount, modified: r.modifiedCount };
            },
            expected,
          );
        }
        for (let i = 0; i < 12; i++) {
          const f = filter();
          const field = pick(['v', 'w']);
          const v = rand() < 0.3 ? embedded() : value(field === 'w' || f.g === 'd');
          const update = v === undefined ? { $unset: { [field]: '' } } : { $set: { [field]: v } };
          const ids = await idsMatching(f);
          const modified = ids.filter((id) => applyToModel(id, field, v)).length;
          await write(
            `updateMany #${i}`,
            { filter: f, update },
            async (c) => {
              const r = await c.updateMany(f, update);
              return { matched: r.matchedCount, modified: r.modifiedCount };
            },
            { matched: ids.length, modified },
          );
        }
        await sameDocuments('after the updates');
        await asModelled('after the updates');
        await queries('phase 2', phase2);

        for (let i = 0; i < 10; i++) {
          const f = filter();
          const ids = await idsMatching(f);
          for (const id of ids) model.delete(id);
          await write(
            `deleteMany #${i}`,
            { filter: f },
            async (c) => ({ deleted: (await c.deleteMany(f)).deletedCount }),
            { deleted: ids.length },
          );
        }
        await sameDocuments('after the deletes');
        await asModelled('after the deletes');
        await queries('phase 3', QUERIES - phase1 - phase2);

        noFailures(
          mismatches,
          `answers unlike MongoDB in ${QUERIES} queries (${pushed} of ${explained} sampled pushed down; ` +
            `rerun: ${REPRO} npx mocha test/ferretdbConformance.test.ts)`,
        );
        // The oracle holds either way; this says the queries did exercise the pushdown.
        assert.ok(pushed > explained / 4, `only ${pushed} of ${explained} sampled queries were pushed down`);
      });
    });
  });

  describe('unique indexes', () => {
    const isDuplicate = (err: unknown): boolean => (err as { code?: number }).code === 11000;

    it('means what it means in MongoDB: true and 1 differ, null collides with null and missing, 1 with 1.0', async () => {
      await launch();
      const client = await connect();
      const things = client.db('unique').collection<Doc>('things');
      await things.createIndex({ u: 1 }, { unique: true, name: 'u' });
      const failures: string[] = [];
      const accepted = async (doc: Doc): Promise<void> => {
        try {
          await things.insertOne(doc);
        } catch (err) {
          failures.push(`insert ${ejson(doc)} must succeed: ${messageOf(err)}`);
        }
      };
      const refused = async (doc: Doc): Promise<void> => {
        try {
          await things.insertOne(doc);
          failures.push(`insert ${ejson(doc)} must be refused with E11000, it was accepted`);
        } catch (err) {
          if (!isDuplicate(err))
            failures.push(`insert ${ejson(doc)}: E11000 expected, got ${messageOf(err)}`);
        }
      };
      await accepted({ _id: 'true', u: true });
      await accepted({ _id: 'one', u: 1 });
      await accepted({ _id: 'false', u: false });
      await accepted({ _id: 'zero', u: 0 });
      await accepted({ _id: 'text', u: '1' });
      await accepted({ _id: 'date', u: new Date(1) });
      await accepted({ _id: 'null', u: null });
      await accepted({ _id: 'l53p1', u: big(P53 + 1n) });
      await accepted({ _id: 'd53', u: new Double(2 ** 53) });
      await accepted({ _id: 'l63m1', u: big(P63 - 1n) });
      await accepted({ _id: 'd63', u: new Double(2 ** 63) });
      await refused({ _id: 'null2', u: null });
      await refused({ _id: 'double1', u: new Double(1) });
      await refused({ _id: 'long1', u: Long.fromNumber(1) });
      await refused({ _id: 'true2', u: true });
      await refused({ _id: 'date2', u: new Date(1) });
      await refused({ _id: 'l53', u: big(P53) });
      await refused({ _id: 'missing' }); // a missing field is null to a unique index
      // An update onto a taken value is E11000 too (upstream FerretDB answered a code-1 "UNIQUE constraint failed").
      try {
        await things.updateOne({ _id: 'text' }, { $set: { u: true } });
        failures.push('updateOne setting u: true on a second document must be refused');
      } catch (err) {
        if ((err as { code?: number }).code !== 11000)
          failures.push(`updateOne onto a taken value must be E11000, got ${String(err)}`);
      }
      noFailures(failures, 'unique-index answers unlike MongoDB');
      assert.equal(await things.countDocuments({}), 11);
    });

    it('starts on a folder an unpatched FerretDB wrote with {u: true} and {u: 1} under a unique index, twice', async () => {
      // upstream_unique.sqlite was written by FerretDB v1.24.2 WITHOUT the project's patch: tools/ferretdb's
      // main.go, go.mod and go.sum copied to a temp dir, migrate.go and the migrateIndexes call deleted, built with
      // `go build -o /tmp/ferretdb-upstream .` (the module from the Go module cache, unpatched), run with
      // `-listen 127.0.0.1:0 -data <dir>`; then through the driver: db upstream_unique, collection things,
      // createIndex({u: 1}, {unique: true, name: 'u_unique'}), insertMany of {_id: 'true', u: true},
      // {_id: 'one', u: 1}, {_id: 'text', u: '1'}, {_id: 'null', u: null}; stopped with SIGTERM (no WAL left).
      // Its unique index is on the field's JSON text (`_ferretdb_sjson->"u"`), where true and 1 differ.
      mkdirSync(path.join(dataRoot, 'ferretdb'), { recursive: true });
      copyFileSync(
        path.join(PROJECT_ROOT, 'test/fixtures/ferretdb-upstream/upstream_unique.sqlite'),
        path.join(dataRoot, 'ferretdb', 'upstream_unique.sqlite'),
      );
      for (let start = 1; start <= 2; start++) {
        try {
          await launch();
        } catch (err) {
          assert.fail(`start ${start} on the upstream folder failed: ${messageOf(err)}`);
        }
        const client = await connect();
        const things = client.db('upstream_unique').collection<Doc>('things');
        const docs = await things.find({}, { ...EXACT, sort: { _id: 1 } }).toArray();
        const expected = [
          { _id: 'after', u: 'after' },
          { _id: 'null', u: null },
          { _id: 'one', u: new Int32(1) },
          { _id: 'text', u: '1' },
          { _id: 'true', u: true },
        ].filter((doc) => start === 2 || doc._id !== 'after');
        assert.equal(ejson(docs), ejson(expected), `start ${start}: the documents`);
        const indexes = await things.indexes();
        assert.deepEqual(
          indexes.map((index) => [index.name, index.key, index.unique ?? false]),
          [
            ['_id_', { _id: 1 }, false],
            ['u_unique', { u: 1 }, true],
          ],
          `start ${start}: the indexes`,
        );
        for (const dup of [{ u: true }, { u: new Double(1) }, { u: '1' }, { u: null }]) {
          await assert.rejects(
            things.insertOne({ _id: `dup${start}`, ...dup }),
            (err) => isDuplicate(err),
            `start ${start}: a second ${ejson(dup)} must be refused with E11000`,
          );
        }
        if (start === 1) await things.insertOne({ _id: 'after', u: 'after' });
        assert.equal(await things.countDocuments({ u: true }), 1);
        assert.equal(await things.countDocuments({ u: 1 }), 1);
        await shutdown();
      }
    });
  });
});
