// A team event's endpoints are delivered side by side, each branch ending its steps with store calls (local
// activities). On a first run, local activities in flight together resolve one activation each, in the order they
// finish; on a replay, together. Here one endpoint's attempt answers in the same workflow task as the other's wait
// ends, so the first holds its claim before a wait while the second holds its claim again before an attempt: the
// two holds side by side, the second finishing last. The history must replay. The activities are stand-ins.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities, CallbackAttempt } from '../../contract/activities';
import type { RecordedTeamEvent } from '../../contract/workflows';
import { interactionTeamEvent } from '../../domain/teamEvents';
import { teamEventWorkflow } from '../../workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { recordHistory } from '../support/historyFixture';
import { deferred } from '../support/deferred';

// Short: with a workflow task pending and no worker, the test server does not skip time, so B's wait ends in real time.
const WAIT_SECONDS = 3;
const recorded: RecordedTeamEvent = {
  sequence: 1,
  endpointIds: ['ep_a', 'ep_b'],
  retrySeconds: [WAIT_SECONDS, WAIT_SECONDS, WAIT_SECONDS],
  retryJitter: 0,
  attemptSeconds: 30,
};

/** An answer's team event, of run `run_<name>`. */
const answered = (name: string) =>
  interactionTeamEvent(
    'interaction.answered',
    { id: `run_${name}`, teamId: 'acme', status: 'running', title: 'Side by side' },
    { id: `int_${name}` },
    { answeredBy: 'ada', answeredAt: '2026-12-07T10:00:00.000Z' },
    '2026-12-07T10:00:00.000Z',
  );

describe('a team event whose deliveries hold their claims side by side, replayed', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  it('two endpoints each retried once, side by side: delivered, and the history replays', async () => {
    const taskQueue = 'ts-team-event-retried-side-by-side';
    const event = answered('retried');
    const retry: CallbackAttempt = { result: 'retry', status: 503, detail: 'http 503' };
    const activities = {
      tryMarkEach: async (keys: string[]) => keys.map(() => true),
      markDelivered: async () => true,
      unmark: async () => undefined,
      renewClaim: async () => true,
      sendEndpointEventToEach: async (): Promise<CallbackAttempt[]> => [retry, retry],
      sendEndpointEvent: async (): Promise<CallbackAttempt> => ({ result: 'delivered', status: 204 }),
    } as unknown as Partial<Activities>;
    const bundle = await workflowBundle();
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      activities,
      workflowBundle: bundle,
    });
    const handle = await env.client.workflow.start(teamEventWorkflow, {
      taskQueue,
      workflowId: `team-event|${event.id}`,
      args: [event, recorded],
    });
    const result = await worker.runUntil(handle.result());
    const history = await handle.fetchHistory();
    assert.deepEqual(result.deliveries, { ep_a: 'delivered', ep_b: 'delivered' });
    await Worker.runReplayHistory({ workflowBundle: bundle }, history);
  });

  it("one endpoint's hold before a wait and the other's before an attempt, finishing in turn, replay in that turn", async () => {
    const taskQueue = 'ts-team-event-holds-side-by-side';
    const event = answered('holds');
    const secondOfA = deferred();
    const answerA = deferred();
    const waitOfB = deferred();
    let secondWorker = false;
    let waitsOfB = 0;
    const tries: Record<string, number> = { ep_a: 0, ep_b: 0 };
    const retry: CallbackAttempt = { result: 'retry', status: 503, detail: 'http 503' };
    const activities = {
      tryMarkEach: async (keys: string[]) => keys.map(() => true),
      markDelivered: async () => true,
      unmark: async () => undefined,
      // On the second worker a hold after a wait (no seconds) finishes after a hold before one.
      renewClaim: async (key: string, _holder: string, forSeconds?: number) => {
        if (forSeconds !== undefined && key.endsWith('ep_b') && ++waitsOfB === 2) waitOfB.resolve();
        if (secondWorker && forSeconds === undefined) await new Promise((r) => setTimeout(r, 300));
        return true;
      },
      sendEndpointEventToEach: async (): Promise<CallbackAttempt[]> => {
        tries.ep_a++;
        tries.ep_b++;
        return [retry, retry];
      },
      sendEndpointEvent: async (_eventId: string, endpointId: string): Promise<CallbackAttempt> => {
        const now = ++tries[endpointId];
        if (endpointId === 'ep_a' && now === 2) {
          // A's second attempt answers only once B waits on its timer and no worker takes workflow tasks.
          secondOfA.resolve();
          await answerA.promise;
          return retry;
        }
        if (endpointId === 'ep_b' && now === 2) return retry;
        return { result: 'delivered', status: 204 };
      },
    } as unknown as Partial<Activities>;
    const bundle = await workflowBundle();
    // Workflow tasks (and the local activities, the store calls) on workflow workers that go and come; attempts
    // (activities) on a worker of their own that stays, so the first workflow worker is gone before A's attempt
    // answers: a workflow task it took while going would time out, and the test server's clock then stood still.
    const workflowWorker = (cached: boolean) =>
      Worker.create({
        connection: env.nativeConnection,
        taskQueue,
        activities,
        workflowBundle: bundle,
        enableNonLocalActivities: false,
        ...(cached ? {} : { maxCachedWorkflows: 0 }),
      });
    const attempts = await Worker.create({ connection: env.nativeConnection, taskQueue, activities });
    const attemptsRun = attempts.run();
    const first = await workflowWorker(false);
    const firstRun = first.run();
    const handle = await env.client.workflow.start(teamEventWorkflow, {
      taskQueue,
      workflowId: `team-event|${event.id}`,
      args: [event, recorded],
    });
    // Both first attempts answer retry: past their waits, A's second attempt hangs and B's waits again.
    await env.sleep(WAIT_SECONDS * 1000 + 1000);
    await Promise.all([secondOfA.promise, waitOfB.promise]);
    // B's second wait is in the history before the worker goes.
    for (;;) {
      const events = (await handle.fetchHistory()).events ?? [];
      if (events.filter((e) => e.timerStartedEventAttributes).length >= 3) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    first.shutdown();
    await firstRun;
    answerA.resolve();
    // B's wait ends with no worker: the next workflow task brings A's answer and B's timer together.
    await env.sleep(WAIT_SECONDS * 1000 + 1000);
    // The case is set: B's second wait ended while A's answer waits for a worker, in one workflow task.
    for (;;) {
      const events = (await handle.fetchHistory()).events ?? [];
      if (events.filter((e) => e.timerFiredEventAttributes).length >= 3) break;
      await env.sleep(1000);
    }
    secondWorker = true;
    const second = await workflowWorker(true);
    const result = await second.runUntil(handle.result());
    attempts.shutdown();
    await attemptsRun;
    const history = await handle.fetchHistory();
    recordHistory(history, 'team-event-history-holds-side-by-side.json');
    assert.deepEqual(result.deliveries, { ep_a: 'delivered', ep_b: 'delivered' });
    await Worker.runReplayHistory({ workflowBundle: bundle }, history);
  });
});
