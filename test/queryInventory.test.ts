// Every hot query of the inventory (test/support/queryInventory.ts) is answered from an index, asked of the real server's
// explain against a store holding other teams' rows: on FerretDB, filterPushdown (and sortPushdown, limitPushdown
// where the query sorts and limits, with no temporary sort in SQLite's plan); on MongoDB (MONGO_URL), an index scan
// and no in-memory SORT stage. Also: start-up drops the indexes a store module replaced, idempotently.
import assert from 'node:assert/strict';
import type { Db, Document } from 'mongodb';
import { connectMongo, type Mongo } from '../store/mongo';
import { ALL_INDEXES, ensureAllIndexes, RETIRED_INDEXES } from '../store';
import { QUERY_INVENTORY, SAMPLE, type QueryEntry } from './support/queryInventory';
import { testConfig } from './support/stack';

const OTHER_TEAMS = 6;
const ROWS_PER_TEAM = 40;

const minutesAgo = (minutes: number): Date => new Date(SAMPLE.now.getTime() - minutes * 60_000);

/** Rows of other teams (and a few of the sample's), shaped as the stores write them. */
async function seed(db: Db): Promise<void> {
  const teams = [SAMPLE.teamId, ...Array.from({ length: OTHER_TEAMS }, (_, t) => `team_other_${t}`)];
  const statuses = ['running', 'paused', 'finished', 'failed', 'cancelled'];
  const docs: Record<string, Document[]> = {};
  const add = (collection: string, doc: Document) => (docs[collection] ??= []).push(doc);
  for (const teamId of teams) {
    for (let i = 0; i < ROWS_PER_TEAM; i++) {
      const runId = teamId === SAMPLE.teamId && i === 0 ? SAMPLE.runId : `run_${teamId}_${i}`;
      const userId =
        teamId === SAMPLE.teamId && i < 2 ? [SAMPLE.userId, SAMPLE.otherUserId][i] : `u_${teamId}_${i}`;
      const episodeId = `${runId}:end`;
      const at = minutesAgo(i * 7);
      add('runs', {
        _id: runId,
        teamId,
        ownerId: userId,
        title: 'seeded',
        status: statuses[i % statuses.length],
        createdAt: at,
        updatedAt: at,
        revision: 1,
        pauseCount: 0,
        assistantWatchers: [],
      });
      add('episodes', { _id: episodeId, runId, teamId, kind: 'run_finished', outcome: {}, recordedAt: at });
      add('episodes', {
        _id: `${runId}:input:${i}`,
        runId,
        teamId,
        kind: 'human_input_requested',
        outcome: {},
        recordedAt: at,
      });
      for (let a = 1; a <= 2; a++)
        add('callback_attempts', {
          _id: `${episodeId}|${a}`,
          episodeId,
          runId,
          attempt: a,
          at: new Date(at.getTime() + a * 1000),
          durationMs: 5,
          result: 'retry',
          status: 503,
          trigger: 'episode',
        });
      // Each team's endpoints, the sample's first among them, each with attempts of the team's runs.
      const endpointId = teamId === SAMPLE.teamId && i < 3 ? SAMPLE.endpointId : `ep_${teamId}_${i % 3}`;
      add('endpoint_attempts', {
        _id: `ep|ev:${episodeId}|${endpointId}|1`,
        episodeId: `ep|ev:${episodeId}|${endpointId}`,
        runId,
        endpointId,
        teamId,
        attempt: 1,
        at,
        durationMs: 5,
        result: 'delivered',
        status: 204,
        trigger: 'episode',
      });
      const subscriptionId =
        teamId === SAMPLE.teamId && i === 0 ? SAMPLE.subscriptionId : `${teamId}_${i}_`.padEnd(64, '0');
      add('push_subscriptions', {
        _id: subscriptionId,
        endpoint: `https://push.example.com/${subscriptionId}`,
        keys: { p256dh: 'p', auth: 'a' },
        userId,
        teamId,
        createdAt: at,
        updatedAt: at,
      });
      add('notification_prefs', {
        _id: JSON.stringify([userId, teamId]),
        userId,
        teamId,
        scope: i % 2 ? 'team' : 'own',
        off: [],
        updatedAt: at,
      });
      const key = teamId === SAMPLE.teamId && i === 0 ? SAMPLE.rateKey : `push-test|${userId}`;
      add('rate_limits', {
        _id: `window|${key}`,
        head: 0,
        bucketMs: 10_000,
        counts: { b0: 1 },
        total: 1,
        token: `t${i}`,
        expiresAt: new Date(at.getTime() + 600_000),
      });
      add('push_subscription_slots', {
        _id: `${userId}|0|0`,
        key: userId,
        slot: 0,
        n: 0,
        at,
        subscriptionId,
      });
      add('assistant_run_watches', {
        _id: `asst_${i}|${runId}`,
        assistantId: `asst_${i}`,
        runId,
        teamId,
        active: i % 2 === 0,
        updatedAt: at,
      });
      add('sent_notifications', {
        _id: episodeId,
        holder: 'w',
        delivered: true,
        sent_at: at,
        result: 'delivered',
      });
      add('push_deliveries', {
        _id: `${episodeId}|${subscriptionId}`,
        episodeId,
        subscriptionId,
        userId,
        at,
      });
      add('events', { _id: `evt_${runId}`, runId, teamId, type: 'run_finished', data: {}, at });
    }
  }
  for (const [collection, rows] of Object.entries(docs)) await db.collection(collection).insertMany(rows);
}

const isFerret = (explain: Document): boolean => 'filterPushdown' in explain;

async function explainOf(db: Db, entry: QueryEntry): Promise<Document> {
  // countDocuments, deleteMany and updateMany narrow their rows as find does: their filter is asked as a find.
  return db
    .collection(entry.collection)
    .find(entry.filter, {
      ...(entry.sort ? { sort: entry.sort } : {}),
      ...(entry.limit !== undefined ? { limit: entry.limit } : {}),
    })
    .explain();
}

const label = (e: QueryEntry): string =>
  `${e.collection}: ${e.module}.${e.method} (${e.op} ${JSON.stringify(e.filter)})`;

describe('every hot query is answered from an index', function () {
  this.timeout(120_000);
  let mongo: Mongo;

  before(async () => {
    const config = testConfig();
    mongo = await connectMongo(config.mongoUrl, config.mongoDb);
    await ensureAllIndexes(mongo.db);
    await seed(mongo.db);
  });

  after(async () => {
    await mongo?.client.close();
  });

  for (const entry of QUERY_INVENTORY.filter((e) => e.hot)) {
    it(label(entry), async () => {
      const explain = await explainOf(mongo.db, entry);
      if (isFerret(explain)) {
        const plan = ((explain.queryPlanner as { Plan?: string[] } | undefined)?.Plan ?? []).join('\n');
        const got = `filterPushdown ${explain.filterPushdown}, sortPushdown ${explain.sortPushdown}, limitPushdown ${explain.limitPushdown}; plan:\n${plan}`;
        assert.equal(explain.filterPushdown, true, got);
        assert.match(plan, new RegExp(`USING INDEX \\S+_${entry.index}\\b`), got);
        if (entry.sort) {
          assert.equal(explain.sortPushdown, true, got);
          assert.doesNotMatch(plan, /USE TEMP B-TREE/, got);
          if (entry.limit !== undefined) assert.equal(explain.limitPushdown, true, got);
        }
      } else {
        // MongoDB: the winning plan scans an index (IXSCAN, or the _id fast paths) and sorts nothing in memory.
        const winning = JSON.stringify((explain.queryPlanner as Document).winningPlan);
        assert.match(winning, /IXSCAN|IDHACK|EXPRESS|CLUSTERED/, winning);
        if (entry.index !== '_id_') assert.ok(winning.includes(entry.index), winning);
        if (entry.sort) assert.doesNotMatch(winning, /"stage":"SORT"/, winning);
      }
    });
  }

  it('start-up drops the indexes a store module replaced, and a second start-up finds nothing to do', async () => {
    const db = mongo.client.db(`${mongo.db.databaseName}_old`);
    // A data folder from before: the retired indexes exist (with the keys they had), and some rows.
    const oldKeys: Record<string, Document> = {
      team_recent: { teamId: 1, createdAt: -1 },
      run_episodes: { runId: 1, recordedAt: 1 },
      user: { userId: 1 },
      run_at: { runId: 1, at: 1 },
      run_created: { runId: 1, createdAt: -1 },
      run: { runId: 1 },
      person: { teamId: 1, userId: 1, at: 1 },
      at_ttl: { at: 1 },
      person_sent: { teamId: 1, userId: 1, digestSentAt: 1 },
    };
    for (const { collection, name } of RETIRED_INDEXES) {
      await db.collection(collection).insertOne({ _id: `${name}_row` as never, createdAt: new Date() });
      await db.collection(collection).createIndex(oldKeys[name], { name });
    }
    await ensureAllIndexes(db);
    await ensureAllIndexes(db);
    for (const { collection, name } of RETIRED_INDEXES) {
      const names = (await db.collection(collection).listIndexes().toArray()).map((i) => i.name as string);
      assert.ok(!names.includes(name), `${collection} still has ${name}: ${names.join(', ')}`);
      for (const spec of ALL_INDEXES.filter((s) => s.collection === collection))
        assert.ok(names.includes(spec.options.name), `${collection} lacks ${spec.options.name}`);
    }
    await db.dropDatabase();
  });
});
