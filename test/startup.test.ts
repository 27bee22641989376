// Start-up: the test harness really starts both servers; the probes; configuration refusals at start-up.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { launchMongo, PROJECT_ROOT, readStackSpec } from '../platform/embedded';
import { buildRunOutcome } from '../domain/outcome';
import type { Run } from '../domain/run';
import { openStores, startTestApi, startTestWorker, temporalClient } from './support/harness';
import { testConfig, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { episodeWorkflow } from '../workflows/episode';

describe('the test stack', () => {
  it('writes and reads a document through the real MongoDB-wire server', async () => {
    const config = testConfig();
    const { mongo } = await openStores(config);
    try {
      await mongo.db.collection('probe').insertOne({ _id: 'p1' as never, hello: 'world' });
      const doc = await mongo.db.collection('probe').findOne({ _id: 'p1' as never });
      assert.equal(doc?.hello, 'world');
    } finally {
      await mongo.client.close();
    }
  });

  it('narrows lookups by _id (equality, with other keys, $in) to the matching rows', async () => {
    const { mongo } = await openStores(testConfig());
    try {
      const probe = mongo.db.collection<{ _id: string; n: number }>(`probe_ids_${Date.now()}`);
      await probe.insertMany(['a', 'b', 'c', 'd'].map((_id, n) => ({ _id, n })));
      const filters = [
        [{ _id: 'b' }, ['b']],
        [{ _id: 'b', n: 2 }, []],
        [{ _id: { $in: ['a', 'c', 'zz'] } }, ['a', 'c']],
        [{ _id: { $in: ['a', 'c'] }, n: 2 }, ['c']],
      ] as const;
      // Our FerretDB build pushes these down to SQLite (tools/ferretdb/patch: stock v1.24 decodes the whole
      // collection in Go for all but the first); MongoDB answers them from its _id index either way.
      const ferret = 'ferretdbVersion' in (await mongo.db.command({ buildInfo: 1 }));
      for (const [filter, expected] of filters) {
        const found = await probe.find(filter as never, { sort: { _id: 1 } }).toArray();
        assert.deepEqual(
          found.map((row) => row._id),
          expected,
          JSON.stringify(filter),
        );
        if (ferret) {
          const explained = await mongo.db.command({ explain: { find: probe.collectionName, filter } });
          assert.equal(explained.filterPushdown, true, `pushed down: ${JSON.stringify(filter)}`);
        }
      }
    } finally {
      await mongo.client.close();
    }
  });

  it('runs a workflow with one activity through a real worker on the real Temporal server', async () => {
    const config = testConfig();
    const { mongo, stores } = await openStores(config);
    const worker = await startTestWorker(config, stores);
    const { client, close } = await temporalClient(config);
    try {
      const at = new Date();
      const run: Run = {
        _id: 'run_foundation',
        teamId: 'team1',
        ownerId: 'u1',
        title: 't',
        status: 'finished',
        pauseCount: 0,
        watchedIssueIds: [],
        finalAnswer: '42',
        createdAt: at,
        updatedAt: at,
        endedAt: at,
      };
      const outcome = buildRunOutcome(run)!;
      const result = await client.workflow.execute(episodeWorkflow, {
        workflowId: `foundation-${Date.now()}`,
        taskQueue: config.temporalTaskQueue,
        args: [outcome],
      });
      assert.deepEqual(result, {
        episodeId: 'run_foundation:end',
        push: 'not_addressable',
        callback: 'not_owed',
        ops: 'not_owed',
      });
      const { rows: recorded } = await stores.episodes.listForRun('team1', 'run_foundation', 10);
      assert.equal(recorded.length, 1);
      assert.equal(recorded[0].kind, 'run_finished');
    } finally {
      await close();
      await worker.stop();
      await mongo.client.close();
    }
  });
});

describe('GET /readyz and /healthz', () => {
  it('/readyz answers 200 with both servers up and 503 with mongo "down" (the detail only in the log) once the Mongo server is stopped; /healthz (liveness) stays 200', async () => {
    // Its own FerretDB, so stopping it leaves the shared test stack alone.
    const dataRoot = mkdtempSync(path.join(tmpdir(), 'flow-notify-health-'));
    const mongo = await launchMongo(readStackSpec(), { dataRoot, freePorts: true, test: true });
    const lines: string[] = [];
    const { api, client } = await startTestApi(testConfig({ MONGO_URL: mongo.url }), {
      log: (line) => lines.push(line),
    });
    try {
      const up = await client.get('/readyz');
      assert.equal(up.status, 200);
      assert.deepEqual(up.body, { temporal: 'ok', mongo: 'ok', searchAttributes: 'ok' });

      await mongo.server.stop();
      // The answer is kept a moment (a probe per hit would cost a Temporal call and a ping): wait for it to turn.
      const down = await waitUntil(
        '/readyz to stop answering 200',
        async () => {
          const ready = await client.get('/readyz');
          return ready.status !== 200 && ready;
        },
        { timeoutMs: 60_000 },
      );
      assert.equal(down.status, 503);
      assert.equal(down.body.temporal, 'ok');
      assert.equal(down.body.mongo, 'down');
      for (const value of Object.values(down.body)) assert.match(String(value), /^(ok|down)$/);
      // What is wrong goes to the operator's log, never to whoever asks.
      assert.ok(
        lines.some((line) => /readiness: mongo down: \S/.test(line)),
        `a line names mongo and why:\n${lines.join('\n')}`,
      );
      // Liveness asks nothing of the servers: a restart would not bring Mongo back.
      assert.deepEqual((await client.get('/healthz')).body, { status: 'ok' });
    } finally {
      await api.close();
      await mongo.server.stop();
      rmSync(dataRoot, { recursive: true, force: true });
    }
  });
});

describe('configuration refusals at start-up', () => {
  const base = () => ({
    PATH: process.env.PATH ?? '',
    MONGO_URL: testStack().mongoUrl,
    TEMPORAL_ADDRESS: testStack().temporalAddress,
    AUTH_JWT_SECRET: 'x'.repeat(32),
  });

  function start(entry: string, env: Record<string, string>) {
    return spawnSync(process.execPath, ['-r', 'ts-node/register', entry], {
      cwd: PROJECT_ROOT,
      env,
      encoding: 'utf8',
      timeout: 30_000,
    });
  }

  const cases: [string, Record<string, string>, RegExp][] = [
    [
      'a bad MONGO_URL',
      { MONGO_URL: 'postgres://nope' },
      /MONGO_URL is not a MongoDB connection string: "postgres:\/\/nope"/,
    ],
    ['half a VAPID pair', { VAPID_PUBLIC_KEY: 'B'.repeat(87) }, /VAPID_PRIVATE_KEY is missing/],
    [
      'a non-numeric interval',
      { SWEEP_INTERVAL_SECONDS: 'soon' },
      /SWEEP_INTERVAL_SECONDS must be a positive whole number/,
    ],
  ];

  for (const entry of ['worker.ts', 'api/server.ts']) {
    for (const [what, env, message] of cases) {
      it(`${entry}: ${what} stops start-up with one line naming it`, () => {
        const result = start(entry, { ...base(), ...env });
        assert.equal(result.status, 78, result.stderr);
        const lines = result.stderr.trim().split('\n');
        assert.equal(lines.length, 1, result.stderr);
        assert.match(lines[0], message);
      });
    }
  }
});
