// The callback's retry schedule runs on durable timers of 20/60/180/540 s by default: minutes of waiting that the
// dev server would make the suite sit through. Temporal's time-skipping test server jumps the clock instead, so
// the real default schedule is checked as it is, in seconds of wall time. The activities are stand-ins here:
// what is under test is the workflow's decisions (the suites on the dev server drive the real ones).
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../contract/activities';
import type { RunOutcome } from '../../domain/outcome';
import { episodeWorkflow } from '../../workflows';
import { DEFAULT_EPISODE_OPTIONS, type EpisodeOptions } from '../../contract/workflows';
import { workflowBundle } from '../support/stack';
import { startTimeSkipping, type TimeSkipping } from '../support/timeSkipping';

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
  let server: TimeSkipping;
  let env: TestWorkflowEnvironment;

  before(async () => {
    server = await startTimeSkipping();
    env = server.env;
  });
  after(async () => {
    await server?.stop();
  });

  /** Runs one episode whose callback answers `answers` in turn; returns the claim results and the timers. */
  async function runEpisode(answers: Attempt[], taskQueue: string, options?: EpisodeOptions) {
    const settled: Array<string | undefined> = [];
    let attempts = 0;
    const activities = {
      tryMark: async () => true,
      unmark: async () => undefined,
      markDelivered: async (_key: string, _holder: string, result?: string) => void settled.push(result),
      recordEpisode: async () => undefined,
      isStandbyVetoed: async () => false,
      deliverPush: async () => ({ addressable: false, reason: 'no sink' }),
      sendCallback: async () => answers[Math.min(attempts++, answers.length - 1)],
    } as unknown as Partial<Activities>;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const workflowId = `${outcome.episodeId}/${taskQueue}`;
    const started = Date.now();
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
    return { result, attempts, settled, timers, attemptTimeouts, wallMs: Date.now() - started };
  }

  it('a receiver that keeps answering 503 is tried five times, 20/60/180/540 s apart, then given up', async () => {
    const run = await runEpisode([{ result: 'retry', status: 503, detail: 'http 503' }], 'ts-callback-503');
    assert.equal(run.result.callback, 'gave_up');
    assert.equal(run.attempts, 5);
    assert.deepEqual(run.timers, [20, 60, 180, 540]);
    assert.ok(
      run.settled.some((r) => r?.startsWith('gave_up')),
      `claim settled as ${run.settled}`,
    );
    assert.ok(run.wallMs < 60_000, `13 minutes of timers took ${run.wallMs} ms of wall time`);
  });

  it("a receiver's Retry-After stretches a wait, up to an hour", async () => {
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
    const defaults = await runEpisode(stop, 'ts-callback-attempt-default');
    assert.deepEqual(defaults.attemptTimeouts, [DEFAULT_EPISODE_OPTIONS.callbackAttemptSeconds]);
    assert.equal(DEFAULT_EPISODE_OPTIONS.callbackAttemptSeconds, 30, 'CALLBACK_TIMEOUT_SECONDS 10 + 20');
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
