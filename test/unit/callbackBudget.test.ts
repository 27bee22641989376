// A callback attempt never outlives its activity's start-to-close once it has sent: Temporal would run the activity
// again and POST a second time. Whatever its start-to-close and timeout, however long the run's read and the wait for
// a slot took, an attempt that makes its request still ends in time when everything after it takes as long as it may:
// the guard's lookup, the request's whole timeout, and the writes after the answer (the log's row, then a
// redelivery's clear of its give-up or an endpoint's claim settle).
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { MIN_REQUEST_MS, RECORD_DEADLINE_MS, requestTimeoutMs, slotWaitMs } from '../../activities/callback';
import { DEFAULT_LOOKUP_TIMEOUT_MS } from '../../delivery/ssrfGuard';

/** The writes an attempt may make after its answer, each within RECORD_DEADLINE_MS. */
const WRITES_AFTER_ANSWER = 2;

describe('a callback attempt’s time budget', () => {
  it('an attempt that sends ends within its start-to-close, the lookup, request and writes at their longest', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1000, max: 120_000 }), // CALLBACK_TIMEOUT_SECONDS, as the worker has it now
        fc.integer({ min: 1000, max: 180_000 }), // the request timeout the start-to-close was made for
        fc.double({ min: 0, max: 1, noNaN: true }), // how much of the start-to-close the run's read took
        fc.double({ min: 0, max: 1, noNaN: true }), // how much of its longest wait the slot took
        (timeoutMs, madeForMs, readShare, waitShare) => {
          const startToCloseMs = madeForMs + 20_000; // CALLBACK_ATTEMPT_MARGIN_SECONDS
          const read = readShare * startToCloseMs;
          const wait = waitShare * Math.max(0, slotWaitMs(startToCloseMs, read, timeoutMs));
          const request = requestTimeoutMs(startToCloseMs, read + wait, timeoutMs);
          if (request < MIN_REQUEST_MS) return; // held: nothing sent
          const end =
            read + wait + DEFAULT_LOOKUP_TIMEOUT_MS + request + WRITES_AFTER_ANSWER * RECORD_DEADLINE_MS;
          assert.ok(
            end <= startToCloseMs,
            `ends at ${end} ms of ${startToCloseMs} (read ${read}, wait ${wait}, request ${request})`,
          );
        },
      ),
      { seed: 20261206, numRuns: 5000 },
    );
  });

  it('a start-to-close made for the timeout gives the request all of it after the longest wait for a slot', () => {
    for (const timeoutMs of [1000, 10_000, 60_000]) {
      const startToCloseMs = timeoutMs + 20_000;
      const wait = slotWaitMs(startToCloseMs, 0, timeoutMs);
      assert.ok(wait > 0, `no wait for a slot at ${timeoutMs} ms`);
      assert.equal(requestTimeoutMs(startToCloseMs, wait, timeoutMs), timeoutMs);
    }
  });
});
