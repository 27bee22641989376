// The reconciliation sweep at scale on the real servers: what one pass costs in database round trips
// (counted by the driver's command monitoring, never timed), what it starts, that a second pass is harmless, and
// that the sweep workflow's activities heartbeat so a killed worker does not hold the schedule.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import {
  BSON,
  MongoClient,
  type CommandStartedEvent,
  type CommandSucceededEvent,
  type Db,
  type Document,
} from 'mongodb';
import type { Config } from '../config';
import { operatorAlertWorkflowId } from '../contract/workflows';
import { interactionClaimKeys } from '../domain/interaction';
import type { OperatorAlert } from '../domain/ops';
import { inputEpisodeId } from '../domain/outcome';
import type { Run } from '../domain/run';
import { owedEpisode, type SweepFamilies } from '../domain/sweep';
import { ensureAllIndexes } from '../store';
import { createCallbackAttemptStore } from '../store/callback/attempts';
import { createClaimStore, type ClaimRow } from '../store/claims';
import { openStores, startTestWorker, temporalClient } from './support/harness';
import { sweepActivitiesOn, type SweepOnDbOptions } from './support/sweep';
import { testConfig } from './support/stack';
import { sweepWorkflow } from '../workflows/sweep';
import { createActivities } from '../activities';

const FAMILIES: SweepFamilies = { ops: false };
const GRACE_SECONDS = 300;
const PAGE_SIZE = 250;

/** Episode ids are workflow ids: unique per test run, so a persistent Temporal never has them from a last run. */
const RUN_PREFIX = randomBytes(3).toString('hex');

function run(i: number, now: Date): Run {
  const updatedAt = new Date(now.getTime() - (i + 1) * 30_000);
  const status = (['finished', 'failed', 'paused'] as const)[i % 3];
  const base: Run = {
    _id: `sweep_run_${RUN_PREFIX}_${String(i).padStart(5, '0')}`,
    teamId: 'team',
    ownerId: 'owner',
    title: `Run ${i}`,
    status,
    pauseCount: status === 'paused' ? 1 : 0,
    watchedIssueIds: [],
    createdAt: new Date(updatedAt.getTime() - 60_000),
    updatedAt,
    ...(i % 2 === 0 ? { callback: { url: 'https://hooks.example.com/flow', secret: 'whsec_test' } } : {}),
  };
  if (status === 'paused') {
    return { ...base, pause: { reason: 'human_input', seq: 1, interactionId: `int_${i}`, at: updatedAt } };
  }
  if (status === 'failed') return { ...base, endedAt: updatedAt, error: { code: 'x', message: 'boom' } };
  return { ...base, endedAt: updatedAt, finalAnswer: `answer ${i}` };
}

describe('the reconciliation sweep at scale', function () {
  this.timeout(180_000);
  let config: Config;
  let mongo: MongoClient;
  let db: Db;
  let client: Client;
  let closeClient: () => Promise<void>;
  let commands: string[] = [];
  let counting = false;

  before(async () => {
    config = testConfig();
    mongo = new MongoClient(config.mongoUrl, { monitorCommands: true });
    await mongo.connect();
    mongo.on('commandStarted', (event: CommandStartedEvent) => {
      if (!counting) return;
      const target =
        event.commandName === 'getMore' ? event.command.collection : event.command[event.commandName];
      commands.push(`${event.commandName} ${String(target)}`);
    });
    db = mongo.db(`${config.mongoDb}_scale`); // the workflow test's worker sweeps config.mongoDb, empty
    await ensureAllIndexes(db);
    ({ client, close: closeClient } = await temporalClient(config));
  });
  after(async () => {
    await closeClient?.();
    await mongo?.close();
  });

  async function counted<T>(fn: () => Promise<T>): Promise<{ value: T; commands: string[] }> {
    commands = [];
    counting = true;
    try {
      return { value: await fn(), commands };
    } finally {
      counting = false;
    }
  }

  /** A sweep of a day's window over `on`, starting its episodes on a task queue no worker polls. */
  function daySweep(on: Db, now: Date) {
    const taskQueue = `sweep-no-worker-${randomBytes(4).toString('hex')}`;
    const activities = sweepActivitiesOn(on, {
      client,
      taskQueue,
      families: FAMILIES,
      graceSeconds: GRACE_SECONDS,
      lookbackSeconds: 24 * 3600,
      pageSize: PAGE_SIZE,
      now,
    });
    return { taskQueue, sweep: activities.sweep };
  }

  it('one pass pre-checks every claim in one round trip, lists a page a round trip, and starts exactly the owed episodes', async () => {
    const now = new Date();
    const runs = Array.from({ length: 1200 }, (_, i) => run(i, now));
    await db.collection<Run>('runs').insertMany(runs);
    const rows: ClaimRow[] = [];
    const expected = new Set<string>();
    runs.forEach((r, i) => {
      const owed = owedEpisode(r, FAMILIES)!;
      const settledAt = new Date(r.updatedAt.getTime() + 2_000);
      if (i % 100 === 7) {
        expected.add(owed.episodeId); // released or never claimed: no row
      } else if (i === 11) {
        expected.add(owed.episodeId); // a pending claim past the grace: its holder died
        for (const key of owed.keys)
          rows.push({ _id: key, holder: 'dead', delivered: false, sent_at: settledAt });
      } else if (i === 0) {
        // A pending claim inside the grace: someone has it in hand.
        const at = new Date(now.getTime() - 10_000);
        for (const key of owed.keys) rows.push({ _id: key, holder: 'live', delivered: false, sent_at: at });
      } else if (i === 12) {
        expected.add(owed.episodeId); // the push delivered, the callback never claimed
        rows.push({ _id: owed.keys[0], holder: 'h', delivered: true, sent_at: settledAt });
      } else {
        for (const key of owed.keys)
          rows.push({ _id: key, holder: 'h', delivered: true, sent_at: settledAt });
      }
    });
    await db.collection<ClaimRow>('sent_notifications').insertMany(rows);

    const { taskQueue, sweep } = daySweep(db, now);

    const first = await counted(() => sweep.sweepOnce());
    assert.deepEqual(first.value, { scanned: 1200, unsettled: expected.size, started: expected.size });
    const pages = Math.ceil(1200 / PAGE_SIZE);
    const listing = first.commands.filter((c) => c === 'find runs' || c === 'getMore runs').length;
    const claims = first.commands.filter((c) => c.endsWith(' sent_notifications')).length;
    // A page a round trip, and at most one more a page: the final answers of its owed finished runs (the
    // listing leaves answers out); no second load of the owed runs otherwise.
    const answerReads = listing - pages;
    assert.ok(
      answerReads >= 1 && answerReads <= pages,
      `${pages} pages, ${answerReads} answer reads: ${first.commands.join(', ')}`,
    );
    assert.equal(claims, 1, first.commands.join(', '));
    assert.equal(first.commands.length, listing + 1, first.commands.join(', '));
    assert.equal(
      first.commands[0],
      'find sent_notifications',
      'the claims are read before any run is listed',
    );
    for (const episodeId of expected) {
      const description = await client.workflow.getHandle(episodeId).describe();
      assert.equal(description.taskQueue, taskQueue);
    }

    // A second pass (a retried activity, an overlapping replica) finds the same episodes owed and starts none.
    const second = await sweep.sweepOnce();
    assert.deepEqual(second, { scanned: 1200, unsettled: expected.size, started: 0 });
  });

  it("a pass reads no settled run's final answer: only the owed ones', which their episodes start with", async () => {
    const answersDb = mongo.db(`${config.mongoDb}_sweep_answers`);
    await ensureAllIndexes(answersDb);
    const now = new Date();
    const answer = (i: number) => `${i} `.padEnd(400_000, 'a');
    const runs = Array.from({ length: 30 }, (_, i) => ({
      ...run(3 * i, now), // finished, each with a large answer
      _id: `sweep_answers_${RUN_PREFIX}_${i}`,
      finalAnswer: answer(i),
    }));
    await answersDb.collection<Run>('runs').insertMany(runs);
    const owedIds = new Set([runs[4]._id, runs[17]._id]);
    const rows: ClaimRow[] = runs
      .filter((r) => !owedIds.has(r._id))
      .flatMap((r) =>
        owedEpisode(r, FAMILIES)!.keys.map((key) => ({
          _id: key,
          holder: 'h',
          delivered: true,
          sent_at: now,
        })),
      );
    await answersDb.collection<ClaimRow>('sent_notifications').insertMany(rows);
    const { sweep } = daySweep(answersDb, now);
    let runBytes = 0;
    const measure = (event: CommandSucceededEvent) => {
      const from = event.reply as { cursor?: { ns?: string } };
      if (from.cursor?.ns?.endsWith('.runs')) runBytes += BSON.calculateObjectSize(event.reply as Document);
    };
    mongo.on('commandSucceeded', measure);
    try {
      assert.deepEqual(await sweep.sweepOnce(), { scanned: 30, unsettled: 2, started: 2 });
    } finally {
      mongo.off('commandSucceeded', measure);
    }
    // The two owed answers (800 KB), not the thirty in the window (12 MB).
    assert.ok(runBytes < 1_000_000, `${runBytes} bytes of runs read`);
    for (const r of runs.filter((r) => owedIds.has(r._id))) {
      const history = await client.workflow.getHandle(owedEpisode(r, FAMILIES)!.episodeId).fetchHistory();
      const input = history.events![0].workflowExecutionStartedEventAttributes!.input!.payloads![0];
      const outcome = JSON.parse(Buffer.from(input.data!).toString()) as { finalAnswer?: string };
      assert.equal(outcome.finalAnswer, r.finalAnswer, 'the episode starts with its whole answer');
    }
  });

  it('a push released again and again is replayed less often the longer it has been released, at least hourly', async () => {
    const restingDb = mongo.db(`${config.mongoDb}_sweep_resting`);
    await ensureAllIndexes(restingDb);
    const now = new Date();
    const minutesAgo = (m: number) => new Date(now.getTime() - m * 60_000);
    // A finished run each (owing its push only: no callback), its push released by every replay so far.
    const cases = [
      { name: 'released once, five minutes ago', first: 5, last: 5, replayed: true },
      { name: 'released for 30 min, last a minute ago', first: 30, last: 1, replayed: false },
      { name: 'released for 30 min, last 31 min ago', first: 61, last: 31, replayed: true },
      { name: 'released for 3 h, last 59 min ago', first: 180, last: 59, replayed: false },
      { name: 'released for 3 h, last 61 min ago', first: 180, last: 61, replayed: true },
    ];
    const runs = cases.map((_, i) => {
      const { callback: _none, ...finished } = run(3 * i, now);
      return { ...finished, _id: `sweep_resting_${RUN_PREFIX}_${i}` } as Run;
    });
    await restingDb.collection<Run>('runs').insertMany(runs);
    await restingDb.collection<ClaimRow>('sent_notifications').insertMany(
      cases.map(({ first, last }, i) => ({
        _id: `released|${owedEpisode(runs[i], FAMILIES)!.keys[0]}`,
        holder: 'episode',
        delivered: true,
        result: 'released',
        sent_at: minutesAgo(last),
        first_released_at: minutesAgo(first),
      })),
    );
    const { sweep } = daySweep(restingDb, now);
    const pass = await sweep.sweepOnce();
    const started = await Promise.all(
      runs.map((r) =>
        client.workflow
          .getHandle(owedEpisode(r, FAMILIES)!.episodeId)
          .describe()
          .then(
            () => true,
            () => false,
          ),
      ),
    );
    assert.deepEqual(
      cases.map(({ name }, i) => `${name}: ${started[i] ? 'replayed' : 'rests'}`),
      cases.map(({ name, replayed }) => `${name}: ${replayed ? 'replayed' : 'rests'}`),
    );
    assert.equal(pass.started, cases.filter((c) => c.replayed).length, JSON.stringify(pass));
  });

  it('a run touched back into the window long after its episode settled is not replayed: its older claims are asked by key', async () => {
    const touchedDb = mongo.db(`${config.mongoDb}_sweep_touched`);
    await ensureAllIndexes(touchedDb);
    const now = new Date();
    // Paused two days ago, its push delivered then; a watch of it ended a minute ago (the run's updatedAt).
    const settledAt = new Date(now.getTime() - 2 * 24 * 3600_000);
    const touched = run(2, now);
    const paused = {
      ...touched,
      _id: `sweep_touched_${RUN_PREFIX}`,
      pause: { ...touched.pause!, at: settledAt },
    };
    await touchedDb.collection<Run>('runs').insertOne(paused);
    await touchedDb.collection<ClaimRow>('sent_notifications').insertMany(
      owedEpisode(paused, FAMILIES)!.keys.map((key) => ({
        _id: key,
        holder: 'h',
        delivered: true,
        sent_at: settledAt,
      })),
    );
    const { sweep } = sweepActivitiesOn(touchedDb, {
      client,
      taskQueue: `sweep-no-worker-${randomBytes(4).toString('hex')}`,
      families: FAMILIES,
      graceSeconds: GRACE_SECONDS,
      lookbackSeconds: 3600,
      pageSize: PAGE_SIZE,
      now,
    });
    assert.deepEqual(await sweep.sweepOnce(), { scanned: 1, unsettled: 0, started: 0 });
  });

  it('an old question under the standby veto, touched back into the window, is not started again: its note is asked by key', async () => {
    const touchedDb = mongo.db(`${config.mongoDb}_sweep_vetoed`);
    await ensureAllIndexes(touchedDb);
    const now = new Date();
    // Paused two days ago under two assistants' watches (no push owed), its question's workflow started then; one
    // watch ended a minute ago (the run's updatedAt), the other still vetoes.
    const askedAt = new Date(now.getTime() - 2 * 24 * 3600_000);
    const touched = run(5, now);
    const vetoed: Run = {
      ...touched,
      _id: `sweep_vetoed_${RUN_PREFIX}`,
      assistantWatchers: ['asst_b'],
      pause: { ...touched.pause!, at: askedAt },
    };
    await touchedDb.collection<Run>('runs').insertOne(vetoed);
    await touchedDb.collection<ClaimRow>('sent_notifications').insertOne({
      _id: interactionClaimKeys.opened(vetoed.pause!.interactionId!),
      holder: 'emitter:api',
      delivered: true,
      result: 'opened',
      sent_at: askedAt,
    });
    const { sweep } = sweepActivitiesOn(touchedDb, {
      client,
      taskQueue: `sweep-no-worker-${randomBytes(4).toString('hex')}`,
      families: FAMILIES,
      graceSeconds: GRACE_SECONDS,
      lookbackSeconds: 3600,
      pageSize: PAGE_SIZE,
      now,
      questions: true,
    });
    const pass = await sweep.sweepOnce();
    assert.equal(pass.interactionsStarted ?? 0, 0, JSON.stringify(pass));
  });

  it('the range pre-check finds the claims written since the window began; an older claim reads as not in hand', async () => {
    const now = new Date();
    const claims = createClaimStore(db, { graceSeconds: GRACE_SECONDS, now: () => now });
    const prefix = `range-${randomBytes(3).toString('hex')}`;
    const at = (secondsAgo: number) => new Date(now.getTime() - secondsAgo * 1000);
    await db.collection<ClaimRow>('sent_notifications').insertMany([
      { _id: `${prefix}-delivered`, holder: 'h', delivered: true, sent_at: at(3600) },
      { _id: `${prefix}-live`, holder: 'h', delivered: false, sent_at: at(60) },
      { _id: `${prefix}-stale`, holder: 'h', delivered: false, sent_at: at(3600) },
      { _id: `${prefix}-old`, holder: 'h', delivered: true, sent_at: at(3 * 24 * 3600) },
    ]);
    const inRange = [`${prefix}-delivered`, `${prefix}-live`];
    const since = [...(await claims.markedSince(at(2 * 24 * 3600))).marked].filter((key) =>
      key.startsWith(prefix),
    );
    assert.deepEqual(
      since.sort(),
      inRange.sort(),
      'a stale pending claim is not in hand; one older than the range reads as not in hand (its replay then loses the claim)',
    );
  });

  it('reaches an episode that closed after the default day-long callback schedule: a run ended 30 h ago whose push was released is replayed', async () => {
    // The worker's own sweep, as createActivities wires it, on the default CALLBACK_RETRY_SECONDS (about 27.5 h).
    const { mongo: storesMongo, stores } = await openStores(config);
    try {
      const sweep = createActivities({ config, stores, client, log: () => undefined });
      const ended = run(0, new Date(Date.now() - 30 * 3600_000));
      ended._id = `sweep_late_${RUN_PREFIX}`;
      await storesMongo.db.collection<Run>('runs').insertOne(ended);
      // No claim: the push family released it when the episode closed, a day and more after the run ended.
      const pass = await sweep.sweepOnce();
      assert.equal(pass.started, 1, `the pass reached ${pass.scanned} runs`);
      const started = await client.workflow.getHandle(owedEpisode(ended, FAMILIES)!.episodeId).describe();
      assert.equal(started.taskQueue, config.temporalTaskQueue);
    } finally {
      await storesMongo.client.close();
    }
  });

  it('an episode Temporal refuses to start holds back no other: the pass goes on, and counts it refused', async () => {
    const refusedDb = mongo.db(`${config.mongoDb}_refused`);
    await ensureAllIndexes(refusedDb);
    const now = new Date();
    // Its episode's id is past the server's length limit: Temporal answers, and refuses it, every pass. Written
    // first and the oldest, so whichever order the listing takes, it comes first.
    const refused = { ...run(9, now), _id: `sweep_refused_${RUN_PREFIX}_${'r'.repeat(1000)}` };
    const owed = [0, 1, 2].map((i) => ({ ...run(i, now), _id: `sweep_after_refused_${RUN_PREFIX}_${i}` }));
    await refusedDb.collection<Run>('runs').insertMany([refused, ...owed]);
    const { sweep } = sweepActivitiesOn(refusedDb, {
      client,
      taskQueue: config.temporalTaskQueue,
      families: FAMILIES,
      graceSeconds: GRACE_SECONDS,
      lookbackSeconds: 3600,
      pageSize: 1,
      now,
    });
    const pass = await sweep.sweepOnce();
    assert.equal(pass.started, owed.length, JSON.stringify(pass));
    assert.equal(pass.startsRefused, 1, JSON.stringify(pass));
  });

  describe('an episode released after its run left the window', () => {
    const LOOKBACK_SECONDS = 4 * 3600;
    const hoursAgo = (now: Date, hours: number) => new Date(now.getTime() - hours * 3600_000);

    /**
     * A run that ended six hours ago (two past the window): its push settled then, its callback claimed and
     * released by a holder at each of `releases` (a replay's callback that failed past its retries).
     */
    async function endedWithReleases(
      name: string,
      now: Date,
      releases: Date[],
      opsAlerts?: SweepOnDbOptions['opsAlerts'],
      runId = `sweep_${name}_${RUN_PREFIX}`,
    ) {
      const releasedDb = mongo.db(`${config.mongoDb}_${name}`);
      await ensureAllIndexes(releasedDb);
      const ended = { ...run(0, hoursAgo(now, 6)), _id: runId };
      await releasedDb.collection<Run>('runs').insertOne(ended);
      const owed = owedEpisode(ended, FAMILIES)!;
      const [pushKey, callbackKey] = owed.keys;
      await releasedDb
        .collection<ClaimRow>('sent_notifications')
        .insertOne({ _id: pushKey, holder: 'h', delivered: true, sent_at: ended.updatedAt });
      for (const at of releases) {
        const claims = createClaimStore(releasedDb, { graceSeconds: GRACE_SECONDS, now: () => at });
        assert.ok(await claims.tryMark(callbackKey, `replay@${at.getTime()}`));
        await claims.unmark(callbackKey, `replay@${at.getTime()}`);
      }
      const { sweep, claims } = sweepActivitiesOn(releasedDb, {
        client,
        taskQueue: `sweep-no-worker-${randomBytes(4).toString('hex')}`,
        families: FAMILIES,
        graceSeconds: GRACE_SECONDS,
        lookbackSeconds: LOOKBACK_SECONDS,
        pageSize: PAGE_SIZE,
        now,
        ...(opsAlerts ? { opsAlerts } : {}),
      });
      return { owed, callbackKey, sweep, claims };
    }

    it('behind a pass-worth of runs whose released episodes settled since, a newer release is still replayed', async () => {
      const now = new Date();
      // A run released a minute ago, its claim absent: owed.
      const { owed, sweep } = await endedWithReleases('released_behind', now, [
        new Date(now.getTime() - 60_000),
      ]);
      const db = mongo.db(`${config.mongoDb}_released_behind`);
      // 1,000 runs (a pass's worth) ended six hours ago, whose callbacks released three hours ago (before it) and
      // settled since: nothing owed, yet their notes sort first.
      const ended = Array.from({ length: 1000 }, (_, i) => ({
        ...run(0, hoursAgo(now, 6)),
        _id: `sweep_settled_${i}_${RUN_PREFIX}`,
      }));
      await db.collection<Run>('runs').insertMany(ended);
      const settled = ended.flatMap((r) => owedEpisode(r, FAMILIES)!.keys);
      await db.collection<ClaimRow>('sent_notifications').insertMany([
        ...settled.map((key) => ({ _id: key, holder: 'h', delivered: true, sent_at: hoursAgo(now, 2.5) })),
        ...settled.map((key) => ({
          _id: `released|${key}`,
          holder: 'h',
          delivered: true,
          sent_at: hoursAgo(now, 3),
          result: 'released',
          first_released_at: hoursAgo(now, 3),
        })),
      ]);
      const pass = await sweep.sweepOnce();
      assert.equal(pass.started, 1, JSON.stringify(pass));
      await client.workflow.getHandle(owed.episodeId).terminate('the test is done with it');
    });

    it('behind a pass-worth of questions released then answered (their runs running again, owing nothing), a newer release is still replayed', async () => {
      const now = new Date();
      const { owed, sweep } = await endedWithReleases('released_behind_running', now, [
        new Date(now.getTime() - 60_000),
      ]);
      const db = mongo.db(`${config.mongoDb}_released_behind_running`);
      // 1,000 runs whose question pushes released three hours ago (a push service's outage), answered since: their
      // runs run again, so nothing of those episodes is owed, yet their notes sort first and stay unsettled.
      const answered = Array.from({ length: 1000 }, (_, i) => ({
        ...run(0, hoursAgo(now, 2)),
        _id: `sweep_answered_${i}_${RUN_PREFIX}`,
        status: 'running' as const,
      }));
      await db.collection<Run>('runs').insertMany(answered);
      await db.collection<ClaimRow>('sent_notifications').insertMany(
        answered.map((r) => ({
          _id: `released|${inputEpisodeId(r._id, 'int_outage')}`,
          holder: 'h',
          delivered: true,
          sent_at: hoursAgo(now, 3),
          result: 'released',
          first_released_at: hoursAgo(now, 3),
        })),
      );
      const pass = await sweep.sweepOnce();
      assert.equal(pass.started, 1, JSON.stringify(pass));
      await client.workflow.getHandle(owed.episodeId).terminate('the test is done with it');
    });

    it('is replayed: a release reaches the sweep for a window from its first release, not only from the run', async () => {
      const now = new Date();
      // Released a minute ago, by a replay the sweep started late in the run's window.
      const { owed, sweep, claims, callbackKey } = await endedWithReleases('released', now, [
        new Date(now.getTime() - 60_000),
      ]);
      const pass = await sweep.sweepOnce();
      assert.equal(pass.started, 1, JSON.stringify(pass));
      await client.workflow.getHandle(owed.episodeId).terminate('the test is done with it');
      assert.equal(await claims.state(callbackKey), 'absent', 'the replay owns the claim, not the sweep');
    });

    it('past a window from its first release, once nothing released it for two hours, it is given up visibly', async () => {
      const now = new Date();
      // First released four and a half hours ago, again two and a half hours ago: past the reach, and quiet.
      const { sweep, claims, callbackKey } = await endedWithReleases('released_long', now, [
        hoursAgo(now, 4.5),
        hoursAgo(now, 2.5),
      ]);
      const pass = await sweep.sweepOnce();
      assert.equal(pass.started, 0, JSON.stringify(pass));
      assert.equal(pass.gaveUpReleased, 1, JSON.stringify(pass));
      assert.deepEqual(await claims.describe(callbackKey), {
        state: 'delivered',
        result: "gave_up: released past the sweep's reach",
      });
      assert.deepEqual(
        await sweep.sweepOnce(),
        { scanned: 0, unsettled: 0, started: 0 },
        'settled: left alone, its run not even read',
      );
    });

    it('a callback given up past the reach tells the operator: its callback_exhausted alert is raised', async () => {
      const now = new Date();
      const { sweep, owed } = await endedWithReleases(
        'released_alerted',
        now,
        [hoursAgo(now, 4.5), hoursAgo(now, 2.5)],
        true,
      );
      const pass = await sweep.sweepOnce();
      assert.equal(pass.gaveUpReleased, 1, JSON.stringify(pass));
      const alert = client.workflow.getHandle(operatorAlertWorkflowId(`callback:${owed.episodeId}`));
      const started = (await alert.fetchHistory()).events?.[0]?.workflowExecutionStartedEventAttributes;
      const payload = started?.input?.payloads?.[0]?.data;
      assert.ok(payload, 'the alert workflow was started');
      const raised = JSON.parse(Buffer.from(payload).toString('utf8')) as OperatorAlert;
      assert.equal(raised.kind, 'callback_exhausted');
      assert.equal(raised.runId, owed.runId);
      assert.match(raised.summary, /released past the sweep's reach/);
      await alert.terminate('the test is done with it');
    });

    it('a callback whose alert Temporal throttles is not given up without it: released, then given up and raised once quiet again', async () => {
      const now = new Date();
      let throttled = 0;
      // Temporal answers the alert's first start RESOURCE_EXHAUSTED (its rate limits), as a throttled start is answered.
      const throttle = () => {
        if (throttled++ > 0) return;
        throw Object.assign(new Error('8 RESOURCE_EXHAUSTED: namespace rate limit exceeded'), {
          code: 8,
          details: 'namespace rate limit exceeded',
          metadata: {},
        });
      };
      const { sweep, claims, callbackKey, owed } = await endedWithReleases(
        'released_throttled',
        now,
        [hoursAgo(now, 4.5), hoursAgo(now, 2.5)],
        { throttle },
      );
      const pass = await sweep.sweepOnce();
      assert.equal(pass.startsRefused, 1, JSON.stringify(pass));
      assert.equal(pass.gaveUpReleased, undefined, JSON.stringify(pass));
      assert.equal(await claims.state(callbackKey), 'absent', 'owed still: a later pass raises it again');
      assert.equal((await sweep.sweepOnce()).gaveUpReleased, undefined, 'released just now: not quiet yet');
      // Quiet again two hours on: given up, and its alert raised.
      const later = sweepActivitiesOn(mongo.db(`${config.mongoDb}_released_throttled`), {
        client,
        taskQueue: `sweep-no-worker-${randomBytes(4).toString('hex')}`,
        families: FAMILIES,
        graceSeconds: GRACE_SECONDS,
        lookbackSeconds: 4 * 3600,
        pageSize: PAGE_SIZE,
        now: hoursAgo(now, -2.5),
        opsAlerts: { throttle },
      });
      assert.equal((await later.sweep.sweepOnce()).gaveUpReleased, 1);
      const alert = client.workflow.getHandle(operatorAlertWorkflowId(`callback:${owed.episodeId}`));
      assert.equal((await alert.describe()).type, 'operatorAlertWorkflow');
      await alert.terminate('the test is done with it');
    });

    it('a callback whose alert Temporal refuses for good (its id) is given up without it, counted refused', async () => {
      const now = new Date();
      // Its run id is past the server's length limit: the alert's start is answered, and refused, every time.
      const { sweep, claims, callbackKey } = await endedWithReleases(
        'released_refused',
        now,
        [hoursAgo(now, 4.5), hoursAgo(now, 2.5)],
        true,
        `sweep_released_refused_${RUN_PREFIX}_${'r'.repeat(1000)}`,
      );
      const pass = await sweep.sweepOnce();
      assert.equal(pass.startsRefused, 1, JSON.stringify(pass));
      assert.equal(pass.gaveUpReleased, 1, JSON.stringify(pass));
      assert.equal(await claims.state(callbackKey), 'delivered');
    });

    it('a callback given up past the reach is one a callback recover finds: its last attempt is marked given up', async () => {
      const now = new Date();
      const { sweep, owed } = await endedWithReleases('released_recovered', now, [
        hoursAgo(now, 4.5),
        hoursAgo(now, 2.5),
      ]);
      const attempts = createCallbackAttemptStore(mongo.db(`${config.mongoDb}_released_recovered`));
      // Its last attempt: the receiver answered 503, and the schedule had more to go when the branch released.
      await attempts.recordOnce(
        {
          episodeId: owed.episodeId,
          runId: owed.outcome.runId,
          teamId: owed.outcome.teamId,
          at: hoursAgo(now, 5),
          durationMs: 20,
          result: 'retry',
          status: 503,
          trigger: 'episode',
        },
        1,
      );
      const pass = await sweep.sweepOnce();
      assert.equal(pass.gaveUpReleased, 1, JSON.stringify(pass));
      const { rows } = await attempts.listGaveUp(owed.outcome.teamId, hoursAgo(now, 24), now, 10);
      assert.deepEqual(
        rows.map((row) => row.episodeId),
        [owed.episodeId],
      );
    });

    it('past the reach but released half an hour ago (a live holder between its tries) it is left to that holder', async () => {
      const now = new Date();
      const { sweep, claims, callbackKey } = await endedWithReleases('released_live', now, [
        hoursAgo(now, 4.5),
        hoursAgo(now, 0.5),
      ]);
      const pass = await sweep.sweepOnce();
      assert.deepEqual(pass, { scanned: 1, unsettled: 1, started: 0 });
      assert.equal(await claims.state(callbackKey), 'absent');
    });
  });

  it('the sweep workflow runs both activities with a heartbeat timeout, so a dead worker is noticed in seconds', async () => {
    const { mongo: storesMongo, stores } = await openStores(config);
    const worker = await startTestWorker(config, stores);
    try {
      const workflowId = `sweep-heartbeat-${randomBytes(4).toString('hex')}`;
      const report = await client.workflow.execute(sweepWorkflow, {
        taskQueue: config.temporalTaskQueue,
        workflowId,
      });
      assert.equal(typeof (report as { reaped: unknown }).reaped, 'number');
      const history = await client.workflow.getHandle(workflowId).fetchHistory();
      const scheduled = (history.events ?? [])
        .map((event) => event.activityTaskScheduledEventAttributes)
        .filter((attributes) => attributes != null);
      assert.deepEqual(
        scheduled.map((attributes) => attributes.activityType?.name),
        ['sweepOnce', 'sweepReapExpired'],
      );
      for (const attributes of scheduled) {
        assert.equal(String(attributes.heartbeatTimeout?.seconds), '30', attributes.activityType?.name ?? '');
      }
    } finally {
      await worker.stop();
      await storesMongo.client.close();
    }
  });
});
