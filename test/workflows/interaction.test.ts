// An interaction's workflow on time-skipping Temporal: the escalation ladder over 7 days on durable timers, an
// answer landing at each rung's instant (no rung after it), and a snooze's re-push an hour later unless answered.
// The activities are stand-ins that keep what the real ones keep: the claims, and the store's "answered" that a
// send re-reads before it goes (the answer is stored before its signal, as runs/answer.ts does). The real stack's
// sends: test/escalation.test.ts.
import assert from 'node:assert/strict';
import type { TestWorkflowEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import type { Activities, FollowUpResult } from '../../contract/activities';
import {
  interactionAnsweredSignal,
  interactionSnoozedSignal,
  type InteractionRef,
  type InteractionResult,
} from '../../contract/workflows';
import { SNOOZE_SECONDS, type EscalationRung } from '../../domain/interaction';
import { interactionWorkflow } from '../../workflows';
import { onTimeSkipping } from '../support/timeSkipping';
import { workflowBundle } from '../support/workflowBundle';

const DAY = 24 * 3600;
const LADDER: EscalationRung[] = [
  { afterSeconds: 60, to: 'owner', via: 'push' },
  { afterSeconds: 3600, to: 'team', via: 'push' },
  { afterSeconds: DAY, to: ['carol'], via: 'push' },
  { afterSeconds: 3 * DAY, to: 'team', via: 'webhook' },
  { afterSeconds: 7 * DAY, to: 'team', via: 'push' },
];

/** What the stand-ins saw, in order: every send with the server's time, and when the answer was stored. */
interface Seen {
  sends: { what: string; atMs: number; seq: number }[];
  answeredSeq?: number;
  closes: number;
}

describe('the interaction workflow on time-skipping Temporal', function () {
  this.timeout(240_000);
  let env: TestWorkflowEnvironment;
  onTimeSkipping((started) => (env = started));

  /** Runs one interaction asked at the server's now; `meanwhile` drives it (answers, snoozes) while it runs. */
  async function runInteraction(
    name: string,
    rungs: EscalationRung[],
    meanwhile: (drive: {
      askedAtMs: number;
      answer(): Promise<void>;
      snooze(id: string): Promise<void>;
    }) => Promise<void>,
  ): Promise<{ result: InteractionResult; seen: Seen; askedAtMs: number }> {
    const claims = new Map<string, { holder: string; delivered: boolean }>();
    const seen: Seen = { sends: [], closes: 0 };
    let seq = 0;
    let answered = false;
    const askedAtMs = await env.currentTimeMs();
    const send = async (what: string): Promise<FollowUpResult> => {
      if (answered) return { result: 'closed', delivered: 0 }; // the store's check before a send
      seen.sends.push({ what, atMs: await env.currentTimeMs(), seq: seq++ });
      return { result: 'delivered', delivered: 1 };
    };
    const activities: Partial<Activities> = {
      tryMark: async (key, holder) => {
        const claim = claims.get(key);
        if (claim && (claim.delivered || claim.holder !== holder)) return false;
        claims.set(key, { holder, delivered: false });
        return true;
      },
      markDelivered: async (key, holder) => {
        claims.set(key, { holder, delivered: true });
        return true;
      },
      unmark: async (key) => void claims.delete(key),
      interactionPlan: async () => ({ open: !answered, askedAtMs, rungs, webhookRetrySeconds: [5, 300] }),
      sendRung: (_ref, index) => send(`rung ${index}`),
      sendSnoozed: (_ref, snooze) => send(`snooze ${snooze.snoozeId}`),
      closeAnswered: async () => {
        seen.closes++;
        return { result: 'delivered', delivered: 2 };
      },
    };
    const taskQueue = `ts-interaction-${name}`;
    const worker = await Worker.create({
      connection: env.nativeConnection,
      taskQueue,
      workflowBundle: await workflowBundle(),
      activities,
    });
    const ref: InteractionRef = { runId: `run_${name}`, teamId: 'acme', interactionId: `int_${name}` };
    const workflowId = `interaction|${ref.interactionId}`;
    // As the API does: signal-with-start, so a signal finds the execution, or starts one when it has ended.
    const options = { workflowId, taskQueue, args: [ref] as [InteractionRef] };
    const result = await worker.runUntil(async () => {
      await env.client.workflow.start(interactionWorkflow, options);
      await meanwhile({
        askedAtMs,
        answer: async () => {
          answered = true;
          seen.answeredSeq = seq++;
          const at = new Date(await env.currentTimeMs()).toISOString();
          await env.client.workflow.signalWithStart(interactionWorkflow, {
            ...options,
            signal: interactionAnsweredSignal,
            signalArgs: [{ answeredBy: 'bob', at }],
          });
        },
        snooze: async (id) => {
          const at = new Date(await env.currentTimeMs()).toISOString();
          await env.client.workflow.signalWithStart(interactionWorkflow, {
            ...options,
            signal: interactionSnoozedSignal,
            signalArgs: [{ snoozeId: id, userId: 'alice', at }],
          });
        },
      });
      return env.client.workflow.getHandle(workflowId).result();
    });
    return { result, seen, askedAtMs };
  }

  /** Skips the server's clock to `atMs` (it must lie ahead). */
  async function skipTo(atMs: number): Promise<void> {
    const ahead = atMs - (await env.currentTimeMs());
    assert.ok(ahead >= 0, `${new Date(atMs).toISOString()} has passed on the test server`);
    if (ahead > 0) await env.sleep(ahead);
  }

  it('unanswered, every rung of a 7-day ladder goes out once, at its time, in order', async () => {
    const { result, seen, askedAtMs } = await runInteraction('ladder', LADDER, async () => undefined);
    assert.deepEqual(result, { rungsSent: [0, 1, 2, 3, 4], snoozesSent: 0, closed: false });
    assert.deepEqual(
      seen.sends.map((s) => s.what),
      LADDER.map((_, i) => `rung ${i}`),
    );
    LADDER.forEach((rung, i) => {
      const lateMs = seen.sends[i].atMs - (askedAtMs + rung.afterSeconds * 1000);
      assert.ok(lateMs >= 0 && lateMs < 5000, `rung ${i} ${lateMs} ms after its time`);
    });
    assert.equal(seen.closes, 0);
  });

  // The answer a millisecond either side of the first rung's instant. Past a sent rung, the time-skipping test
  // server (1.x, Java) fails the workflow task that cancels the next rung's timer ("invalid history builder state
  // for action") where the dev server does not: test/escalation.test.ts answers between two rungs, and before a
  // rung, on the real stack.
  for (const [k, racing] of LADDER.slice(0, 1).entries()) {
    for (const offsetMs of [-1, 1]) {
      const when = offsetMs < 0 ? 'just before' : 'just after';
      it(`an answer ${when} rung ${k}'s instant: no rung after it, the rest cancelled, the close once`, async () => {
        const { result, seen } = await runInteraction(
          `race-${k}${offsetMs}`,
          LADDER,
          async ({ askedAtMs, answer }) => {
            await skipTo(askedAtMs + racing.afterSeconds * 1000 + offsetMs);
            await answer();
          },
        );
        const after = seen.sends.filter((s) => s.seq > seen.answeredSeq!);
        assert.deepEqual(after, [], 'nothing sent after the answer');
        const sent = seen.sends.map((s) => Number(s.what.split(' ')[1]));
        // Every rung before k went out, once; rung k only if its time came before the answer; none after it.
        if (offsetMs < 0) assert.equal(sent.length, k, `sent ${JSON.stringify(sent)}`);
        else assert.ok(sent.length === k || sent.length === k + 1, `sent ${JSON.stringify(sent)}`);
        assert.deepEqual(sent, [...Array(sent.length).keys()]);
        assert.equal(result.closed, true);
        assert.equal(seen.closes, 1);
      });
    }
  }

  it('a snooze pushes the person again an hour later; a second snooze answered within its hour sends nothing', async () => {
    const { result, seen, askedAtMs } = await runInteraction(
      'snooze',
      [],
      async ({ askedAtMs, snooze, answer }) => {
        await snooze('s1');
        await snooze('s1'); // the device's retry: one snooze
        await skipTo(askedAtMs + (SNOOZE_SECONDS + 60) * 1000);
        await snooze('s2');
        await skipTo(askedAtMs + (SNOOZE_SECONDS + 60 + 1800) * 1000);
        await answer();
      },
    );
    assert.deepEqual(
      seen.sends.map((s) => s.what),
      ['snooze s1'],
    );
    const lateMs = seen.sends[0].atMs - (askedAtMs + SNOOZE_SECONDS * 1000);
    assert.ok(lateMs >= 0 && lateMs < 5000, `the snooze's push ${lateMs} ms after its hour`);
    // One execution throughout (it waits a while for more after each send): the first snooze sent, the close.
    assert.deepEqual(result, { rungsSent: [], snoozesSent: 1, closed: true });
    assert.equal(seen.closes, 1);
  });
});
