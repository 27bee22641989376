// The callback's retry schedule runs on durable timers: by default 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about
// 27.5 hours, each wait jittered), the 13 minutes of 20/60/180/540 s in histories started before. Temporal's
// time-skipping test server jumps the clock, so the real schedules are checked as they are, in seconds of wall time. The activities are stand-ins here:
// what is under test is the workflow's decisions (the suites on the dev server drive the real ones).
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities, AttemptPlace } from '../../contract/activities';
import { callbackWaitSeconds } from '../../domain/callback';
import { claimKeys, type RunOutcome } from '../../domain/outcome';
import { episodeWorkflow } from '../../workflows';
import {
  DEFAULT_EPISODE_OPTIONS,
  EPISODE_OPTIONS_WHEN_ABSENT,
  type EpisodeOptions,
} from '../../contract/workflows';
import { recordHistory } from '../support/historyFixture';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';

type Attempt = Awaited<ReturnType<Activities['sendCallback']>>;

const outcome: RunOutcome = {
  version: 1,
  episodeId: 'run_ts:end',
  kind: 'run_finished',
  runId: 'run_ts',
  teamId: 'acme',
  ownerId: 'alice',
  title: 'Deploy',
  status: 'finished',
  callbackRequested: true,
  occurredAt: '2026-12-01T09:00:00.000Z',
};

describe('the callback schedule on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));
  /** Every hold of a claim before a wait fails past its quick retries (the store away). */
  let claimHoldsFail = false;
  /**
   * The next holds of the claim that fail (the store away), each failure retried at once; then, with
   * `takenOverMeanwhile`, the claim is another holder's (a recover or the sweep took it over once it went stale).
   */
  let claimHoldFailures = 0;
  let takenOverMeanwhile = false;
  /** The claim is held before each wait, and another holder's after it (it went stale as the worker lagged). */
  let takenOverDuringWait = false;
  /** The next settles of a claim that fail (the store away); each failure retried at once. */
  let settleFailures = 0;

  /**
   * Runs one episode whose callback answers `answers` in turn; returns the claim results and the timers. With
   * `pushFails`, the episode owes a push whose every send fails (released each time); otherwise it owes none. The
   * run's team event fails to be recorded `teamEventFailures` times first (a store outage), each failure retried
   * at once.
   */
  async function runEpisode(
    answers: Attempt[],
    taskQueue: string,
    options?: EpisodeOptions,
    pushFails = false,
    teamEventFailures = 0,
  ) {
    const settled: Array<string | undefined> = [];
    let attempts = 0;
    /** When each record of the team event was tried (the skipped clock), and whether it was. */
    const teamEventRecords: number[] = [];
    let teamEventRecorded = false;
    /** When each push was tried (the skipped clock). */
    const pushTries: number[] = [];
    /** Each attempt as the activity saw it: when (the skipped clock), and when it would log the next one due. */
    const sent: Array<{ atMs: number; place?: AttemptPlace; nextAttemptAtMs?: number }> = [];
    /** How long each renewal of the callback's claim held it (before each wait). */
    const renewals: Array<number | undefined> = [];
    const activities = {
      renewClaim: async (_key: string, _holder: string, forSeconds?: number) => {
        renewals.push(forSeconds);
        if (claimHoldsFail || (claimHoldFailures > 0 && claimHoldFailures--))
          throw ApplicationFailure.create({ message: 'store unavailable', nextRetryDelay: 1 });
        return !takenOverMeanwhile && !(takenOverDuringWait && forSeconds === undefined);
      },
      tryMark: async () => true,
      unmark: async () => void settled.push('unmarked'),
      markDelivered: async (key: string, _holder: string, result?: string) => {
        if (key === claimKeys.callback(outcome.episodeId) && settleFailures > 0 && settleFailures--)
          throw ApplicationFailure.create({ message: 'store unavailable', nextRetryDelay: 1 });
        settled.push(result);
      },
      recordEpisode: async () => undefined,
      isStandbyVetoed: async () => false,
      callbackExhaustedAlert: async () => undefined, // no operator webhook
      // The team has no endpoints: its events are recorded and go no further.
      recordTeamEvent: async () => {
        teamEventRecords.push(await env.currentTimeMs());
        if (teamEventRecords.length <= teamEventFailures)
          throw ApplicationFailure.create({ message: 'store unavailable', nextRetryDelay: 1 });
        teamEventRecorded = true;
        return { sequence: 1, endpointIds: [], retrySeconds: [], retryJitter: 0, attemptSeconds: 10 };
      },
      deliverPush: async () => {
        if (!pushFails) return { addressable: false, reason: 'no sink' };
        pushTries.push(await env.currentTimeMs());
        const failed = {
          attempted: 1,
          delivered: 0,
          alreadyDelivered: 0,
          pruned: 0,
          failed: 1,
          retryable: 1,
        };
        return { addressable: true, ...failed };
      },
      sendCallback: async (_episode: string, _run: string, place?: AttemptPlace) => {
        const answer = answers[Math.min(attempts++, answers.length - 1)];
        const atMs = await env.currentTimeMs();
        // The real activity logs this as the row's nextAttemptAt (activities/callback/index.ts), from the same inputs.
        const wait =
          answer.result === 'retry' && place?.waitIfRetried !== undefined
            ? callbackWaitSeconds(place.waitIfRetried, answer.retryAfterSeconds, place.scheduleUncapped)
            : undefined;
        sent.push({ atMs, place, ...(wait !== undefined ? { nextAttemptAtMs: atMs + wait * 1000 } : {}) });
        return answer;
      },
    } as unknown as Partial<Activities>;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const workflowId = `${outcome.episodeId}/${taskQueue}`;
    const result = await worker.runUntil(
      env.client.workflow.execute(episodeWorkflow, {
        taskQueue,
        workflowId,
        args: options ? [outcome, options] : [outcome],
      }),
    );
    const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
    const timers = (history.events ?? [])
      .map((event) => event.timerStartedEventAttributes?.startToFireTimeout?.seconds)
      .filter((seconds) => seconds != null)
      .map(Number);
    const attemptTimeouts = (history.events ?? [])
      .map((event) => event.activityTaskScheduledEventAttributes)
      .filter((scheduled) => scheduled?.activityType?.name === 'sendCallback')
      .map((scheduled) => Number(scheduled!.startToCloseTimeout?.seconds));
    return {
      result,
      attempts,
      teamEventRecords,
      teamEventRecorded,
      pushTries,
      settled,
      timers,
      attemptTimeouts,
      sent,
      renewals,
      history,
    };
  }

  it('the default: a receiver that keeps answering 503 is tried eight times over about 27.5 hours, each wait jittered', async () => {
    const run = await runEpisode(
      [{ result: 'retry', status: 503, detail: 'http 503' }],
      'ts-callback-day',
      DEFAULT_EPISODE_OPTIONS,
    );
    recordHistory(run.history, 'episode-history-callback-waits-held.json');
    assert.equal(run.result.callback, 'gave_up');
    assert.equal(run.attempts, 8);
    const schedule = DEFAULT_EPISODE_OPTIONS.callbackRetrySeconds;
    assert.deepEqual(schedule, [5, 300, 1800, 7200, 18_000, 36_000, 36_000]);
    assert.equal(run.timers.length, 7);
    run.timers.forEach((timer, i) => {
      const nominal = schedule[i];
      assert.ok(
        timer >= Math.round(nominal * 0.9) && timer <= Math.round(nominal * 1.1),
        `wait ${i + 1}: ${timer} s, outside ${nominal} s ± 10 %`,
      );
    });
    assert.notDeepEqual(run.timers, schedule, 'the waits are jittered');
    // 27 h 35 min 5 s as listed; the jitter moves the whole by less than 10 %.
    const total = run.timers.reduce((a, b) => a + b, 0);
    const listed = schedule.reduce((a, b) => a + b, 0);
    assert.equal(listed, 27 * 3600 + 35 * 60 + 5);
    assert.ok(Math.abs(total - listed) <= listed * 0.1, `${total} s in all`);
    // On the skipped clock, which runs at wall speed while the worker works: the waits are floors.
    const spanned = run.sent[7].atMs - run.sent[0].atMs;
    assert.ok(spanned >= total * 1000, `first to last attempt: ${spanned} ms`);
    // Each failed attempt is told the wait the workflow then sleeps (the row's nextWaitSeconds and nextAttemptAt),
    // and the next attempt comes no earlier than that said; the last is told of none.
    assert.deepEqual(
      run.sent.map((s) => s.place?.waitIfRetried),
      [...run.timers, undefined],
    );
    assert.ok(run.sent.every((s) => s.place?.scheduleUncapped === true));
    assert.deepEqual(
      run.sent.map((s) =>
        s.nextAttemptAtMs === undefined ? undefined : (s.nextAttemptAtMs - s.atMs) / 1000,
      ),
      [...run.timers, undefined],
    );
    for (let i = 0; i < 7; i++) {
      const late = run.sent[i + 1].atMs - run.sent[i].nextAttemptAtMs!;
      assert.ok(late >= 0, `attempt ${i + 2} came ${-late} ms before the time logged`);
    }
    // Before each wait the claim is held for as long: the sweep does not take a delivery on schedule for lost;
    // after it, held again before the attempt (one taken over meanwhile, gone stale, is not sent again).
    assert.deepEqual(
      run.renewals,
      run.timers.flatMap((timer) => [timer, undefined]),
    );
    // The draws are Temporal's seeded Math.random, so the history replays with this code.
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, run.history);
  });

  it('a push released while the day-long callback retries is tried again with backoff: every sweep interval, doubling to an hour', async () => {
    const run = await runEpisode(
      [{ result: 'retry', status: 503, detail: 'http 503' }],
      'ts-push-released-day',
      { ...DEFAULT_EPISODE_OPTIONS, releasedRetrySeconds: 120 },
      true,
    );
    assert.equal(run.result.callback, 'gave_up');
    assert.equal(run.result.push, 'released');
    // Every sweep interval for the whole 27.5 hours would be about 830 tries (and some 8,000 history events).
    const gaps = run.pushTries.slice(1).map((at, i) => Math.round((at - run.pushTries[i]) / 1000));
    const waits = gaps.map((gap) => [120, 240, 480, 960, 1920, 3600].find((w) => Math.abs(gap - w) < 30));
    assert.deepEqual(
      waits.slice(0, 6),
      [120, 240, 480, 960, 1920, 3600],
      `push retried after ${gaps.slice(0, 10).join(', ')}… s (${gaps.length} in all)`,
    );
    assert.ok(
      waits.slice(6).every((w) => w === 3600),
      `then hourly: ${gaps.slice(6, 16).join(', ')}… s`,
    );
    assert.ok(run.pushTries.length < 40, `${run.pushTries.length} push tries`);
    assert.ok((run.history.events ?? []).length < 600, `${run.history.events?.length} history events`);
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, run.history);
  });

  it("the default: a receiver's Retry-After lengthens a wait up to an hour, and never shortens one", async () => {
    const run = await runEpisode(
      [
        { result: 'retry', status: 429, retryAfterSeconds: 300, detail: 'http 429' },
        { result: 'retry', status: 503, retryAfterSeconds: 86_400, detail: 'http 503' },
        { result: 'retry', status: 503, retryAfterSeconds: 60, detail: 'http 503' },
        { result: 'delivered', status: 200 },
      ],
      'ts-callback-day-retry-after',
      DEFAULT_EPISODE_OPTIONS,
    );
    assert.equal(run.result.callback, 'delivered');
    assert.equal(run.attempts, 4);
    assert.deepEqual(run.timers.slice(0, 2), [300, 3600]);
    const third = run.timers[2];
    assert.ok(
      third >= 1620 && third <= 1980,
      `third wait ${third} s: the schedule's 30 min ± 10 %, not 60 s`,
    );
    assert.deepEqual(
      run.sent.map((s) =>
        s.nextAttemptAtMs === undefined ? undefined : (s.nextAttemptAtMs - s.atMs) / 1000,
      ),
      [...run.timers, undefined],
    );
  });

  it('a start without options keeps the schedule it always had: five attempts, 20/60/180/540 s apart', async () => {
    assert.deepEqual(EPISODE_OPTIONS_WHEN_ABSENT.callbackRetrySeconds, [20, 60, 180, 540]);
    const run = await runEpisode([{ result: 'retry', status: 503, detail: 'http 503' }], 'ts-callback-503');
    assert.equal(run.result.callback, 'gave_up');
    assert.equal(run.attempts, 5);
    assert.deepEqual(run.timers, [20, 60, 180, 540]);
    assert.ok(
      run.settled.some((r) => r?.startsWith('gave_up')),
      `claim settled as ${run.settled}`,
    );
  });

  it("histories started before the jitter: a receiver's Retry-After stretches a wait, the whole wait capped at an hour", async () => {
    const run = await runEpisode(
      [
        { result: 'retry', status: 429, retryAfterSeconds: 300, detail: 'http 429' },
        { result: 'retry', status: 503, retryAfterSeconds: 86_400, detail: 'http 503' },
        { result: 'delivered', status: 200 },
      ],
      'ts-callback-retry-after',
    );
    assert.equal(run.result.callback, 'delivered');
    assert.equal(run.attempts, 3);
    assert.deepEqual(run.timers, [300, 3600]);
    assert.ok(run.sent.every((s) => s.place?.scheduleUncapped === undefined));
  });

  it('histories started before the jitter: a listed wait over an hour is still capped at one', async () => {
    const run = await runEpisode(
      [
        { result: 'retry', status: 503, detail: 'http 503' },
        { result: 'delivered', status: 200 },
      ],
      'ts-callback-old-cap',
      { callbackRetrySeconds: [7200] },
    );
    assert.equal(run.result.callback, 'delivered');
    assert.deepEqual(run.timers, [3600]);
    assert.equal(run.sent[0].place?.waitIfRetried, 7200);
  });

  it("a team event whose record fails past its quick retries is handed off again on the callbacks' schedule", async () => {
    // An event never recorded is one the sweep cannot see: the episode must not drop it.
    const failures = 25;
    const run = await runEpisode(
      [{ result: 'delivered', status: 200 }],
      'ts-team-event-hand-off',
      DEFAULT_EPISODE_OPTIONS,
      false,
      failures,
    );
    recordHistory(run.history, 'episode-history-team-event-hand-off-retried.json');
    assert.equal(run.result.callback, 'delivered');
    assert.ok(run.teamEventRecorded, `recorded after ${run.teamEventRecords.length} tries`);
    assert.equal(run.teamEventRecords.length, failures + 1);
    // After the quick retries (20), the hand-off waits the schedule's first wait, then tries again.
    const gap = (run.teamEventRecords[20] - run.teamEventRecords[19]) / 1000;
    const first = DEFAULT_EPISODE_OPTIONS.callbackRetrySeconds[0];
    assert.ok(gap >= first, `tried again ${gap} s after the quick retries ran out`);
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, run.history);
  });

  it('a claim that cannot be held through a wait, nor after it (the store away), leaves the schedule going: delivered on its next attempt', async () => {
    claimHoldsFail = true;
    try {
      const run = await runEpisode(
        [
          { result: 'retry', status: 503, detail: 'http 503' },
          { result: 'delivered', status: 200 },
        ],
        'ts-callback-hold-fails',
        DEFAULT_EPISODE_OPTIONS,
      );
      assert.equal(run.result.callback, 'delivered');
      assert.equal(run.attempts, 2);
      assert.equal(
        run.renewals.length,
        40,
        'the hold tried its 20 quick times before the wait, and after it',
      );
    } finally {
      claimHoldsFail = false;
    }
  });

  it('a claim whose hold failed before a wait, taken over meanwhile (a recover sent it), is not sent again', async () => {
    claimHoldFailures = 20; // every quick try of the hold before the first wait
    takenOverMeanwhile = true;
    try {
      const run = await runEpisode(
        [
          { result: 'retry', status: 503, detail: 'http 503' },
          { result: 'delivered', status: 200 },
        ],
        'ts-callback-hold-failed-taken-over',
        DEFAULT_EPISODE_OPTIONS,
      );
      recordHistory(run.history, 'episode-history-callback-hold-failed-checked.json');
      assert.equal(run.attempts, 1, 'sent once: the next attempt is the new holder’s');
      assert.equal(run.result.callback, 'claimed_elsewhere');
      assert.deepEqual(
        run.settled,
        ['not_addressable'],
        'the push’s only: the callback’s is another holder’s',
      );
    } finally {
      claimHoldFailures = 0;
      takenOverMeanwhile = false;
    }
  });

  it('a claim held through a wait but taken over after it (stale as the worker lagged, a recover sent it) is not sent again', async () => {
    takenOverDuringWait = true;
    try {
      const run = await runEpisode(
        [
          { result: 'retry', status: 503, detail: 'http 503' },
          { result: 'delivered', status: 200 },
        ],
        'ts-callback-taken-over-during-wait',
        DEFAULT_EPISODE_OPTIONS,
      );
      recordHistory(run.history, 'episode-history-callback-claim-checked-after-wait.json');
      assert.equal(run.attempts, 1, 'sent once: the next attempt is the new holder’s');
      assert.equal(run.result.callback, 'claimed_elsewhere');
    } finally {
      takenOverDuringWait = false;
    }
  });

  it('an attempt after a wait whose claim another holder took while it waited for its slot sends nothing and ends the schedule', async () => {
    // The activity holds the claim again just before the request (place.claim), and finds it taken.
    const run = await runEpisode(
      [
        { result: 'retry', status: 503, detail: 'http 503' },
        { result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true },
      ],
      'ts-callback-claimed-in-slot',
      DEFAULT_EPISODE_OPTIONS,
    );
    recordHistory(run.history, 'episode-history-callback-claimed-in-slot.json');
    assert.equal(run.attempts, 2);
    assert.equal(run.sent[1].place?.claim?.key, claimKeys.callback(outcome.episodeId));
    assert.equal(
      run.sent[1].place?.claim?.heldSince,
      undefined,
      'after a wait: held again whatever the time',
    );
    assert.equal(run.result.callback, 'claimed_elsewhere');
    assert.deepEqual(run.settled, ['not_addressable'], 'the push’s only: the callback’s is another holder’s');
  });

  it('a first attempt whose claim another holder took while it waited in a backed-up queue sends nothing and ends the schedule', async () => {
    // A first attempt carries its claim and when it was taken: past half the grace, the activity holds it again
    // just before the request, and finds it taken (a recover sent it once it went stale).
    const run = await runEpisode(
      [{ result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true }],
      'ts-callback-first-claimed-in-slot',
      DEFAULT_EPISODE_OPTIONS,
    );
    const first = run.sent[0];
    assert.equal(first.place?.claim?.key, claimKeys.callback(outcome.episodeId));
    const heldSince = first.place?.claim?.heldSince;
    assert.ok(
      heldSince !== undefined && heldSince <= first.atMs,
      'taken no later than the attempt was asked for',
    );
    assert.equal(run.attempts, 1);
    assert.equal(run.result.callback, 'claimed_elsewhere');
    assert.deepEqual(run.settled, ['not_addressable'], 'the push’s only: the callback’s is another holder’s');
  });

  it('a callback answered 2xx whose settle fails past its quick retries is settled once the store is back, never released', async () => {
    settleFailures = 25;
    try {
      const run = await runEpisode([{ result: 'delivered', status: 200 }], 'ts-callback-settle-outage');
      recordHistory(run.history, 'episode-history-callback-settle-outlasted.json');
      assert.equal(run.result.callback, 'delivered');
      assert.equal(run.attempts, 1);
      // The push branch settles not_addressable; the callback's claim is settled delivered, never let go.
      assert.deepEqual(run.settled.sort(), ['not_addressable', undefined]);
    } finally {
      settleFailures = 0;
    }
  });

  it('a refusal stops the schedule at once', async () => {
    const run = await runEpisode(
      [{ result: 'stop', detail: 'refused: private address' }],
      'ts-callback-stop',
    );
    assert.equal(run.result.callback, 'gave_up');
    assert.equal(run.attempts, 1);
    assert.deepEqual(run.timers, []);
  });

  it("a callback attempt's start-to-close is the receiver's timeout plus a margin; older histories keep a minute", async () => {
    const stop: Attempt[] = [{ result: 'stop', detail: 'http 410' }];
    const defaults = await runEpisode(stop, 'ts-callback-attempt-default', DEFAULT_EPISODE_OPTIONS);
    assert.deepEqual(defaults.attemptTimeouts, [DEFAULT_EPISODE_OPTIONS.callbackAttemptSeconds]);
    const absent = await runEpisode(stop, 'ts-callback-attempt-absent');
    assert.deepEqual(absent.attemptTimeouts, [30], 'a start without options keeps what it always meant');
    assert.equal(DEFAULT_EPISODE_OPTIONS.callbackAttemptSeconds, 40, 'CALLBACK_TIMEOUT_SECONDS 10 + 30');
    const short = await runEpisode(stop, 'ts-callback-attempt-short', {
      ...DEFAULT_EPISODE_OPTIONS,
      callbackAttemptSeconds: 22,
    });
    assert.deepEqual(short.attemptTimeouts, [22]);
    const older = await runEpisode(stop, 'ts-callback-attempt-older', {
      callbackRetrySeconds: DEFAULT_EPISODE_OPTIONS.callbackRetrySeconds,
    });
    assert.deepEqual(older.attemptTimeouts, [60]);
  });
});
