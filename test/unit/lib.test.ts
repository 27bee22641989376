// lib/: the timeout race and bounded concurrency every caller shares (no servers).
import assert from 'node:assert/strict';
import { mapBounded } from '../../platform/concurrency';
import { withDeadline } from '../../platform/deadline';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class Expired extends Error {}

describe('platform/deadline: withDeadline', () => {
  it('answers what the promise answers in time, and the timer never fires after', async () => {
    let timeouts = 0;
    const value = await withDeadline(Promise.resolve(42), 20, () => timeouts++);
    assert.equal(value, 42);
    await sleep(40);
    assert.equal(timeouts, 0, 'the timer was cleared');
  });

  it("passes the promise's own rejection through, and clears the timer", async () => {
    let timeouts = 0;
    const failure = new Error('store down');
    await assert.rejects(
      withDeadline(Promise.reject(failure), 20, () => timeouts++),
      (err) => err === failure,
    );
    await sleep(40);
    assert.equal(timeouts, 0);
  });

  it("rejects with the caller's own error once the time is up", async () => {
    const started = Date.now();
    await assert.rejects(
      withDeadline(new Promise(() => undefined), 20, () => {
        throw new Expired('no answer within 20 ms');
      }),
      (err) => err instanceof Expired && err.message === 'no answer within 20 ms',
    );
    assert.ok(Date.now() - started >= 15);
  });

  it("answers onTimeout's value once the time is up (a deadline that only stops waiting)", async () => {
    const late = sleep(200).then(() => 'late');
    assert.equal(await withDeadline(late, 10, () => 'gave up'), 'gave up');
  });

  it('with a signal: ends on its abort, and stops listening once the promise settled', async () => {
    const aborter = new AbortController();
    let timeouts = 0;
    assert.equal(await withDeadline(Promise.resolve(true), aborter.signal, () => (timeouts++, false)), true);
    aborter.abort();
    assert.equal(timeouts, 0, 'the abort listener was removed');

    const timer = AbortSignal.timeout(10);
    assert.equal(await withDeadline(new Promise<boolean>(() => undefined), timer, () => false), false);

    const aborted = AbortSignal.abort();
    assert.equal(
      await withDeadline(
        sleep(200).then(() => true),
        aborted,
        () => false,
      ),
      false,
    );
  });
});

describe('platform/concurrency: mapBounded', () => {
  it('never has more than the limit in flight, and answers in the order of the items', async () => {
    let inFlight = 0;
    let most = 0;
    const items = Array.from({ length: 20 }, (_, i) => i);
    const results = await mapBounded(items, 3, async (i) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await sleep((i * 7) % 5); // finish out of order
      inFlight--;
      return i * 10;
    });
    assert.equal(most, 3);
    assert.deepEqual(
      results,
      items.map((i) => i * 10),
    );
  });

  it('takes no more lanes than items, and answers [] for none', async () => {
    let inFlight = 0;
    let most = 0;
    await mapBounded([1, 2], 8, async () => {
      most = Math.max(most, ++inFlight);
      await sleep(5);
      inFlight--;
    });
    assert.equal(most, 2);
    assert.deepEqual(await mapBounded([], 4, async () => 1), []);
  });

  it('the first failure stops the lanes: none takes another item, and it rejects once the ones in flight are done', async () => {
    const started: number[] = [];
    const finished: number[] = [];
    const failure = new Error('send threw');
    const run = mapBounded([0, 1, 2, 3, 4, 5], 2, async (i) => {
      started.push(i);
      if (i === 1) throw failure;
      await sleep(5);
      finished.push(i);
    });
    await assert.rejects(run, (err) => err === failure);
    // A caller that retries after the rejection (a fan-out's next attempt) finds nothing still going.
    assert.deepEqual(started, [0, 1]);
    assert.deepEqual(finished, [0]);
    await sleep(20);
    assert.deepEqual(started, [0, 1], 'no lane took an item after the failure');
  });

  it("starts nothing once the signal aborts, lets the ones in flight finish, then throws the signal's reason", async () => {
    const aborter = new AbortController();
    const finished: number[] = [];
    const run = mapBounded(
      [0, 1, 2, 3, 4, 5],
      2,
      async (i) => {
        if (i === 1) aborter.abort(new Expired('cancelled'));
        await sleep(5);
        finished.push(i);
      },
      aborter.signal,
    );
    await assert.rejects(run, (err) => err instanceof Expired);
    assert.deepEqual(finished.sort(), [0, 1]);
  });

  it('a signal that aborts once every item has started changes nothing: the answers stand', async () => {
    const aborter = new AbortController();
    const results = await mapBounded(
      [0, 1],
      2,
      async (i) => {
        if (i === 1) aborter.abort(new Expired('too late to matter'));
        await sleep(5);
        return i * 10;
      },
      aborter.signal,
    );
    assert.deepEqual(results, [0, 10]);
  });
});
