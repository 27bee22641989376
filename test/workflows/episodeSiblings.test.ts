// An episode's families run side by side, each ending with store calls (local activities). On a first run, local
// activities in flight together resolve one activation each, in the order they finish; on a replay, together. So a
// replay must come to the same decisions and issue the same commands however the branches' answers were grouped:
// whether a released push is tried again while a sibling runs, and which family's next command comes first. Each
// case holds two answers back until one workflow task brings both (or lets a record take a while), then replays
// the history. The activities are stand-ins: what is under test is the workflow's decisions on replay.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities } from '../../contract/activities';
import { claimKeys, type RunOutcome } from '../../domain/outcome';
import { episodeWorkflow } from '../../workflows';
import type { EpisodeOptions } from '../../contract/workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { recordHistory } from '../support/historyFixture';
import { deferred } from '../support/deferred';

const outcome: RunOutcome = {
  version: 1,
  episodeId: 'run_siblings:end',
  kind: 'run_finished',
  runId: 'run_siblings',
  teamId: 'acme',
  ownerId: 'alice',
  title: 'Deploy',
  status: 'finished',
  callbackRequested: true,
  occurredAt: '2026-12-01T09:00:00.000Z',
};

/** A callback tried twice, five seconds apart; a released push tried again five seconds later. */
const options: EpisodeOptions = {
  callbackRetrySeconds: [5],
  releasedRetrySeconds: 5,
  callbackAttemptSeconds: 40,
};

const pushFailed = {
  addressable: true,
  attempted: 1,
  delivered: 0,
  alreadyDelivered: 0,
  pruned: 0,
  failed: 1,
  retryable: 1,
};
const pushDelivered = {
  addressable: true,
  attempted: 1,
  delivered: 1,
  alreadyDelivered: 0,
  pruned: 0,
  failed: 0,
  retryable: 0,
};
const pushMissedSome = { ...pushDelivered, attempted: 2, failed: 1, retryable: 1 };
const slowly = () => new Promise((r) => setTimeout(r, 300));

describe('an episode whose families end together, replayed', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  /**
   * Runs the episode to its end; the push's try `together` and the callback's attempt `together` answer while no
   * worker takes workflow tasks, so one task brings both answers and the two branches settle their claims side by
   * side. `pushes` answers each push try in turn; `callbacks` each callback attempt; `slowSettle` says whose
   * settle finishes last. Returns the result, the push tries, and the history replayed.
   */
  async function runEpisode(
    taskQueue: string,
    {
      pushes,
      callbacks,
      together,
      slowSettle,
    }: {
      pushes: object[];
      callbacks: Array<{ result: string; status?: number; detail?: string }>;
      together: number;
      slowSettle: 'push' | 'callback';
    },
  ) {
    const pushStarted = deferred();
    const callbackStarted = deferred();
    const answer = deferred();
    const pushReleased = deferred();
    let pushTries = 0;
    let callbackTries = 0;
    const activities = {
      tryMark: async () => true,
      unmark: async () => {
        pushReleased.resolve();
        if (slowSettle === 'push') await slowly();
      },
      markDelivered: async (key: string) => {
        const whose = key === claimKeys.callback(outcome.episodeId) ? 'callback' : 'push';
        if (whose === slowSettle) await slowly();
      },
      renewClaim: async () => true,
      recordEpisode: async () => undefined,
      isStandbyVetoed: async () => false,
      callbackExhaustedAlert: async () => undefined,
      recordTeamEvent: async () => ({
        sequence: 1,
        endpointIds: [],
        retrySeconds: [],
        retryJitter: 0,
        attemptSeconds: 10,
      }),
      deliverPush: async () => {
        const now = pushTries++;
        if (now === together) {
          pushStarted.resolve();
          await answer.promise;
        }
        return pushes[Math.min(now, pushes.length - 1)];
      },
      sendCallback: async () => {
        const now = callbackTries++;
        if (now === together) {
          callbackStarted.resolve();
          await answer.promise;
        } else if (now < together) await pushReleased.promise; // the push is released while this attempt runs
        return callbacks[Math.min(now, callbacks.length - 1)];
      },
    } as unknown as Partial<Activities>;
    const bundle = await workflowBundle();
    // No sticky queue: the task that brings both answers goes to the next worker at once.
    const first = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      activities,
      workflowBundle: bundle,
      maxCachedWorkflows: 0,
      shutdownGraceTime: '30s',
    });
    const firstRun = first.run();
    const handle = await env.client.workflow.start(episodeWorkflow, {
      taskQueue,
      workflowId: `${outcome.episodeId}/${taskQueue}`,
      args: [outcome, options],
    });
    await Promise.all([pushStarted.promise, callbackStarted.promise]);
    first.shutdown();
    answer.resolve();
    await firstRun;
    const second = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      activities,
      workflowBundle: bundle,
    });
    const result = await second.runUntil(handle.result());
    const history = await handle.fetchHistory();
    return { result, pushTries, history, bundle };
  }

  it('the push’s release seen before the callback’s end: closes released once the callback ended, and a replay decides the same', async () => {
    const run = await runEpisode('ts-siblings-push-first', {
      pushes: [pushFailed, pushDelivered],
      callbacks: [{ result: 'delivered', status: 200 }],
      together: 0,
      slowSettle: 'callback',
    });
    recordHistory(run.history, 'episode-history-push-released-waits-for-siblings.json');
    // The sweep replays it now that the workflow closed: its next pass, not the push's own timer.
    assert.deepEqual([run.result.push, run.result.callback], ['released', 'delivered']);
    assert.equal(run.pushTries, 1);
    assert.ok(!run.history.events?.some((event) => event.timerFiredEventAttributes));
    await Worker.runReplayHistory({ workflowBundle: run.bundle }, run.history);
  });

  it('the callback’s end seen before the push’s second release: not tried again, and a replay decides the same', async () => {
    const run = await runEpisode('ts-siblings-callback-first', {
      pushes: [pushFailed],
      callbacks: [
        { result: 'retry', status: 503 },
        { result: 'delivered', status: 200 },
      ],
      together: 1,
      slowSettle: 'push',
    });
    assert.deepEqual([run.result.push, run.result.callback], ['released', 'delivered']);
    assert.equal(run.pushTries, 2, 'released once while the callback waited, then once as it ended');
    await Worker.runReplayHistory({ workflowBundle: run.bundle }, run.history);
  });

  it('the push’s release seen before the callback’s refusal: both families’ next commands replay in the order they were made', async () => {
    const run = await runEpisode('ts-siblings-callback-refused', {
      pushes: [pushFailed],
      callbacks: [{ result: 'stop', status: 410, detail: 'http 410' }],
      together: 0,
      slowSettle: 'callback',
    });
    recordHistory(run.history, 'episode-history-callback-refused-calls-in-turn.json');
    assert.deepEqual([run.result.push, run.result.callback], ['released', 'gave_up']);
    await Worker.runReplayHistory({ workflowBundle: run.bundle }, run.history);
  });

  it('a push that missed someone settled after the callback held its claim for a wait: both families’ waits replay in the order they were made', async () => {
    const run = await runEpisode('ts-siblings-push-missed-some', {
      pushes: [pushMissedSome, pushDelivered],
      callbacks: [
        { result: 'retry', status: 503 },
        { result: 'delivered', status: 200 },
      ],
      together: 0,
      slowSettle: 'push',
    });
    assert.deepEqual([run.result.push, run.result.callback], ['delivered', 'delivered']);
    assert.equal(run.pushTries, 2, 'the recipient missed was tried again');
    await Worker.runReplayHistory({ workflowBundle: run.bundle }, run.history);
  });

  it('a push whose claim failed and a team event whose record failed a moment later: a replay issues their retries in the same order', async () => {
    const taskQueue = 'ts-siblings-start-calls-failed';
    let records = 0;
    let callbacks = 0;
    const activities = {
      recordEpisode: async () => undefined,
      isStandbyVetoed: async () => false,
      // The store fails the push's claim at once, and the team event's record a moment later (past their retries).
      tryMark: async (key: string) => {
        if (key === claimKeys.push(outcome.episodeId))
          throw ApplicationFailure.nonRetryable('the store is away');
        return true;
      },
      recordTeamEvent: async () => {
        if (records++ === 0) {
          await slowly();
          throw ApplicationFailure.nonRetryable('the store is away');
        }
        return { sequence: 1, endpointIds: [], retrySeconds: [], retryJitter: 0, attemptSeconds: 10 };
      },
      markDelivered: async () => true,
      renewClaim: async () => true,
      unmark: async () => undefined,
      deliverPush: async () => pushDelivered,
      // The callback is still on its schedule while both are retried.
      sendCallback: async () =>
        callbacks++ === 0 ? { result: 'retry', status: 503 } : { result: 'delivered', status: 200 },
    } as unknown as Partial<Activities>;
    const bundle = await workflowBundle();
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      activities,
      workflowBundle: bundle,
    });
    const handle = await env.client.workflow.start(episodeWorkflow, {
      taskQueue,
      workflowId: `${outcome.episodeId}/${taskQueue}`,
      args: [outcome, options],
    });
    await worker.runUntil(handle.result());
    const history = await handle.fetchHistory();
    recordHistory(history, 'episode-history-start-calls-failed-answered-together.json');
    await Worker.runReplayHistory({ workflowBundle: bundle }, history);
  });

  it('a question whose push is claimed while its team event is still being recorded: a replay issues the same commands', async () => {
    const taskQueue = 'ts-siblings-question-team-event';
    const question: RunOutcome = {
      ...outcome,
      episodeId: 'run_question:input:ix_1',
      kind: 'run_paused',
      runId: 'run_question',
      status: 'paused',
      pause: { reason: 'human_input', seq: 1, interactionId: 'ix_1' },
      callbackRequested: false,
    };
    let pushes = 0;
    const activities = {
      recordEpisode: async () => undefined,
      isStandbyVetoed: async () => false,
      tryMark: async () => true,
      markDelivered: async () => true,
      // The team has an endpoint: its event's workflow is started once the record is in, which takes a while.
      recordTeamEvent: async () => {
        await slowly();
        return { sequence: 1, endpointIds: ['ep_1'], retrySeconds: [], retryJitter: 0, attemptSeconds: 10 };
      },
      deliverPush: async () => (pushes++, pushDelivered),
      // The team event's own workflow finds its endpoint's delivery claimed elsewhere and ends.
      tryMarkEach: async (keys: string[]) => keys.map(() => false),
    } as unknown as Partial<Activities>;
    const bundle = await workflowBundle();
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      activities,
      workflowBundle: bundle,
    });
    const handle = await env.client.workflow.start(episodeWorkflow, {
      taskQueue,
      workflowId: `${question.episodeId}/${taskQueue}`,
      args: [question, options],
    });
    const result = await worker.runUntil(handle.result());
    assert.equal(result.push, 'delivered');
    assert.equal(pushes, 1);
    await Worker.runReplayHistory({ workflowBundle: bundle }, await handle.fetchHistory());
  });
});
