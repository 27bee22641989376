// The rate_limits store on the real server: a burst racing on one key, and the sweep's reaper where the server
// has no TTL index.
import assert from 'node:assert/strict';
import { createSweepActivities } from '../activities/sweep';
import type { Config } from '../config';
import { connectMongo, type Mongo } from '../store/mongo';
import type { Stores } from '../store';
import { createRateLimitStore, type RateLimitStore } from '../store/rateLimits';
import { openStores, temporalClient } from './support/harness';
import { testConfig } from './support/stack';

describe('rate limits', function () {
  this.timeout(60_000);
  let config: Config;
  let mongo: Mongo;
  let others: Mongo[];
  let stores: Stores;

  before(async () => {
    config = testConfig();
    ({ mongo, stores } = await openStores(config));
    // Two more connections over the same database: hits from three processes.
    others = await Promise.all([0, 1].map(() => connectMongo(config.mongoUrl, config.mongoDb)));
  });
  after(async () => {
    await mongo?.client.close();
    for (const other of others ?? []) await other.client.close();
  });

  const rows = () => mongo.db.collection('rate_limits');

  it("a burst racing on one key admits at least one and at most the limit, and never locks the key's owner out", async () => {
    const rule = { limit: 5, windowSeconds: 60 };
    const limiters: RateLimitStore[] = [stores.rateLimits, ...others.map((o) => createRateLimitStore(o.db))];
    const now = new Date();
    const burst = await Promise.all(
      Array.from({ length: 50 }, (_, i) => limiters[i % limiters.length].hit('burst|owner', rule, now)),
    );
    const admitted = burst.filter((a) => a.admitted).length;
    assert.ok(admitted >= 1 && admitted <= rule.limit, `${admitted} of 50 admitted against a limit of 5`);
    for (const refused of burst) {
      if (!refused.admitted) assert.ok(refused.retryAfterSeconds >= 1 && refused.retryAfterSeconds <= 60);
    }
    // Within the window the rest of the limit is still there, and no more; after it the owner has all of it again.
    const soon = new Date(now.getTime() + 1000);
    let more = 0;
    while (more <= rule.limit && (await stores.rateLimits.hit('burst|owner', rule, soon)).admitted) more++;
    assert.equal(admitted + more, rule.limit, `${admitted} admitted in the burst, ${more} after it`);
    const later = new Date(soon.getTime() + 60_001);
    const next = [];
    for (let i = 0; i < 6; i++) next.push((await stores.rateLimits.hit('burst|owner', rule, later)).admitted);
    assert.deepEqual(next, [true, true, true, true, true, false]);
  });

  it('a window that moved on admits its limit and no more, window after window (a limit of one too)', async () => {
    for (const limit of [1, 2]) {
      const rule = { limit, windowSeconds: 60 };
      const key = `moving|${limit}|${Date.now()}`;
      const start = Date.now();
      const admitted: boolean[][] = [];
      for (const window of [0, 1, 2]) {
        const at = (s: number) => new Date(start + window * 61_000 + s * 1000);
        const hits = [];
        for (let i = 0; i <= limit; i++) hits.push((await stores.rateLimits.hit(key, rule, at(i))).admitted);
        admitted.push(hits);
      }
      const each = [...Array(limit).fill(true), false];
      assert.deepEqual(admitted, [each, each, each], `a limit of ${limit}`);
    }
  });

  it('a burst that moves the window on to a new bucket admits up to what is left of the limit, and at least one', async () => {
    const rule = { limit: 5, windowSeconds: 60 };
    const limiters: RateLimitStore[] = [stores.rateLimits, ...others.map((o) => createRateLimitStore(o.db))];
    const now = new Date();
    // Two hits 20 s before: the burst's writers all find the row's newest bucket behind theirs.
    const before = new Date(now.getTime() - 20_000);
    for (const hitId of ['a', 'b'])
      assert.ok((await stores.rateLimits.hit('roll|owner', rule, before, hitId)).admitted);
    const burst = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        limiters[i % limiters.length].hit('roll|owner', rule, now, `burst-${i}`),
      ),
    );
    const admitted = burst.filter((a) => a.admitted).length;
    assert.ok(admitted >= 1 && admitted <= 3, `${admitted} of 30 admitted with 3 of the limit left`);
    let more = 0;
    while (more <= rule.limit && (await stores.rateLimits.hit('roll|owner', rule, now)).admitted) more++;
    assert.equal(admitted + more, 3, `${admitted} admitted in the burst, ${more} after it`);
    const refused = await stores.rateLimits.hit('roll|owner', rule, now);
    assert.ok(!refused.admitted);
    // The oldest hits, 20 s before, are their bucket's newest: it leaves the window 40 s from now.
    assert.equal(refused.freeAt.getTime() - now.getTime(), 40_000);
  });

  it('a hit given back is uncounted once, however often it is given back; a repeat of a hit counts once', async () => {
    const rule = { limit: 2, windowSeconds: 60 };
    const now = new Date();
    const first = await stores.rateLimits.hit('back|owner', rule, now, 'h1');
    assert.ok(first.admitted && first.useId);
    assert.ok((await stores.rateLimits.hit('back|owner', rule, now, 'h1')).admitted, 'a repeat');
    assert.ok((await stores.rateLimits.hit('back|owner', rule, now, 'h2')).admitted);
    const full = await stores.rateLimits.hit('back|owner', rule, now, 'h3');
    assert.ok(!full.admitted, 'the repeat was not counted: h1 and h2 fill the limit');
    const stored = await rows().countDocuments();
    assert.ok(!(await stores.rateLimits.hit('back|owner', rule, now, 'h3')).admitted);
    assert.equal(await rows().countDocuments(), stored, 'a refusal stores nothing');
    await stores.rateLimits.giveBack(first.useId);
    await stores.rateLimits.giveBack(first.useId);
    assert.ok((await stores.rateLimits.hit('back|owner', rule, now, 'h3')).admitted);
    assert.ok(!(await stores.rateLimits.hit('back|owner', rule, now, 'h4')).admitted);
  });

  it('a hit without an id released twice is uncounted once', async () => {
    const rule = { limit: 2, windowSeconds: 60 };
    const key = `release-twice|${Date.now()}`;
    const now = new Date();
    const first = await stores.rateLimits.hit(key, rule, now);
    assert.ok((await stores.rateLimits.hit(key, rule, now)).admitted);
    assert.ok(first.admitted);
    await first.release();
    await first.release();
    const admitted = [];
    for (let i = 0; i < 3; i++) admitted.push((await stores.rateLimits.hit(key, rule, now)).admitted);
    assert.deepEqual(admitted, [true, false, false], 'one hit given back, not two');
  });

  it('a hit repeated after its row expired (not reaped yet) counts again, and its give-back uncounts that count', async () => {
    const rule = { limit: 2, windowSeconds: 60 };
    const key = `back-late|${Date.now()}`;
    const now = new Date();
    assert.ok((await stores.rateLimits.hit(key, rule, now, 'h1')).admitted);
    // A redelivery held, handed back a window and a half later: hit again, then given back.
    const later = new Date(now.getTime() + 90_000);
    const again = await stores.rateLimits.hit(key, rule, later, 'h1');
    assert.ok(again.admitted && again.useId);
    await stores.rateLimits.giveBack(again.useId);
    const window = await rows().findOne({ _id: `window|${key}` as never });
    assert.equal(window?.total, 0, 'nothing counted in the window once given back');
    const admitted = [];
    for (const id of ['h2', 'h3', 'h4'])
      admitted.push((await stores.rateLimits.hit(key, rule, later, id)).admitted);
    assert.deepEqual(admitted, [true, true, false], 'the whole limit is there again');
  });

  it('a hit reads a few documents, whatever the limit and however many hits the key already counted', async () => {
    const monitored = await connectMongo(config.mongoUrl, config.mongoDb, { monitorCommands: true });
    try {
      let documentsRead = 0;
      monitored.client.on('commandSucceeded', (event) => {
        const cursor = (event.reply as { cursor?: { firstBatch?: unknown[]; nextBatch?: unknown[] } }).cursor;
        documentsRead += (cursor?.firstBatch ?? cursor?.nextBatch ?? []).length;
      });
      const limiter = createRateLimitStore(monitored.db);
      const rule = { limit: 100_000, windowSeconds: 600 };
      const now = new Date();
      const earlier = Array.from({ length: 300 }, (_, i) => `earlier-${i}`);
      for (const hitId of earlier) assert.ok((await limiter.hit('cost|many', rule, now, hitId)).admitted);
      documentsRead = 0;
      assert.ok((await limiter.hit('cost|many', rule, now, 'one-more')).admitted);
      assert.ok((await limiter.hit('cost|many', rule, now, 'one-more')).admitted, 'a repeat is admitted');
      assert.ok(
        documentsRead <= 4,
        `two hits read ${documentsRead} documents after 300 earlier hits of the key`,
      );
    } finally {
      await monitored.client.close();
    }
  });

  it('hits on several keys at once, racing from three processes: each key counts exactly the hits it admitted, each with its row', async () => {
    const rule = { limit: 1000, windowSeconds: 600 };
    const limiters: RateLimitStore[] = [stores.rateLimits, ...others.map((o) => createRateLimitStore(o.db))];
    const now = new Date();
    const keys = ['multi-a', 'multi-b', 'multi-c'];
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        limiters[i % limiters.length].hitMany(keys, rule, now, `episode-${i}`),
      ),
    );
    for (const key of keys) {
      const admitted = answers.filter((answer) => answer.get(key)!.admitted).length;
      const window = await rows().findOne({ _id: `window|${key}` as never });
      const hitRows = await rows().countDocuments({ _id: { $regex: `^hit\\|${key}\\|` } as never });
      assert.deepEqual({ counted: window?.total, hitRows }, { counted: admitted, hitRows: admitted }, key);
    }
  });

  it('a hit with an id is one read and one write', async () => {
    const monitored = await connectMongo(config.mongoUrl, config.mongoDb, { monitorCommands: true });
    try {
      const commands: string[] = [];
      monitored.client.on('commandStarted', (event) => commands.push(event.commandName));
      const limiter = createRateLimitStore(monitored.db);
      const rule = { limit: 100, windowSeconds: 600 };
      const now = new Date();
      assert.ok((await limiter.hitMany(['trips|a', 'trips|b'], rule, now, 'first')).get('trips|a')!.admitted);
      assert.deepEqual(commands, ['find', 'update']);
      commands.length = 0;
      assert.ok(
        (await limiter.hitMany(['trips|a', 'trips|b'], rule, now, 'second')).get('trips|b')!.admitted,
      );
      assert.deepEqual(commands, ['find', 'update']);
    } finally {
      await monitored.client.close();
    }
  });

  it('the sweep reaper removes expired rate-limit rows where the server has no TTL index', async () => {
    const rule = { limit: 3, windowSeconds: 60 };
    const now = new Date();
    const hourAgo = new Date(now.getTime() - 3600_000);
    await stores.rateLimits.hit('reap|gone', rule, hourAgo);
    await stores.rateLimits.hit('reap|gone', rule, hourAgo);
    await stores.rateLimits.hit('reap|live', rule, now);
    const temporal = await temporalClient(config);
    try {
      const sweep = createSweepActivities({
        ...stores,
        client: temporal.client,
        taskQueue: config.temporalTaskQueue,
        episodeOptions: { callbackRetrySeconds: [1] },
        families: { ops: false },
        lookbackSeconds: 60,
        pageSize: 10,
        now: () => now,
      });
      assert.ok((await sweep.sweepReapExpired()) >= 1);
    } finally {
      await temporal.close();
    }
    assert.equal(await rows().countDocuments({ _id: 'window|reap|gone' as never }), 0);
    assert.equal(await rows().countDocuments({ _id: 'window|reap|live' as never }), 1);
  });
});
