// The project's FerretDB patch (tools/ferretdb/patch) pushes filters, sorts and limits down to the collection's
// SQLite indexes. It must answer every query exactly as FerretDB does without an index: the same documents, in the
// same order. These tests hold an indexed collection to an unindexed twin with the same documents (FerretDB then
// evaluates everything in Go, its upstream behaviour), on a FerretDB of their own.
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Double, Long, MongoClient, type Collection, type Document, type Filter, type Sort } from 'mongodb';
import { launchMongo, PROJECT_ROOT, readStackSpec, type ServerProcess } from '../platform/embedded';
import { random } from './support/seeded';

const SEED = Number(process.env.PUSHDOWN_SEED ?? 20261202);

describe('FerretDB pushdown (the project patch)', function () {
  this.timeout(180_000);
  let dataRoot: string;
  let server: ServerProcess;
  let client: MongoClient;

  async function launch(): Promise<void> {
    const launched = await launchMongo(readStackSpec(), { freePorts: true, dataRoot, test: true });
    server = launched.server;
    client = new MongoClient(launched.url, { serverSelectionTimeoutMS: 5000 });
    await client.connect();
  }

  async function shutdown(): Promise<void> {
    await client?.close();
    await server?.stop();
  }

  beforeEach(() => {
    dataRoot = mkdtempSync(path.join(tmpdir(), 'flow-notify-pushdown-'));
  });

  afterEach(async () => {
    await shutdown();
    rmSync(dataRoot, { recursive: true, force: true });
  });

  /** The same documents in an indexed collection and an unindexed one. */
  async function twins(
    docs: Document[],
    indexes: { key: Record<string, 1 | -1>; name: string }[],
  ): Promise<{ indexed: Collection; plain: Collection }> {
    const db = client.db('pushdown');
    const indexed = db.collection('indexed');
    const plain = db.collection('plain');
    for (const index of indexes) await indexed.createIndex(index.key, { name: index.name });
    await indexed.insertMany(docs.map((doc) => ({ ...doc })));
    await plain.insertMany(docs.map((doc) => ({ ...doc })));
    return { indexed, plain };
  }

  const ids = (docs: Document[]): string[] => docs.map((doc) => String(doc._id));

  it('selects exactly the documents FerretDB selects without an index, whatever the field types', async () => {
    await launch();
    const rand = random(SEED);
    const pick = <T>(values: T[]): T => values[Math.floor(rand() * values.length)];
    // Few distinct values of every kind the pushdown must get right, so queries hit and miss them all: strings
    // (one looks like an array's JSON text), 32- and 64-bit integers and doubles equal to them, dates, booleans,
    // null, a missing field, arrays (empty too) and documents.
    const scalars = (): unknown[] => [
      'x',
      'y',
      '[x',
      '',
      1,
      2,
      Long.fromNumber(2),
      2.5,
      new Date(1000),
      new Date(2000),
      true,
      false,
      null,
    ];
    const value = (): unknown => {
      const r = rand();
      if (r < 0.1) return undefined;
      if (r < 0.2) return [pick(scalars()), pick(scalars())];
      if (r < 0.23) return [];
      if (r < 0.26) return { x: pick(scalars()) };
      return pick(scalars());
    };
    const scalar = (): unknown =>
      rand() < 0.1 ? undefined : rand() < 0.05 ? { x: pick(scalars()) } : pick(scalars());
    // a and d never hold an array, so their conditions are pushed down; b and e sometimes do, which turns the
    // pushdown of that field off (b: within the rows of one a; e: in the whole collection).
    const docs: Document[] = [];
    for (let i = 0; i < 400; i++) {
      const doc: Document = { _id: `d${String(i).padStart(3, '0')}` };
      const fields: Record<string, unknown> = {
        a: scalar(),
        b: value(),
        d: rand() < 0.7 ? new Date(Math.floor(rand() * 4000)) : scalar(),
        e: value(),
      };
      for (const [field, v] of Object.entries(fields)) if (v !== undefined) doc[field] = v;
      docs.push(doc);
    }
    const { indexed, plain } = await twins(docs, [
      { key: { a: 1 }, name: 'a' },
      { key: { a: 1, b: -1, _id: -1 }, name: 'a_b' },
      { key: { d: 1 }, name: 'd' },
      { key: { e: 1 }, name: 'e' },
    ]);

    const bound = (): unknown =>
      pick([
        ...scalars().filter((v) => v !== null && typeof v !== 'boolean'),
        new Date(Math.floor(rand() * 4000)),
      ]);
    const range = (): Record<string, unknown> => {
      const ops = pick([['$gt'], ['$gte'], ['$lt'], ['$lte'], ['$gt', '$lt'], ['$gte', '$lte']]);
      return Object.fromEntries(ops.map((op) => [op, bound()]));
    };
    const queries: Filter<Document>[] = [];
    for (let i = 0; i < 150; i++) {
      queries.push(
        pick<() => Filter<Document>>([
          () => ({ a: pick(scalars().filter((v) => v !== null)) }),
          () => ({
            a: {
              $in: [pick(scalars().filter((v) => v !== null)), pick(scalars().filter((v) => v !== null))],
            },
          }),
          () => ({ a: pick(scalars().filter((v) => v !== null)), b: range() }),
          () => ({
            a: pick(scalars().filter((v) => v !== null)),
            b: pick(scalars().filter((v) => v !== null)),
          }),
          () => ({ d: range() }),
          () => ({ d: range(), a: { $exists: true } }),
          () => ({ a: range() }),
          () => ({ e: pick(scalars().filter((v) => v !== null)) }),
          () => ({ e: range() }),
        ])(),
      );
    }

    let pushed = 0;
    for (const filter of queries) {
      const expected = ids(await plain.find(filter).toArray()).sort();
      const actual = ids(await indexed.find(filter).toArray()).sort();
      assert.deepEqual(actual, expected, `seed ${SEED}: ${JSON.stringify(filter)}`);
      assert.equal(await indexed.countDocuments(filter), expected.length, `count ${JSON.stringify(filter)}`);
      if ((await indexed.find(filter).explain()).filterPushdown) pushed++;
    }
    // The oracle above holds either way; this says the queries did exercise the pushdown.
    assert.ok(pushed > queries.length / 2, `only ${pushed} of ${queries.length} queries were pushed down`);
    assert.equal((await indexed.find({ e: 'x' }).explain()).filterPushdown, false);
  });

  it('selects what FerretDB selects without an index for doubles of any magnitude (SQLite reads some past 1e22 inexactly)', async () => {
    await launch();
    const rand = random(SEED + 7);
    /** A double of magnitude 10^-300 to 10^300, either sign, with all 53 bits of its mantissa in use. */
    const wide = (): number => (rand() < 0.5 ? -1 : 1) * (1 + rand()) * 10 ** Math.floor(rand() * 600 - 300);
    /** The next double up from x (or down): a bound one unit in the last place away. */
    const next = (x: number, up = true): number => {
      const view = new DataView(new ArrayBuffer(8));
      view.setFloat64(0, x);
      const bits = view.getBigUint64(0);
      view.setBigUint64(0, x > 0 === up ? bits + 1n : bits - 1n);
      return view.getFloat64(0);
    };
    const values = Array.from({ length: 120 }, wide);
    const docs = values.map((a, i) => ({ _id: `d${String(i).padStart(3, '0')}`, a: new Double(a) }));
    const { indexed, plain } = await twins(docs, [{ key: { a: 1 }, name: 'a' }]);
    const queries: Filter<Document>[] = [];
    for (let i = 0; i < 200; i++) {
      const x = values[Math.floor(rand() * values.length)];
      const near = [x, next(x), next(x, false)][Math.floor(rand() * 3)];
      queries.push(
        [
          { a: new Double(x) },
          { a: { $in: [new Double(x), new Double(near)] } },
          { a: { $lte: new Double(near) } },
          { a: { $gt: new Double(near) } },
          { a: { $gte: new Double(Math.min(x, near)), $lte: new Double(Math.max(x, near)) } },
        ][i % 5] as Filter<Document>,
      );
    }
    for (const filter of queries) {
      const expected = ids(await plain.find(filter).toArray()).sort();
      assert.deepEqual(
        ids(await indexed.find(filter).toArray()).sort(),
        expected,
        `seed ${SEED + 7}: ${JSON.stringify(filter)}`,
      );
      assert.equal(await indexed.countDocuments(filter), expected.length, `count ${JSON.stringify(filter)}`);
    }
  });

  it('serves a sorted, limited listing from the index, in the order FerretDB sorts it', async () => {
    await launch();
    const rand = random(SEED + 1);
    const docs: Document[] = [];
    for (let i = 0; i < 600; i++) {
      const r = rand();
      const doc: Document = { _id: `r${String(i).padStart(3, '0')}`, teamId: `team${i % 4}` };
      // Ties on the date (the _id orders them), a few runs without one, one with null.
      if (r > 0.05) doc.createdAt = new Date(Math.floor(rand() * 50) * 1000);
      else if (r > 0.04) doc.createdAt = null;
      docs.push(doc);
    }
    const { indexed, plain } = await twins(docs, [
      { key: { teamId: 1, createdAt: -1, _id: -1 }, name: 'team_recent' },
    ]);
    const cases: { filter: Filter<Document>; sort: Sort; limit: number }[] = [
      { filter: { teamId: 'team1' }, sort: { createdAt: -1, _id: -1 }, limit: 20 },
      { filter: { teamId: 'team2' }, sort: { createdAt: 1, _id: 1 }, limit: 7 },
      {
        filter: { teamId: 'team3', createdAt: { $lte: new Date(20_000) } },
        sort: { createdAt: -1, _id: -1 },
        limit: 30,
      },
      { filter: { teamId: 'team0', createdAt: { $gt: new Date(5000) } }, sort: { createdAt: -1 }, limit: 0 },
    ];
    // Without _id in the sort, rows tied on the date may come in any order: compare the dates, and the rows.
    const listed = (docs: Document[], sort: Sort): string[] =>
      'createdAt' in (sort as object) && !('_id' in (sort as object))
        ? [...docs.map((doc) => String(doc.createdAt?.getTime())), ...ids(docs).sort()]
        : ids(docs);
    for (const { filter, sort, limit } of cases) {
      const expected = listed(await plain.find(filter).sort(sort).limit(limit).toArray(), sort);
      const actual = listed(await indexed.find(filter).sort(sort).limit(limit).toArray(), sort);
      assert.deepEqual(actual, expected, JSON.stringify({ filter, sort, limit }));
      const explain = await indexed.find(filter).sort(sort).limit(limit).explain();
      assert.equal(explain.filterPushdown, true, JSON.stringify(explain));
      assert.equal(explain.sortPushdown, true, JSON.stringify(explain));
      assert.equal(explain.limitPushdown, limit !== 0, JSON.stringify(explain));
      assert.doesNotMatch(JSON.stringify(explain.queryPlanner), /TEMP B-TREE/);
    }
    // Paging by cursor reads page after page in the same order as one listing.
    const pages: string[] = [];
    let before: Document | undefined;
    for (;;) {
      const filter: Filter<Document> = before
        ? { teamId: 'team1', createdAt: { $lte: before.createdAt } }
        : { teamId: 'team1', createdAt: { $lte: new Date(8.64e15) } };
      const page = (
        await indexed
          .find(filter)
          .sort({ createdAt: -1, _id: -1 })
          .limit(25 + 10)
          .toArray()
      )
        .filter((doc) => !before || doc.createdAt < before.createdAt || doc._id < before._id)
        .slice(0, 25);
      if (!page.length) break;
      pages.push(...ids(page));
      before = page[page.length - 1];
    }
    const dated = { teamId: 'team1', createdAt: { $lte: new Date(8.64e15) } };
    assert.deepEqual(pages, ids(await plain.find(dated).sort({ createdAt: -1, _id: -1 }).toArray()));
  });

  it('sorts in memory when the sorted field holds an array, and serves a sort field of mixed types in BSON order', async () => {
    await launch();
    const docs: Document[] = [
      { _id: 'a1', teamId: 't', createdAt: new Date(3000) },
      { _id: 'a2', teamId: 't', createdAt: [new Date(1000), new Date(5000)] },
      { _id: 'a3', teamId: 't', createdAt: new Date(2000) },
      { _id: 'm1', teamId: 'm', createdAt: new Date(1_000_000) },
      { _id: 'm2', teamId: 'm', createdAt: 2_000_000 },
    ];
    const { indexed, plain } = await twins(docs, [
      { key: { teamId: 1, createdAt: 1 }, name: 'team_created' },
    ]);
    const arrays = { teamId: 't' };
    assert.deepEqual(
      ids(await indexed.find(arrays).sort({ createdAt: 1 }).toArray()),
      ids(await plain.find(arrays).sort({ createdAt: 1 }).toArray()),
    );
    assert.equal((await indexed.find(arrays).sort({ createdAt: 1 }).explain()).sortPushdown, false);
    // A number above a date's milliseconds: the index orders by type rank first, so numbers come first, as in
    // MongoDB, and a limit ends the read there.
    const mixed = indexed.find({ teamId: 'm' }).sort({ createdAt: 1 }).limit(1);
    assert.deepEqual(ids(await mixed.toArray()), ['m2']);
    assert.equal(
      (await indexed.find({ teamId: 'm' }).sort({ createdAt: 1 }).limit(1).explain()).sortPushdown,
      true,
    );
    assert.deepEqual(ids(await indexed.find({ teamId: 'm' }).sort({ createdAt: 1 }).toArray()), ['m2', 'm1']);
    assert.deepEqual(ids(await plain.find({ teamId: 'm' }).sort({ createdAt: 1 }).toArray()), ['m2', 'm1']);
  });

  it('writes an update of many documents in batches: every one, counted once, and updateOne one', async () => {
    await launch();
    const docs = Array.from({ length: 1234 }, (_, i) => ({
      _id: `u${i}`,
      team: i % 2 ? 'odd' : 'even',
      n: 0,
    }));
    const { indexed } = await twins(docs, [{ key: { team: 1 }, name: 'team' }]);
    const many = await indexed.updateMany({ team: 'odd' }, { $inc: { n: 1 } });
    assert.deepEqual([many.matchedCount, many.modifiedCount], [617, 617]);
    const unchanged = await indexed.updateMany({ team: 'odd' }, { $set: { team: 'odd' } });
    assert.deepEqual([unchanged.matchedCount, unchanged.modifiedCount], [617, 0]);
    const one = await indexed.updateOne({ team: 'even' }, { $inc: { n: 5 } });
    assert.deepEqual([one.matchedCount, one.modifiedCount], [1, 1]);
    assert.equal(await indexed.countDocuments({ n: 1 }), 617);
    assert.equal(await indexed.countDocuments({ n: 5 }), 1);
    assert.equal(await indexed.countDocuments({ n: 0 }), 616);
  });

  it('rebuilds the indexes an unpatched FerretDB made at start-up, once, keeping the data', async () => {
    // Made by FerretDB v1.24.2 with the project's earlier patch, whose indexes hold the fields' JSON text.
    mkdirSync(path.join(dataRoot, 'ferretdb'), { recursive: true });
    copyFileSync(
      path.join(PROJECT_ROOT, 'test/fixtures/ferretdb-upstream/upstream_indexes.sqlite'),
      path.join(dataRoot, 'ferretdb', 'upstream_indexes.sqlite'),
    );
    for (let start = 0; start < 2; start++) {
      await launch();
      const runs = client.db('upstream_indexes').collection('runs');
      assert.equal(await runs.countDocuments({}), 60);
      const explain = await runs.find({ teamId: 'team1' }).sort({ createdAt: -1 }).limit(5).explain();
      assert.equal(explain.filterPushdown, true, JSON.stringify(explain));
      assert.match(JSON.stringify(explain.queryPlanner), /USING INDEX runs_\w+_team_recent/);
      assert.deepEqual(ids(await runs.find({ teamId: 'team1' }).sort({ createdAt: -1 }).limit(3).toArray()), [
        'run58',
        'run55',
        'run52',
      ]);
      assert.equal(await runs.countDocuments({ 'callback.url': 'https://r1.example/hook' }), 30);
      assert.deepEqual((await runs.indexes()).map((index) => index.name).sort(), [
        '_id_',
        'nested',
        'team_recent',
      ]);
      await shutdown();
    }
  });
});
