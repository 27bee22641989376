// What the sweep counts as Temporal refusing one start or signal (it stays owed, the pass goes on) and what as
// Temporal away or throttling (the pass fails and is retried): a throttled start must not pass for a refusal, or a
// give-up whose alert it was would be settled without the alert.
import assert from 'node:assert/strict';
import { unlessRefused } from '../../activities/sweep';

const grpcError = (code: number) =>
  Object.assign(new Error(`code ${code}`), { code, details: `code ${code}`, metadata: {} });

describe('the sweep: refused or away', () => {
  const verdict = (err: unknown): string => {
    try {
      return unlessRefused(() => 'refused')(err);
    } catch {
      return 'thrown';
    }
  };

  it('an answer refusing the call (an id past the limit, a bad argument) is a refusal', () => {
    assert.equal(verdict(grpcError(3)), 'refused');
    assert.equal(verdict(grpcError(9)), 'refused');
  });

  it('Temporal away or throttling (deadline, unavailable, resource exhausted) fails the pass', () => {
    for (const code of [4, 8, 14]) assert.equal(verdict(grpcError(code)), 'thrown', `code ${code}`);
    assert.equal(verdict(new Error('socket hang up')), 'thrown');
  });
});
