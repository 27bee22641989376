// A team's callback recover and its redeliveries, on Temporal's time-skipping test server, with stand-in
// activities. Through a store outage (calls failing past a quick call's 20 tries, about a quarter of an hour, then
// back) neither ends: the recover reads its next page and completes, and a redelivery the receiver took brings its
// claim up to date; the clock jumps, so the outage takes seconds. And a recover's redelivery sends only a callback
// still given up.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { ApplicationFailure } from '@temporalio/common';
import { Worker } from '@temporalio/worker';
import type { Activities, GaveUpPage } from '../../contract/activities';
import { callbackRecoverWorkflow, callbackRedeliverWorkflow } from '../../workflows';
import { callbackRedeliverWorkflowId } from '../../contract/workflows';
import { waitUntil } from '../support/waitUntil';
import type { RecoverCounts, RecoverInput } from '../../contract/workflows';
import { workflowBundle } from '../support/workflowBundle';
import { onTimeSkipping } from '../support/timeSkipping';
import { recordHistory } from '../support/historyFixture';

/** Failures past a quick call's 20 tries. */
const OUTAGE_FAILURES = 25;

/** Retried at once: the test waits on the failures' count, not on the quick calls' backoff. */
const storeAway = () => ApplicationFailure.create({ message: 'the store is away', nextRetryDelay: 1 });

/**
 * Stand-ins for a recover's and its redeliveries' activities: two pages of one give-up each, every send taken by
 * the receiver; `over` replaces some of them. Records the sends, the claims resettled and the progress saved.
 */
function standIns(over: Record<string, unknown> = {}) {
  const sent: string[] = [];
  const resettled: [string, string][] = [];
  const saved: { counts: RecoverCounts; completed: boolean }[] = [];
  const pages: Record<string, GaveUpPage> = {
    first: {
      callbacks: [{ runId: 'run_1', episodeId: 'run_1:end', seenAttempts: 2 }],
      next: { at: '2026-12-06T00:30:00.000Z', id: 'run_1' },
    },
    second: { callbacks: [{ runId: 'run_2', episodeId: 'run_2:end', seenAttempts: 2 }] },
  };
  const activities = {
    gaveUpCallbacks: async (request: { after?: unknown }) => pages[request.after ? 'second' : 'first'],
    saveRecoverProgress: async (_recover: unknown, counts: RecoverCounts, completed: boolean) =>
      void saved.push({ counts: { ...counts }, completed }),
    takeRecoverSend: async () => ({ admitted: true }),
    returnRecoverSend: async () => undefined,
    describeClaim: async () => ({ state: 'delivered', result: 'gave_up: http 503' }),
    callbackAttemptCount: async () => 2,
    sendCallback: async (episodeId: string) => {
      sent.push(episodeId);
      return { result: 'delivered', status: 204 };
    },
    resettleClaim: async (key: string, result: string) => {
      resettled.push([key, result]);
      return true;
    },
    ...over,
  } as unknown as Partial<Activities>;
  return { activities, sent, resettled, saved };
}

const INPUT: RecoverInput = {
  recoverId: 'rec_1',
  teamId: 'acme',
  since: '2026-12-06T00:00:00.000Z',
  until: '2026-12-06T01:00:00.000Z',
  maxSends: 100,
};

describe('a callback recover and its redeliveries, on time-skipping Temporal', function () {
  this.timeout(120_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  async function run<T>(
    activities: Partial<Activities>,
    taskQueue: string,
    body: () => Promise<T>,
  ): Promise<T> {
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    return worker.runUntil(body);
  }

  it('a recover whose next page cannot be read for a while reads it once the store is back, sends it, and completes', async () => {
    const taskQueue = 'ts-callback-recover';
    let pageFailures = OUTAGE_FAILURES;
    const { activities, sent, saved } = standIns();
    const firstPages = activities.gaveUpCallbacks!;
    activities.gaveUpCallbacks = async (request) => {
      if (request.after && pageFailures-- > 0) throw storeAway();
      return firstPages(request);
    };
    const counts = await run(activities, taskQueue, async () => {
      const handle = await env.client.workflow.start(callbackRecoverWorkflow, {
        taskQueue,
        workflowId: 'cb-recover|acme',
        args: [INPUT],
      });
      try {
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'callback-recover-history-store-outage-outlasted.json');
      }
    });
    assert.deepEqual(sent, ['run_1:end', 'run_2:end']);
    assert.equal(counts.delivered, 2);
    assert.equal(saved.at(-1)?.completed, true, 'its progress says it completed');
  });

  it('a redelivery the receiver took whose claim cannot be resettled for a while resettles it once the store is back', async () => {
    const taskQueue = 'ts-callback-redeliver';
    let resettleFailures = OUTAGE_FAILURES;
    const { activities, sent, resettled } = standIns();
    const resettle = activities.resettleClaim!;
    activities.resettleClaim = async (key, result) => {
      if (resettleFailures-- > 0) throw storeAway();
      return resettle(key, result);
    };
    const result = await run(activities, taskQueue, async () => {
      const handle = await env.client.workflow.start(callbackRedeliverWorkflow, {
        taskQueue,
        workflowId: 'cb-redeliver|run_1:end',
        args: [{ teamId: 'acme', runId: 'run_1', episodeId: 'run_1:end', seenAttempts: 2 }],
      });
      try {
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'callback-redeliver-history-store-outage-outlasted.json');
      }
    });
    assert.deepEqual(sent, ['run_1:end']);
    assert.equal(result.result, 'delivered');
    assert.deepEqual(resettled, [['cb|run_1:end', 'redelivered']]);
  });

  it("a recover's redelivery of a callback delivered since its page was read sends nothing", async () => {
    const taskQueue = 'ts-callback-recover-superseded';
    // A manual redelivery took it meanwhile: its claim says redelivered, and the page's count of attempts still holds.
    const { activities, sent } = standIns({
      describeClaim: async () => ({ state: 'delivered', result: 'redelivered' }),
    });
    const result = await run(activities, taskQueue, async () => {
      const handle = await env.client.workflow.start(callbackRedeliverWorkflow, {
        taskQueue,
        workflowId: 'cb-redeliver|run_3:end',
        args: [
          { teamId: 'acme', runId: 'run_3', episodeId: 'run_3:end', seenAttempts: 2, recoverId: 'rec_1' },
        ],
      });
      try {
        return await handle.result();
      } finally {
        recordHistory(await handle.fetchHistory(), 'callback-redeliver-history-recover-superseded.json');
      }
    });
    assert.deepEqual(sent, [], 'sent again to a receiver that took it');
    assert.equal(result.result, 'superseded');
  });

  it('two redeliveries that end in one task, the held one giving its slot back as the budget is read: a replay decides the same', async () => {
    const taskQueue = 'ts-callback-recover-two-end';
    const page: GaveUpPage = {
      callbacks: ['run_a', 'run_b', 'run_c'].map((runId) => ({
        runId,
        episodeId: `${runId}:end`,
        seenAttempts: 2,
      })),
    };
    let bothClosed!: () => void;
    const closed = new Promise<void>((resolve) => (bothClosed = resolve));
    let takesOfLast = 0;
    const spent = { admitted: false, retryAfterSeconds: 60, freeAt: '2026-12-06T01:01:00.000Z' };
    const { activities, sent } = standIns({
      gaveUpCallbacks: async () => page,
      takeRecoverSend: async (send: { episodeId: string }) => {
        if (send.episodeId !== 'run_c:end') return { admitted: true };
        const take = takesOfLast++;
        // The first read of a spent budget lasts until both redeliveries closed: the task that brings their ends
        // brings both. The second is read after the held one gave its slot back.
        if (take === 0) await closed;
        if (take === 1) await new Promise((resolve) => setTimeout(resolve, 300));
        return take < 2 ? spent : { admitted: true };
      },
      sendCallback: async (episodeId: string) => {
        sent.push(episodeId);
        return episodeId === 'run_b:end'
          ? { result: 'retry', detail: 'breaker_open', held: 'breaker_open' }
          : { result: 'delivered', status: 204 };
      },
    });
    const counts = await run(activities, taskQueue, async () => {
      // A short task timeout: the first read's long wait heartbeats the task, and the redeliveries start meanwhile.
      const handle = await env.client.workflow.start(callbackRecoverWorkflow, {
        taskQueue,
        workflowId: 'cb-recover|acme-two-end',
        args: [INPUT],
        workflowTaskTimeout: '2s',
      });
      await waitUntil('both redeliveries closed', async () => {
        const statuses = await Promise.all(
          ['run_a:end', 'run_b:end'].map(async (episodeId) => {
            try {
              return (await env.client.workflow.getHandle(callbackRedeliverWorkflowId(episodeId)).describe())
                .status.name;
            } catch {
              return 'NOT_FOUND';
            }
          }),
        );
        return statuses.every((status) => status === 'COMPLETED');
      });
      bothClosed();
      const result = await handle.result();
      const history = await handle.fetchHistory();
      recordHistory(history, 'callback-recover-history-calls-in-turn.json');
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history);
      return result;
    });
    assert.deepEqual(sent.sort(), ['run_a:end', 'run_b:end', 'run_c:end']);
    assert.equal(counts.delivered, 2);
    assert.equal(counts.held, 1);
  });
});
