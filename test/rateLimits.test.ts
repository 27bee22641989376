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

  it("a hit reads a few documents, whatever the limit and however many hits the key already counted", async () => {
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
      assert.ok(documentsRead <= 4, `two hits read ${documentsRead} documents after 300 earlier hits of the key`);
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
      assert.ok((await sweep.sweepReapExpired()) >= 2);
    } finally {
      await temporal.close();
    }
    assert.equal(await rows().countDocuments({ key: 'reap|gone' }), 0);
    assert.equal(await rows().countDocuments({ key: 'reap|live' }), 1);
  });
});
