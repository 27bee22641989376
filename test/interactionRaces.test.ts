// An interaction's answer racing its own sends, on the dev server: answers a few milliseconds either side of each
// rung's instant, and snoozes answered within their hour. The ladder is the real 7-day one; the question is dated
// back (the stand-ins' plan says when it was asked) so that the racing rung falls due a moment from now, and a
// snooze is dated back the same way. What the workflow itself must do is read from its history: once the answer is
// in it, no send is scheduled after it; the claims and the store's re-check (the stand-ins keep both) do the rest.
import assert from 'node:assert/strict';
import { Client, Connection, type WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { NativeConnection, Worker } from '@temporalio/worker';
import {
  interactionAnsweredSignal,
  interactionSnoozedSignal,
  type InteractionRef,
} from '../contract/workflows';
import {
  interactionClaimKeys,
  SNOOZE_SECONDS,
  SNOOZES_PER_EXECUTION,
  type EscalationRung,
} from '../domain/interaction';
import { interactionWorkflow } from '../workflows';
import {
  InteractionStandIns,
  SEVEN_DAY_LADDER,
  type Question,
  type QuestionOptions,
} from './support/interactionStandIns';
import { recordFixture } from './support/harness';
import { testConfig, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { workflowBundle } from './support/workflowBundle';

const LADDER = SEVEN_DAY_LADDER;
/** How far either side of a rung's instant the answers land (ms). */
const OFFSETS_MS = [-25, -1, 0, 1, 25, 500];
/** How far ahead the racing instant is put: time for the earlier rungs, already due, to go out first. */
const LEAD_MS = 2000;
const EventType = temporal.api.enums.v1.EventType;

const sendsOf = (question: Question): number[] =>
  question.sends.filter((s) => s.what.startsWith('rung ')).map((s) => Number(s.what.split(' ')[1]));

/** The sends the workflow scheduled after the answer reached its history (none may be: the close and reads aside). */
async function scheduledAfterAnswer(handle: WorkflowHandle): Promise<string[]> {
  const { events } = await handle.fetchHistory();
  const answeredAt = events!.findIndex(
    (e) =>
      e.eventType === EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED &&
      e.workflowExecutionSignaledEventAttributes?.signalName === interactionAnsweredSignal.name,
  );
  assert.ok(answeredAt >= 0, 'the answer is in the history');
  return events!
    .slice(answeredAt)
    .filter((e) => e.eventType === EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED)
    .map((e) => e.activityTaskScheduledEventAttributes!.activityType!.name!)
    .filter((name) => name !== 'closeAnswered' && name !== 'followUpSentBefore');
}

describe('an interaction answered while its sends fall due (dev server)', function () {
  this.timeout(120_000);
  const standIns = new InteractionStandIns(async () => Date.now());
  const taskQueue = `interaction-races-${process.pid}`;
  let connection: NativeConnection;
  let clientConnection: Connection;
  let client: Client;
  let worker: Worker;
  let running: Promise<void>;

  before(async () => {
    const address = testStack().temporalAddress;
    connection = await NativeConnection.connect({ address });
    clientConnection = await Connection.connect({ address });
    client = new Client({ connection: clientConnection });
    worker = await Worker.create({
      connection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities: standIns.activities(),
    });
    running = worker.run();
  });

  after(async () => {
    worker?.shutdown();
    await running;
    await clientConnection?.close();
    await connection?.close();
  });

  /** Starts one question asked at `askedAtMs`; answer and snooze go through signal-with-start, as the API's do. */
  async function ask(name: string, askedAtMs: number, rungs: EscalationRung[], faults?: QuestionOptions) {
    const ref: InteractionRef = {
      runId: `run_${name}`,
      teamId: 'acme',
      interactionId: `int_${name}_${Date.now()}`,
    };
    const question = standIns.ask(ref.interactionId, askedAtMs, rungs, faults);
    const options = {
      workflowId: `interaction|${ref.interactionId}`,
      taskQueue,
      args: [ref] as [InteractionRef],
    };
    const handle = await client.workflow.start(interactionWorkflow, options);
    return {
      ref,
      question,
      handle,
      answer: async () => {
        question.storeAnswer();
        await client.workflow.signalWithStart(interactionWorkflow, {
          ...options,
          signal: interactionAnsweredSignal,
          signalArgs: [{ answeredBy: 'bob', at: new Date().toISOString() }],
        });
      },
      snooze: async (snoozeId: string, atMs: number) => {
        await client.workflow.signalWithStart(interactionWorkflow, {
          ...options,
          signal: interactionSnoozedSignal,
          signalArgs: [{ snoozeId, userId: 'alice', at: new Date(atMs).toISOString() }],
        });
      },
    };
  }

  it(`answers ${OFFSETS_MS.join(', ')} ms from each rung's instant: no send after the answer, the rest cancelled, the close once`, async () => {
    const instantMs = Date.now() + LEAD_MS;
    const races = await Promise.all(
      LADDER.flatMap((rung, k) =>
        OFFSETS_MS.map(async (offsetMs) => {
          const name = `race-${k}${offsetMs < 0 ? '' : '+'}${offsetMs}`;
          const asked = await ask(name, instantMs - rung.afterSeconds * 1000, LADDER);
          await new Promise((resolve) => setTimeout(resolve, instantMs + offsetMs - Date.now()));
          await asked.answer();
          return { name, k, ...asked, result: await asked.handle.result() };
        }),
      ),
    );
    for (const { name, k, question, handle, result } of races) {
      assert.deepEqual(await scheduledAfterAnswer(handle), [], `${name}: scheduled after the answer`);
      const sent = sendsOf(question);
      // A prefix of the ladder, each rung once; never past the racing rung (the next is hours or days away).
      assert.deepEqual(sent, [...Array(sent.length).keys()], `${name}: sent ${JSON.stringify(sent)}`);
      assert.ok(sent.length <= k + 1, `${name}: sent ${JSON.stringify(sent)}`);
      assert.deepEqual(result, { rungsSent: sent, snoozesSent: 0, closed: true }, name);
      assert.equal(question.closes, 1, `${name}: closes`);
    }
  });

  it('a snooze pushes the person again after its hour; a second snooze answered within its hour sends nothing', async () => {
    const asked = await ask('snooze', Date.now(), []);
    const dueMs = Date.now() + LEAD_MS;
    const backdatedMs = dueMs - SNOOZE_SECONDS * 1000; // snoozed an hour ago, less the lead
    await asked.snooze('s1', backdatedMs);
    await asked.snooze('s1', backdatedMs); // the device's retry: one snooze
    await waitUntil('the first snooze to be sent', () => asked.question.sends.length > 0, {
      seen: () => asked.question.sends,
    });
    await asked.snooze('s2', Date.now());
    await asked.answer();
    const result = await asked.handle.result();
    assert.deepEqual(
      asked.question.sends.map((s) => s.what),
      ['snooze s1'],
    );
    assert.ok(asked.question.sends[0].atMs >= dueMs, 'not before its hour');
    assert.deepEqual(await scheduledAfterAnswer(asked.handle), []);
    // One execution throughout (it waits a while for more after each send): the first snooze sent, the close.
    assert.deepEqual(result, { rungsSent: [], snoozesSent: 1, closed: true });
    assert.equal(asked.question.closes, 1);
  });

  it('a person who snoozes more than one execution takes is pushed again for every snooze, each once; a rung waiting to be tried again goes with them', async () => {
    const rung: EscalationRung = { afterSeconds: 60, to: 'owner', via: 'push' };
    const asked = await ask('snoozes', Date.now() - (rung.afterSeconds + 10) * 1000, [rung], {
      faults: ['failed'], // the rung's first try: tried again in an hour, its claim kept
      retrySeconds: [3600],
    });
    await waitUntil('the rung tried', () => asked.question.attempts > 0);
    const dueNowMs = Date.now() - SNOOZE_SECONDS * 1000; // each snooze dated back an hour: due at once
    const ids = Array.from({ length: SNOOZES_PER_EXECUTION + 6 }, (_, i) => `s${i}`);
    for (const id of ids) await asked.snooze(id, dueNowMs);
    await asked.snooze('s0', dueNowMs); // a device's retry of one already taken
    await waitUntil('every snooze sent', () => asked.question.sends.length >= ids.length, {
      seen: () => asked.question.sends.length,
    });
    await asked.answer();
    const result = await asked.handle.result();
    const { runId } = await asked.handle.describe();
    assert.notEqual(runId, asked.handle.firstExecutionRunId, 'it continued as new');
    assert.deepEqual(asked.question.sends.map((s) => s.what).sort(), ids.map((id) => `snooze ${id}`).sort());
    assert.deepEqual(result, { rungsSent: [], snoozesSent: ids.length, closed: true });
    assert.equal(asked.question.closes, 1);
    const rungKey = interactionClaimKeys.rung(asked.ref.interactionId, 0);
    assert.equal(standIns.claim(rungKey)?.result, 'closed', 'the rung still owed at the answer is settled');
    assert.ok(!standIns.released.includes(rungKey), 'its claim was never let go');
    // RECORD_FIXTURES=1: the first execution, which took the most one execution takes and continued as new.
    recordFixture(
      testConfig(),
      asked.handle.workflowId,
      'interaction-history-snoozes-continued.json',
      asked.handle.firstExecutionRunId,
    );
  });

  describe('a rung whose send fails', () => {
    const RUNG: EscalationRung = { afterSeconds: 60, to: 'owner', via: 'push' };
    /** A question whose one rung is due now, its sends meeting these faults, tried again a second apart. */
    const failing = (name: string, options: QuestionOptions) =>
      ask(name, Date.now() - RUNG.afterSeconds * 1000, [RUNG], { retrySeconds: [1, 1], ...options });

    it('is tried again on the schedule, its claim kept, until it goes (a throw past its retries, a push service down)', async () => {
      const asked = await failing('retried', { faults: ['throw', 'failed'] });
      await waitUntil('the rung sent', () => asked.question.sends.length > 0, {
        seen: () => asked.question.attempts,
      });
      await asked.answer();
      const result = await asked.handle.result();
      assert.deepEqual(result, { rungsSent: [0], snoozesSent: 0, closed: true });
      assert.equal(asked.question.attempts, 3);
      const key = interactionClaimKeys.rung(asked.ref.interactionId, 0);
      assert.deepEqual(standIns.claim(key)?.result, 'delivered');
      assert.ok(!standIns.released.includes(key), 'the claim was never let go');
    });

    it('is settled as given up once its schedule is spent, or at once when refused for good; never let go', async () => {
      const spent = await failing('spent', { faults: ['failed', 'throw', 'failed', 'failed'] });
      const refused = await failing('refused', { faults: ['refused', 'failed'] });
      for (const asked of [spent, refused]) {
        const key = interactionClaimKeys.rung(asked.ref.interactionId, 0);
        await waitUntil('the rung settled', () => standIns.claim(key)?.delivered === true, {
          seen: () => standIns.claim(key),
        });
        assert.equal(standIns.claim(key)?.result, 'gave_up');
        assert.ok(!standIns.released.includes(key), 'the claim was never let go');
        await asked.answer();
        assert.deepEqual(await asked.handle.result(), { rungsSent: [], snoozesSent: 0, closed: true });
      }
      assert.equal(spent.question.attempts, 3, 'the first try and one per wait of the schedule');
      assert.equal(refused.question.attempts, 1);
    });

    it('an attempt held by the breaker does not spend the schedule', async () => {
      const asked = await failing('held', { faults: ['held', 'failed', 'held', 'failed'] });
      await waitUntil('the rung sent', () => asked.question.sends.length > 0, {
        seen: () => asked.question.attempts,
      });
      await asked.answer();
      assert.deepEqual((await asked.handle.result()).rungsSent, [0]);
      assert.equal(asked.question.attempts, 5, 'two holds and the two waits of its schedule, then sent');
    });

    it('a retry still waiting when the answer comes, after a try that reached its person then threw, is settled sent', async () => {
      // Its push went, then its announce to the team failed past the activity's retries: the try threw.
      const asked = await failing('threw', { faults: ['throw-after-send'], retrySeconds: [3600] });
      await waitUntil('the first try', () => asked.question.sends.length > 0);
      const key = interactionClaimKeys.rung(asked.ref.interactionId, 0);
      await asked.answer();
      const result = await asked.handle.result();
      recordFixture(
        testConfig(),
        asked.handle.workflowId,
        'interaction-history-rung-threw-answered-sent.json',
      );
      assert.deepEqual(result, { rungsSent: [0], snoozesSent: 0, closed: true });
      assert.equal(asked.question.sends.length, 1, 'sent once');
      assert.equal(standIns.claim(key)?.result, 'delivered');
      assert.deepEqual(await scheduledAfterAnswer(asked.handle), []);
    });

    it('a retry still waiting when the answer comes is settled as closed, never sent', async () => {
      const asked = await failing('answered', { faults: ['failed'], retrySeconds: [3600] });
      await waitUntil('the first try', () => asked.question.attempts > 0);
      const key = interactionClaimKeys.rung(asked.ref.interactionId, 0);
      await asked.answer();
      assert.deepEqual(await asked.handle.result(), { rungsSent: [], snoozesSent: 0, closed: true });
      assert.equal(asked.question.attempts, 1);
      assert.equal(standIns.claim(key)?.result, 'closed');
      assert.deepEqual(await scheduledAfterAnswer(asked.handle), []);
    });
  });
});
