// The run status machine: every operation from every status, and the reason a refusal gives.
import assert from 'node:assert/strict';
import {
  IllegalTransitionError,
  nextStatus,
  pauseReasonFor,
  type PauseReason,
  type RunOperation,
  type RunStatus,
} from '../../domain/runStatus';

const from: Array<[RunStatus, PauseReason | undefined, string]> = [
  ['running', undefined, 'running'],
  ['paused', 'human_input', 'paused for a human'],
  ['paused', 'usage_park', 'parked'],
  ['paused', 'operator', 'soft-paused'],
  ['finished', undefined, 'finished'],
  ['failed', undefined, 'failed'],
  ['cancelled', undefined, 'cancelled'],
];

// Rows follow `from`; '!' is a refusal.
const table: Record<RunOperation, string[]> = {
  pause: ['paused', '!', '!', '!', '!', '!', '!'],
  park: ['paused', '!', '!', '!', '!', '!', '!'],
  soft_pause: ['paused', '!', '!', '!', '!', '!', '!'],
  complete: ['finished', '!', '!', '!', '!', '!', '!'],
  answer: ['!', 'running', '!', '!', '!', '!', '!'],
  resume: ['!', '!', 'running', 'running', '!', '!', '!'],
  fail: ['failed', 'failed', 'failed', 'failed', '!', '!', '!'],
  cancel: ['cancelled', 'cancelled', 'cancelled', 'cancelled', '!', '!', '!'],
};

describe('run status transitions', () => {
  for (const [op, row] of Object.entries(table) as Array<[RunOperation, string[]]>) {
    it(`${op} from each status`, () => {
      row.forEach((expected, i) => {
        const [status, reason, label] = from[i];
        if (expected === '!')
          assert.throws(() => nextStatus(status, reason, op), IllegalTransitionError, `${op} from ${label}`);
        else assert.equal(nextStatus(status, reason, op), expected, `${op} from ${label}`);
      });
    });
  }

  it('a refusal names the operation, the status and why', () => {
    assert.throws(() => nextStatus('paused', 'human_input', 'resume'), {
      message: 'cannot resume a paused (human_input) run: it waits for an answer to its interaction',
    });
    assert.throws(() => nextStatus('finished', undefined, 'soft_pause'), {
      message: 'cannot soft-pause a finished run: the run has ended',
    });
  });

  it('each pausing operation records its own reason', () => {
    assert.deepEqual((['pause', 'park', 'soft_pause'] as const).map(pauseReasonFor), [
      'human_input',
      'usage_park',
      'operator',
    ]);
  });
});
