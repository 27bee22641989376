// flow-notify beside `npm start`: with MONGO_URL and TEMPORAL_ADDRESS unset, the CLI finds the embedded servers
// where the launcher recorded them (platform/stackState.ts), as long as the launcher runs. The record here names the
// test stack's servers and this process as the launcher, in a file of its own (FLOW_NOTIFY_STACK_FILE), so a
// developer's own npm start in this checkout is left alone.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { PROJECT_ROOT } from '../platform/embedded';
import { writeStackState } from '../platform/stackState';
import { connectMongo, type Mongo } from '../store/mongo';
import { createRunStore } from '../store/runs';
import { testStack } from './support/stack';

const UI = 'http://127.0.0.1:18233';

describe('flow-notify beside npm start', function () {
  let dir: string;
  let stateFile: string;
  let mongo: Mongo;
  const mongoDb = `t_cli_${process.pid}`;
  const runId = `run_cli${Date.now().toString(16)}`;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'flow-notify-cli-'));
    stateFile = path.join(dir, 'stack.json');
    mongo = await connectMongo(testStack().mongoUrl, mongoDb);
    const at = new Date();
    await createRunStore(mongo.db).insert({
      _id: runId,
      teamId: 'acme',
      ownerId: 'alice',
      title: 'Nightly export',
      status: 'running',
      pauseCount: 0,
      watchedIssueIds: [],
      createdAt: at,
      updatedAt: at,
    });
  });
  after(async () => {
    await mongo?.db.dropDatabase();
    await mongo?.client.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The CLI with no server variables: only what the test names. */
  function cli(args: string[], env: Record<string, string> = {}) {
    return spawnSync(path.join(PROJECT_ROOT, 'bin/flow-notify'), args, {
      env: {
        PATH: process.env.PATH,
        FLOW_NOTIFY_FROM_SOURCE: '1',
        FLOW_NOTIFY_STACK_FILE: stateFile,
        MONGO_DB: mongoDb,
        ...env,
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
  }

  it('explain finds the servers a running npm start recorded', () => {
    const { mongoUrl, temporalAddress } = testStack();
    writeStackState({ pid: process.pid, mongoUrl, temporalAddress, temporalUiUrl: UI }, stateFile);
    const text = cli(['explain', runId]);
    assert.equal(text.status, 0, text.stderr);
    assert.match(
      text.stdout,
      new RegExp(`^run ${runId} "Nightly export": running \\(team acme, owner alice\\)\n`),
    );
    assert.match(text.stdout, /\nworkflows \(0\)\n/);
    const json = cli(['explain', runId, '--json']);
    assert.equal(json.status, 0, json.stderr);
    assert.equal((JSON.parse(json.stdout) as { temporalUiUrl: string }).temporalUiUrl, UI);
  });

  it('what the environment sets wins over the record', () => {
    writeStackState(
      { pid: process.pid, mongoUrl: 'mongodb://127.0.0.1:9/', temporalAddress: '127.0.0.1:9' },
      stateFile,
    );
    const { mongoUrl, temporalAddress } = testStack();
    const run = cli(['explain', runId], { MONGO_URL: mongoUrl, TEMPORAL_ADDRESS: temporalAddress });
    assert.equal(run.status, 0, run.stderr);
    assert.match(run.stdout, /^run run_cli/);
  });

  it('an unknown option or a missing argument exits 2 with the usage, before any server is needed', () => {
    for (const args of [
      ['emit', '--run', runId, '--team', 'acme', '--disposition', 'ack', '--teem', 'acme'],
      ['emit', '--run', runId, '--team'],
      ['explain', runId, '--jsn'],
      ['explain'],
      ['emitt'],
    ]) {
      const run = cli(args);
      assert.equal(run.status, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, /^flow-notify: /);
      assert.match(run.stderr, /usage: flow-notify emit --run <runId>/, args.join(' '));
    }
    assert.match(cli(['emit', '--teem', 'acme']).stderr, /--teem/, 'the error names the option');
  });

  it('a record whose launcher is gone is ignored, and the error says how to get servers', () => {
    const gone = spawnSync(process.execPath, ['-e', 'process.exit(0)']);
    const { mongoUrl, temporalAddress } = testStack();
    writeStackState({ pid: gone.pid!, mongoUrl, temporalAddress }, stateFile);
    for (const args of [
      ['explain', runId],
      ['emit', '--run', runId, '--team', 'acme', '--disposition', 'ack'],
    ]) {
      const run = cli(args);
      assert.equal(run.status, 78, run.stderr);
      assert.match(run.stderr, /^flow-notify: configuration error: MONGO_URL is required/);
      assert.match(run.stderr, /npm start/);
      assert.match(run.stderr, /MONGO_URL and TEMPORAL_ADDRESS/);
    }
    rmSync(stateFile, { force: true });
    assert.match(cli(['explain', runId]).stderr, /npm start/, 'no record at all: the same advice');
  });
});
