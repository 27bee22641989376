// The run-health event batcher (client/health.ts) on an injected clock: a run's events held for the window go as
// one batch stamped with the time each was observed, a status change goes at once with what was held, a run's
// batches go in order, the bounds hold, flushAll leaves nothing held, and a batch that failed goes again.
import assert from 'node:assert/strict';
import {
  createEventBatcher,
  MAX_EVENTS_PER_BATCH,
  MAX_RUNS_HELD,
  MAX_SEND_TRIES,
  type BatchClock,
  type ObservedRun,
} from '../../client/health';
import type { ObservedEvent } from '../../domain/health';

/** A clock that moves only when told, firing the timers that fall due. */
function manualClock() {
  let now = 1_000_000;
  let timers: { at: number; fire: () => void }[] = [];
  const clock: BatchClock = {
    now: () => now,
    setTimer(fire, ms) {
      const timer = { at: now + ms, fire };
      timers.push(timer);
      return () => void (timers = timers.filter((t) => t !== timer));
    },
  };
  const advance = (ms: number): void => {
    now += ms;
    const due = timers.filter((t) => t.at <= now);
    timers = timers.filter((t) => t.at > now);
    for (const t of due) t.fire();
  };
  return { clock, advance, pending: () => timers.length };
}

const flushed = () => new Promise((r) => setImmediate(r));

function batcherOn(windowMs: number, send?: (run: ObservedRun, events: ObservedEvent[]) => Promise<void>) {
  const sent: { runId: string; events: ObservedEvent[] }[] = [];
  const errors: unknown[] = [];
  const time = manualClock();
  const batcher = createEventBatcher({
    windowMs,
    clock: time.clock,
    onError: (_runId, err) => void errors.push(err),
    send:
      send ??
      (async (run, events) => {
        sent.push({ runId: run._id, events });
      }),
  });
  return { batcher, sent, errors, ...time };
}

const run = (id: string): ObservedRun => ({ _id: id, teamId: 'acme' });

describe('the run-health event batcher', () => {
  it("holds a run's events for the window, then sends them as one batch stamped when each was observed", async () => {
    const { batcher, sent, advance } = batcherOn(1000);
    await batcher.observe(run('r1'), [{ type: 'node_started', data: { node: 'a' } }]);
    advance(400);
    await batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 3 } }]);
    await batcher.observe(run('r2'), [{ type: 'step' }]);
    assert.equal(sent.length, 0, 'nothing before the window passed');
    advance(599);
    await flushed();
    assert.equal(sent.length, 0);
    advance(1);
    await flushed();
    assert.deepEqual(sent, [
      {
        runId: 'r1',
        events: [
          { type: 'node_started', data: { node: 'a' }, at: 1_000_000 },
          { type: 'usage', data: { spent: 3 }, at: 1_000_400 },
        ],
      },
    ]);
    advance(400);
    await flushed();
    assert.deepEqual(
      sent.map((s) => s.runId),
      ['r1', 'r2'],
      "the second run's window counts from its own first event",
    );
  });

  it('a pause or an end goes at once with what was held, and its caller waits for it', async () => {
    const { batcher, sent, pending } = batcherOn(1000);
    await batcher.observe(run('r1'), [{ type: 'step' }]);
    await batcher.observe(run('r1'), [{ type: 'run_paused' }]);
    assert.deepEqual(
      sent.map((s) => s.events.map((e) => e.type)),
      [['step', 'run_paused']],
    );
    assert.equal(pending(), 0, 'its timer cancelled');
    await batcher.observe(run('r1'), [{ type: 'run_finished' }]);
    assert.equal(sent.length, 2);
  });

  it("a run's batches go one after another: a status change waits for the batch in flight", async () => {
    const order: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const { batcher, advance } = batcherOn(1000, async (_run, events) => {
      if (events[0].type === 'step') await gate;
      order.push(events.map((e) => e.type).join(','));
    });
    await batcher.observe(run('r1'), [{ type: 'step' }]);
    advance(1000);
    const ended = batcher.observe(run('r1'), [{ type: 'run_finished' }]);
    await flushed();
    assert.deepEqual(order, [], 'the end waits behind the step batch');
    release();
    await ended;
    assert.deepEqual(order, ['step', 'run_finished']);
  });

  it('a full batch goes at once; past the runs it holds, a run goes unbatched', async () => {
    const { batcher, sent } = batcherOn(1000);
    for (let i = 0; i < MAX_EVENTS_PER_BATCH; i++) await batcher.observe(run('big'), [{ type: 'step' }]);
    assert.equal(sent.length, 1);
    assert.equal(sent[0].events.length, MAX_EVENTS_PER_BATCH);
    for (let i = 0; i < MAX_RUNS_HELD; i++) await batcher.observe(run(`r${i}`), [{ type: 'step' }]);
    assert.equal(sent.length, 1, 'every run held');
    await batcher.observe(run('one-too-many'), [{ type: 'step' }]);
    assert.deepEqual(
      sent.map((s) => s.runId),
      ['big', 'one-too-many'],
    );
  });

  it('window 0 sends each call at once; flushAll sends what is held and waits; a failed timed batch is reported', async () => {
    const off = batcherOn(0);
    await off.batcher.observe(run('r1'), [{ type: 'a' }, { type: 'b' }]);
    assert.equal(off.sent.length, 1);

    const held = batcherOn(1000);
    await held.batcher.observe(run('r1'), [{ type: 'step' }]);
    await held.batcher.observe(run('r2'), [{ type: 'step' }]);
    await held.batcher.flushAll();
    assert.equal(held.sent.length, 2);
    assert.equal(held.pending(), 0);

    const failing = batcherOn(1000, async () => {
      throw new Error('temporal unreachable');
    });
    await failing.batcher.observe(run('r1'), [{ type: 'step' }]);
    failing.advance(1000);
    await flushed();
    assert.equal(String(failing.errors[0]), 'Error: temporal unreachable');
  });

  it('flushAll at exit tries a batch that fails again, a second apart, for as long as it is given: held, it would be lost with the process', async () => {
    let down = 2;
    const sent: string[] = [];
    const { batcher, advance, pending } = batcherOn(1000, async (run) => {
      if (down > 0) {
        down--;
        throw new Error('temporal unreachable');
      }
      sent.push(run._id);
    });
    await batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 9 } }]);
    let done = false;
    const flushing = batcher.flushAll(10_000).then(() => (done = true));
    for (let waited = 0; !done && waited < 10; waited++) {
      await flushed();
      advance(1000);
    }
    await flushing;
    assert.deepEqual(sent, ['r1'], 'sent on its third try, before flushAll returned');
    assert.equal(pending(), 0, 'nothing left held');

    const never = batcherOn(1000, async () => {
      throw new Error('temporal unreachable');
    });
    await never.batcher.observe(run('r2'), [{ type: 'step' }]);
    let gaveUp = false;
    const bounded = never.batcher.flushAll(3_000).then(() => (gaveUp = true));
    for (let waited = 0; !gaveUp && waited < 10; waited++) {
      await flushed();
      never.advance(1000);
    }
    await bounded;
    assert.ok(gaveUp, 'flushAll returns once its time is spent');
    assert.ok(never.errors.length >= 3, `tried until then (${never.errors.length} tries)`);
  });

  it('flushAll returns once its time is spent even while a send hangs (Temporal partitioned, not refusing)', async () => {
    const hanging = batcherOn(1000, () => new Promise<void>(() => undefined));
    await hanging.batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 9 } }]);
    let returned = false;
    const bounded = hanging.batcher.flushAll(3_000).then(() => (returned = true));
    for (let waited = 0; !returned && waited < 10; waited++) {
      await flushed();
      hanging.advance(1000);
    }
    await flushed();
    assert.ok(returned, 'flushAll still waits on the hanging send');
    await bounded;
  });

  it('a batch that failed goes again after a wait, before what came since and in the order observed', async () => {
    let down = 2;
    const sent: string[][] = [];
    const { batcher, advance, errors } = batcherOn(1000, async (_run, events) => {
      if (down > 0) {
        down--;
        throw new Error('temporal unreachable');
      }
      sent.push(events.map((e) => `${e.type}@${e.at! - 1_000_000}`));
    });
    await batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 12 } }]);
    advance(1000);
    await flushed();
    assert.equal(errors.length, 1);
    // An end whose send fails too: its caller is told, and it waits with the usage held before it.
    advance(10);
    await assert.rejects(batcher.observe(run('r1'), [{ type: 'run_finished' }]), /temporal unreachable/);
    advance(1000);
    await flushed();
    assert.deepEqual(sent, [], 'the second try waits twice as long');
    advance(1000);
    await flushed();
    assert.deepEqual(sent, [['usage@0', 'run_finished@1010']]);
  });

  it('a batch queued behind one that fails waits with it for its next try: never sent before it', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let failFirst = true;
    const sent: string[][] = [];
    const { batcher, advance } = batcherOn(1000, async (_run, events) => {
      if (events[0].type === 'usage' && failFirst) {
        await gate;
        failFirst = false;
        throw new Error('temporal unreachable');
      }
      sent.push(events.map((e) => e.type));
    });
    await batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 12 } }]);
    advance(1000); // the usage batch goes, and hangs
    await flushed();
    const ended = batcher.observe(run('r1'), [{ type: 'run_finished' }]);
    release(); // the usage batch fails; the end was queued behind it
    await assert.rejects(ended, /failed/);
    assert.deepEqual(sent, [], 'the end did not overtake the usage it followed');
    advance(1000);
    await flushed();
    assert.deepEqual(sent, [['usage', 'run_finished']]);
  });

  it('events that join a failing batch get tries of their own: a crossing observed late in an outage goes once Temporal is back', async () => {
    let down = true;
    const delivered: ObservedEvent[] = [];
    const { batcher, advance } = batcherOn(0, async (_run, events) => {
      if (down) throw new Error('temporal unreachable');
      delivered.push(...events);
    });
    await batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 1 } }]).catch(() => undefined);
    // Tried and failed until one try is left for these first events; then the crossing joins them.
    for (let i = 0; i < MAX_SEND_TRIES - 2; i++) {
      advance(60_000);
      await flushed();
    }
    await batcher.observe(run('r1'), [{ type: 'usage', data: { spent: 12 } }]);
    advance(60_000);
    await flushed();
    down = false;
    advance(60_000);
    await flushed();
    assert.deepEqual(
      delivered.map((e) => e.data?.spent),
      [1, 12],
      'the first events past their last try go with the crossing',
    );
  });

  it("a batch that keeps failing is dropped after its newest events' last try, and never holds more than a batch", async () => {
    const sizes: number[] = [];
    const { batcher, advance, errors, pending } = batcherOn(0, async (_run, events) => {
      sizes.push(events.length);
      throw new Error('temporal unreachable');
    });
    for (let i = 0; i < MAX_EVENTS_PER_BATCH + 10; i++)
      await batcher.observe(run('r1'), [{ type: 'step' }]).catch(() => undefined);
    await batcher.observe(run('r1'), [{ type: 'run_paused' }]).catch(() => undefined);
    for (let i = 0; i < MAX_SEND_TRIES + 2; i++) {
      advance(60_000);
      await flushed();
    }
    assert.equal(pending(), 0, 'given up');
    // The steps' first try, then the pause (joined after it) with the steps: its own tries.
    assert.equal(sizes.length, 1 + MAX_SEND_TRIES, 'each try one send');
    assert.ok(Math.max(...sizes) <= MAX_EVENTS_PER_BATCH + 1, String(Math.max(...sizes)));
    assert.equal(errors.length, MAX_SEND_TRIES - 1, 'the first try and the pause told their callers');
  });
});
