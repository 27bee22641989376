// judgeRefusals: when a known push service's 401/403s say our VAPID key is refused as a whole, and how little
// evidence it keeps to say so.
import assert from 'node:assert/strict';
import { judgeRefusals, type KeyRefusal } from '../../domain/pushServices';

const NOW = new Date('2026-12-01T12:00:00Z');
const RULE = { minSubscriptions: 3, windowSeconds: 3600 };
const refusal = (subscriptionId: string, userId: string, minutesAgo = 0): KeyRefusal => ({
  subscriptionId,
  userId,
  at: new Date(NOW.getTime() - minutesAgo * 60_000),
});

describe('judgeRefusals', () => {
  it('one user’s devices, however many, are never a fault', () => {
    const many = Array.from({ length: 20 }, (_, i) => refusal(`s${i}`, 'alice'));
    const judged = judgeRefusals([], many, NOW, RULE);
    assert.deepEqual([judged.fault, judged.subscriptions, judged.users], [false, 20, 1]);
    assert.equal(judged.evidence.length, 3, 'kept: the threshold per user');
  });

  it('the threshold of distinct subscriptions of two users within the window is, across fan-outs', () => {
    const first = judgeRefusals([], [refusal('a1', 'alice', 10), refusal('a2', 'alice', 10)], NOW, RULE);
    assert.equal(first.fault, false);
    const second = judgeRefusals(first.evidence, [refusal('b1', 'bob')], NOW, RULE);
    assert.deepEqual([second.fault, second.subscriptions, second.users], [true, 3, 2]);
  });

  it('a subscription refused again counts once; refusals past the window count not at all', () => {
    const earlier = [refusal('a1', 'alice', 61), refusal('a2', 'alice', 61), refusal('b1', 'bob', 5)];
    const judged = judgeRefusals(earlier, [refusal('b1', 'bob'), refusal('a1', 'alice')], NOW, RULE);
    assert.deepEqual([judged.fault, judged.subscriptions, judged.users], [false, 2, 2]);
    assert.deepEqual(judged.evidence.map((r) => r.subscriptionId).sort(), ['a1', 'b1']);
  });

  it('keeps at most the threshold per user for at most the threshold of users, newest first', () => {
    const fresh = Array.from({ length: 10 }, (_, u) =>
      Array.from({ length: 5 }, (_, d) => refusal(`u${u}d${d}`, `u${u}`, u + d / 10)),
    ).flat();
    const judged = judgeRefusals([], fresh, NOW, RULE);
    assert.equal(judged.fault, true);
    assert.equal(judged.evidence.length, 9);
    assert.deepEqual([...new Set(judged.evidence.map((r) => r.userId))], ['u0', 'u1', 'u2']);
  });
});
