// Which family owes what for an outcome: the push kind, the callback, the operator's classification, and the
// claim keys the sweep checks.
import assert from 'node:assert/strict';
import { shouldNotify } from '../../domain/callback';
import { classify } from '../../domain/ops';
import { buildRunOutcome, claimKeys, type RunOutcome } from '../../domain/outcome';
import { kindFor } from '../../domain/push';
import { callbackWanted, type Run } from '../../domain/run';
import { owedEpisode } from '../../domain/sweep';
import { aRun, AT } from './fixtures';

const at = AT;
const run = aRun;
const outcomeOf = (over: Partial<Run>): RunOutcome => {
  const outcome = buildRunOutcome(run(over));
  assert.ok(outcome);
  return outcome;
};
const pause = (reason: 'human_input' | 'usage_park' | 'operator', extra: Record<string, unknown> = {}) => ({
  status: 'paused' as const,
  pause: { reason, seq: 1, interactionId: reason === 'human_input' ? 'ix_1' : '', at, ...extra },
});

describe('what each family owes', () => {
  it('push: a kind per outcome; an operator soft-pause and a park without a wall get none', () => {
    assert.equal(kindFor(outcomeOf(pause('human_input'))), 'human_input_requested');
    assert.equal(kindFor(outcomeOf(pause('usage_park', { wall: 'daily' }))), 'usage_parked');
    assert.equal(kindFor(outcomeOf(pause('usage_park'))), undefined);
    assert.equal(kindFor(outcomeOf(pause('operator'))), undefined);
    for (const status of ['finished', 'failed', 'cancelled'] as const)
      assert.equal(kindFor(outcomeOf({ status, endedAt: at })), `run_${status}`);
  });

  it('callback: only an ended run whose launcher asked for one', () => {
    const callback = { url: 'https://hooks.example.com/flow', secret: 's' };
    assert.equal(shouldNotify(outcomeOf({ status: 'finished', endedAt: at, callback })), true);
    assert.equal(shouldNotify(outcomeOf({ status: 'finished', endedAt: at })), false);
    assert.equal(shouldNotify(outcomeOf({ ...pause('human_input'), callback })), false);
  });

  it('callback events: an end the launcher filtered out is not wanted; a pause follows the launcher', () => {
    const callback = { url: 'https://hooks.example.com/flow', secret: 's', events: ['run.failed' as const] };
    assert.equal(callbackWanted({ status: 'failed', callback }), true);
    assert.equal(callbackWanted({ status: 'finished', callback }), false);
    assert.equal(callbackWanted({ status: 'paused', callback }), true);
    assert.equal(callbackWanted({ status: 'cancelled', callback: { ...callback, events: undefined } }), true);
    assert.equal(callbackWanted({ status: 'failed' }), false);
    assert.equal(shouldNotify(outcomeOf({ status: 'finished', endedAt: at, callback })), false);
  });

  it('operator: a failed run is classified by its code; platform codes are critical', () => {
    assert.deepEqual(classify(run({ status: 'failed', error: { code: 'tool_error', message: 'x' } })), {
      code: 'tool_error',
      severity: 'error',
    });
    assert.equal(
      classify(run({ status: 'failed', error: { code: 'Database', message: 'x' } }))?.severity,
      'critical',
    );
    assert.equal(classify(run({ status: 'failed' }))?.code, 'unknown');
    assert.equal(classify(run({ status: 'finished' })), undefined);
  });

  it('sweep: the claim keys of every family an episode owes', () => {
    const failed = run({
      status: 'failed',
      endedAt: at,
      callback: { url: 'https://h.example.com', secret: 's' },
    });
    const owed = owedEpisode(failed, { ops: true });
    assert.ok(owed);
    assert.deepEqual(owed.keys, [
      claimKeys.push(owed.episodeId),
      claimKeys.callback(owed.episodeId),
      claimKeys.ops(owed.episodeId),
    ]);
    assert.deepEqual(owedEpisode(failed, { ops: false })?.keys.length, 2);
    assert.equal(owedEpisode(run(), { ops: true }), undefined);
    assert.equal(owedEpisode(run(pause('operator')), { ops: true }), undefined);
  });
});
