// The episode claim store on the real MongoDB-wire server: the three states, the grace, takeover, re-entry,
// the reaper, and exclusivity under 20 concurrent contenders on separate connections.
import assert from 'node:assert/strict';
import { MongoClient } from 'mongodb';
import { claimKeys } from '../domain/outcome';
import { CLAIM_RETENTION_SECONDS } from '../domain/outcome';
import { createClaimStore, type ClaimRow } from '../store/claims';
import { connectMongo, type Mongo } from '../store/mongo';
import { ensureAllIndexes } from '../store';
import { testConfig } from './support/stack';
import type { Config } from '../config';

describe('episode claims (sent_notifications)', () => {
  let config: Config;
  let mongo: Mongo;
  let clock: Date;
  const now = () => clock;
  const advance = (seconds: number) => {
    clock = new Date(clock.getTime() + seconds * 1000);
  };
  const store = () => createClaimStore(mongo.db, { graceSeconds: 300, now });

  before(async () => {
    config = testConfig();
    mongo = await connectMongo(config.mongoUrl, config.mongoDb);
    await ensureAllIndexes(mongo.db);
  });
  beforeEach(() => {
    clock = new Date('2026-11-30T10:00:00Z');
  });
  after(() => mongo.client.close());

  it('absent → pending → delivered, and a delivered claim is never claimed again', async () => {
    const claims = store();
    assert.equal(await claims.state('ep-1'), 'absent');
    assert.equal(await claims.tryMark('ep-1', 'holder-a'), true);
    assert.equal(await claims.state('ep-1'), 'pending');
    assert.equal(await claims.markDelivered('ep-1', 'holder-a'), true);
    assert.equal(await claims.state('ep-1'), 'delivered');
    assert.equal(await claims.tryMark('ep-1', 'holder-b'), false);
    advance(10 * 24 * 3600);
    assert.equal(await claims.tryMark('ep-1', 'holder-b'), false, 'delivered is settled, grace or not');
    assert.equal(
      await claims.tryMark('ep-1', 'holder-a'),
      false,
      'not even its own holder re-enters a delivery',
    );
  });

  it('a pending claim inside the grace refuses another holder; after the grace a new holder takes over', async () => {
    const claims = store();
    assert.equal(await claims.tryMark('ep-2', 'holder-a'), true);
    advance(299);
    assert.equal(await claims.tryMark('ep-2', 'holder-b'), false);
    advance(2);
    assert.equal(await claims.tryMark('ep-2', 'holder-b'), true, 'stale claim taken over');
    assert.equal(await claims.markDelivered('ep-2', 'holder-a'), false, 'the stale holder lost its claim');
    assert.equal(await claims.markDelivered('ep-2', 'holder-b'), true);
  });

  it('the same holder re-enters its own pending claim (an activity may run twice)', async () => {
    const claims = store();
    assert.equal(await claims.tryMark('ep-3', 'holder-a'), true);
    assert.equal(await claims.tryMark('ep-3', 'holder-a'), true);
  });

  it('tryMarkEach claims several keys at once and keeps the rules of tryMark for each key already present', async () => {
    const claims = store();
    assert.deepEqual(await claims.tryMarkEach([], 'holder-a'), []);
    assert.equal(await claims.tryMark('each-delivered', 'holder-b'), true);
    assert.equal(await claims.markDelivered('each-delivered', 'holder-b'), true);
    assert.equal(await claims.tryMark('each-other', 'holder-b'), true);
    assert.equal(await claims.tryMark('each-stale', 'holder-b'), true);
    assert.equal(await claims.tryMark('each-mine', 'holder-a'), true);
    advance(200);
    assert.equal(await claims.renew('each-other', 'holder-b'), true, 'holder-b keeps it in hand');
    advance(200);
    const keys = ['each-new-1', 'each-delivered', 'each-other', 'each-stale', 'each-mine', 'each-new-2'];
    assert.deepEqual(await claims.tryMarkEach(keys, 'holder-a'), [true, false, false, true, true, true]);
    for (const key of ['each-new-1', 'each-stale', 'each-mine', 'each-new-2'])
      assert.equal(await claims.markDelivered(key, 'holder-a'), true, `holder-a holds ${key}`);
    assert.equal(await claims.markDelivered('each-other', 'holder-b'), true, 'holder-b keeps its claim');
  });

  it('isMarked is true for a pending claim inside the grace; wasDelivered is not', async () => {
    const claims = store();
    await claims.tryMark('ep-4', 'holder-a');
    assert.equal(await claims.isMarked('ep-4'), true);
    assert.equal(await claims.wasDelivered('ep-4'), false);
    advance(301);
    assert.equal(await claims.isMarked('ep-4'), false, 'a stale pending claim shields nothing');
    await claims.markDelivered('ep-4', 'holder-a');
    assert.equal(await claims.isMarked('ep-4'), true);
    assert.equal(await claims.wasDelivered('ep-4'), true);
  });

  it('unmark releases a pending claim, and never undoes a delivery', async () => {
    const claims = store();
    await claims.tryMark('ep-5', 'holder-a');
    await claims.unmark('ep-5', 'holder-b');
    assert.equal(await claims.state('ep-5'), 'pending', 'another holder cannot release it');
    await claims.unmark('ep-5', 'holder-a');
    assert.equal(await claims.state('ep-5'), 'absent');
    assert.equal(await claims.tryMark('ep-5', 'holder-b'), true);
    await claims.markDelivered('ep-5', 'holder-b');
    await claims.unmark('ep-5', 'holder-b');
    assert.equal(await claims.state('ep-5'), 'delivered');
  });

  it('a settle made again (its first answer lost) is answered as made, and never overwrites what came since', async () => {
    const claims = store();
    assert.equal(await claims.tryMark('cb|ep-6', 'schedule'), true);
    assert.equal(await claims.markDelivered('cb|ep-6', 'schedule', 'gave_up: http 503'), true);
    // A redelivery delivered it since; the schedule's settle, its answer lost in a blip, is made again.
    assert.equal(await claims.resettle('cb|ep-6', 'redelivered'), true);
    assert.equal(await claims.markDelivered('cb|ep-6', 'schedule', 'gave_up: http 503'), true);
    assert.deepEqual(await claims.describe('cb|ep-6'), { state: 'delivered', result: 'redelivered' });
    assert.equal(await claims.markDelivered('cb|ep-6', 'another'), false, 'not its holder');
  });

  it('ops| and cb| keys never collide with the push key of the same episode', async () => {
    const claims = store();
    const episode = 'run_x:end';
    assert.equal(await claims.tryMark(claimKeys.push(episode), 'push'), true);
    assert.equal(await claims.tryMark(claimKeys.ops(episode), 'ops'), true);
    assert.equal(await claims.tryMark(claimKeys.callback(episode), 'cb'), true);
    await claims.markDelivered(claimKeys.ops(episode), 'ops');
    assert.equal(await claims.state(claimKeys.push(episode)), 'pending');
    assert.equal(await claims.state(claimKeys.ops(episode)), 'delivered');
  });

  it('markedSince reads every key in hand since a moment in one query: pending and delivered, not released', async () => {
    const claims = store();
    const since = new Date(now().getTime() - 1000);
    await claims.tryMark('batch-1', 'h');
    await claims.tryMark('batch-2', 'h');
    await claims.markDelivered('batch-2', 'h');
    await claims.tryMark('batch-3', 'h');
    await claims.unmark('batch-3', 'h');
    const marked = [...(await claims.markedSince(since)).marked].filter((key) => key.startsWith('batch-'));
    assert.deepEqual(marked.sort(), ['batch-1', 'batch-2']);
  });

  it('the reaper removes claims older than 30 days and nothing younger', async () => {
    // Its own database, so the other tests' claims do not count.
    const claims = createClaimStore(mongo.client.db(`${config.mongoDb}_reaper`), { graceSeconds: 300, now });
    await claims.tryMark('old', 'h');
    await claims.markDelivered('old', 'h');
    advance(CLAIM_RETENTION_SECONDS - 60);
    await claims.tryMark('young', 'h');
    advance(120); // "old" is now 30 days + 60 s old, "young" 2 minutes
    const reaped = await claims.reapExpired();
    assert.equal(reaped, 1);
    assert.equal(await claims.state('old'), 'absent');
    assert.equal(await claims.state('young'), 'pending');
  });

  it('20 concurrent tryMark calls for one key from separate connections: exactly one wins', async () => {
    const clients = await Promise.all(
      Array.from({ length: 20 }, () => new MongoClient(config.mongoUrl, { maxPoolSize: 1 }).connect()),
    );
    try {
      const results = await Promise.all(
        clients.map((client, i) =>
          createClaimStore(client.db(config.mongoDb), { graceSeconds: 300, now }).tryMark(
            'contended',
            `h${i}`,
          ),
        ),
      );
      assert.equal(results.filter(Boolean).length, 1);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  it('a holder renewing between a takeover reading its claim and deleting it keeps the claim', async () => {
    const holder = store();
    await holder.tryMark('renewed', 'slow-holder');
    advance(400);
    // The contender's database: once its takeover marker is in, the holder renews, before the stale row goes.
    const interleaved = new Proxy(mongo.db, {
      get(target, prop, receiver) {
        if (prop !== 'collection') return Reflect.get(target, prop, receiver);
        return (name: string) => {
          const collection = target.collection<ClaimRow>(name);
          return new Proxy(collection, {
            get(c, p, r) {
              if (p !== 'insertOne') return Reflect.get(c, p, r);
              return async (doc: ClaimRow) => {
                const result = await c.insertOne(doc);
                if (doc._id.startsWith('takeover|'))
                  assert.equal(await holder.renew('renewed', 'slow-holder'), true);
                return result;
              };
            },
          });
        };
      },
    });
    const takenOver: string[] = [];
    const contender = createClaimStore(interleaved, {
      graceSeconds: 300,
      now,
      onTakeover: (key) => takenOver.push(key),
    });
    assert.equal(await contender.tryMark('renewed', 'contender'), false, 'the renewed claim is not stale');
    assert.deepEqual(takenOver, []);
    assert.equal(await holder.markDelivered('renewed', 'slow-holder'), true, 'the holder still holds it');
  });

  it('20 concurrent takeovers of one stale claim: exactly one wins', async () => {
    await store().tryMark('stale', 'crashed-holder');
    advance(400);
    const clients = await Promise.all(
      Array.from({ length: 20 }, () => new MongoClient(config.mongoUrl, { maxPoolSize: 1 }).connect()),
    );
    try {
      const results = await Promise.all(
        clients.map((client, i) =>
          createClaimStore(client.db(config.mongoDb), { graceSeconds: 300, now }).tryMark('stale', `h${i}`),
        ),
      );
      assert.equal(results.filter(Boolean).length, 1);
      const row = await mongo.db.collection<ClaimRow>('sent_notifications').findOne({ _id: 'stale' });
      assert.equal(row?.holder, `h${results.indexOf(true)}`);
    } finally {
      await Promise.all(clients.map((c) => c.close()));
    }
  });

  describe('a takeover whose contender stopped between its marker and its delete (a store error, a crash)', () => {
    /** A claim of `key` gone stale, and the marker its stopped contender left on it. */
    async function stoppedMidTakeover(key: string, contender: string): Promise<void> {
      assert.equal(await store().tryMark(key, 'crashed-holder'), true);
      const claimedAt = clock.getTime();
      advance(301);
      await mongo.db.collection<ClaimRow>('sent_notifications').insertOne({
        _id: `takeover|${key}|crashed-holder|${claimedAt}`,
        holder: contender,
        delivered: true,
        sent_at: clock,
      });
    }

    it('its own retry finishes the takeover; another contender inside the grace is refused', async () => {
      await stoppedMidTakeover('mid-takeover', 'sweep-1');
      assert.equal(await store().tryMark('mid-takeover', 'replay'), false, 'the takeover is in hand');
      assert.equal(await store().tryMark('mid-takeover', 'sweep-1'), true, 'the contender retrying wins');
      assert.equal(await store().markDelivered('mid-takeover', 'sweep-1'), true);
    });

    it('past the grace the claim is not blocked: exactly one of 10 contenders takes it over', async () => {
      await stoppedMidTakeover('abandoned-takeover', 'sweep-2');
      advance(301);
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => store().tryMark('abandoned-takeover', `c${i}`)),
      );
      assert.equal(results.filter(Boolean).length, 1, String(results));
      const row = await mongo.db
        .collection<ClaimRow>('sent_notifications')
        .findOne({ _id: 'abandoned-takeover' });
      assert.equal(row?.holder, `c${results.indexOf(true)}`);
    });
  });
});
