// A callback attempt never outlives its activity's start-to-close once it has sent: Temporal would run the activity
// again and POST a second time. Whatever its start-to-close and timeout, however long the reads before it and the
// wait for a slot took, an attempt that makes its request still ends in time when everything after it takes as long
// as it may: the guard's lookup, the request's whole timeout, and the writes after the answer (the log's row, then a
// redelivery's clear of its give-up, or an endpoint's streak and a recover's claim settle). And the arithmetic alone
// never holds an attempt whose start-to-close leaves room for a request.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  AFTER_REQUEST_MS,
  MIN_REQUEST_MS,
  RECORD_DEADLINE_MS,
  requestTimeoutMs,
  slotWaitMs,
} from '../../activities/callback';
import { CALLBACK_ATTEMPT_MARGIN_SECONDS } from '../../contract/workflows';
import { DEFAULT_LOOKUP_TIMEOUT_MS } from '../../delivery/ssrfGuard';

/** The most writes an attempt makes after its answer (an endpoint recover's), each within RECORD_DEADLINE_MS. */
const WRITES_AFTER_ANSWER = 3;

/** Reads before the request on a store that answers at once. */
const READS_MS = 10;

/** An episode's start-to-close for a timeout (episodeOptions), or any other (a recover's minute, one made before). */
const startToClose = fc.oneof(
  fc
    .integer({ min: 1000, max: 180_000 })
    .map((madeForMs) => madeForMs + CALLBACK_ATTEMPT_MARGIN_SECONDS * 1000),
  fc.integer({ min: 1000, max: 240_000 }),
);

describe('a callback attempt’s time budget', () => {
  it('an attempt that sends ends within its start-to-close, the lookup, request and writes at their longest', () => {
    fc.assert(
      fc.property(
        startToClose,
        fc.integer({ min: 1000, max: 120_000 }), // CALLBACK_TIMEOUT_SECONDS, as the worker has it now
        fc.double({ min: 0, max: 1, noNaN: true }), // how much of the start-to-close the reads took
        fc.double({ min: 0, max: 1, noNaN: true }), // how much of its longest wait the slot took
        (startToCloseMs, timeoutMs, readShare, waitShare) => {
          const read = readShare * startToCloseMs;
          const wait = waitShare * Math.max(0, slotWaitMs(startToCloseMs, read, timeoutMs));
          const request = requestTimeoutMs(startToCloseMs, read + wait, timeoutMs);
          assert.ok(request <= timeoutMs, `a request of ${request} ms past its timeout ${timeoutMs}`);
          if (request < MIN_REQUEST_MS) return; // held: nothing sent
          const end =
            read + wait + DEFAULT_LOOKUP_TIMEOUT_MS + request + WRITES_AFTER_ANSWER * RECORD_DEADLINE_MS;
          assert.ok(
            end <= startToCloseMs,
            `ends at ${end} ms of ${startToCloseMs} (read ${read}, wait ${wait}, request ${request})`,
          );
        },
      ),
      { seed: 20261206, numRuns: 10_000 },
    );
  });

  it('an attempt whose start-to-close leaves room for a request is never held by the arithmetic, whatever the timeout', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: AFTER_REQUEST_MS + MIN_REQUEST_MS + READS_MS, max: 240_000 }),
        fc.integer({ min: 1000, max: 120_000 }),
        (startToCloseMs, timeoutMs) => {
          // Quick reads, a slot granted at once or as the longest wait ends.
          for (const wait of [0, Math.max(0, slotWaitMs(startToCloseMs, READS_MS, timeoutMs))])
            assert.ok(
              requestTimeoutMs(startToCloseMs, READS_MS + wait, timeoutMs) >= MIN_REQUEST_MS,
              `held after a wait of ${wait} ms`,
            );
        },
      ),
      { seed: 20261206, numRuns: 10_000 },
    );
  });

  it('a start-to-close made for the timeout gives the request all of it after the longest wait for a slot', () => {
    for (const timeoutMs of [1000, 10_000, 60_000]) {
      const startToCloseMs = timeoutMs + CALLBACK_ATTEMPT_MARGIN_SECONDS * 1000;
      const wait = slotWaitMs(startToCloseMs, 0, timeoutMs);
      assert.ok(wait > 0, `no wait for a slot at ${timeoutMs} ms`);
      assert.equal(requestTimeoutMs(startToCloseMs, wait, timeoutMs), timeoutMs);
    }
  });
});
