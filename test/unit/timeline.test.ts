// The run page's timeline, the pure part: pauses and answers, each device notified with its receipts, merged in time.
import assert from 'node:assert/strict';
import {
  deviceEntries,
  mergeTimeline,
  pauseEntries,
  rungEntries,
  type TimelineEntry,
} from '../../domain/timeline';

const at = (s: number) => new Date(Date.UTC(2026, 11, 1, 12, 0, s));
const iso = (s: number) => at(s).toISOString();

describe('run timeline', () => {
  const interactions = [
    {
      _id: 'i1',
      prompt: 'Ship?',
      createdAt: at(0),
      status: 'answered',
      answer: 'yes',
      answeredAt: at(9),
      answeredBy: 'bob',
    },
    { _id: 'i2', prompt: 'Again?', createdAt: at(20), status: 'pending' },
  ];
  const delivery = (userId: string, subscriptionId: string, s: number) => ({
    episodeId: 'run_1:input:i1',
    interactionId: 'i1',
    userId,
    subscriptionId,
    at: at(s),
  });

  it('a pause, and its answer with who gave it; an open pause has no answer', () => {
    assert.deepEqual(
      pauseEntries(interactions).map((e) => [e.kind, e.at, e.userId, e.detail]),
      [
        ['paused', iso(0), undefined, 'Ship?'],
        ['answered', iso(9), 'bob', 'yes'],
        ['paused', iso(20), undefined, 'Again?'],
      ],
    );
  });

  it('each device notified, with the earliest of each receipt across retried fan-outs; a silent device says none came', () => {
    const entries = deviceEntries(
      [delivery('alice', 'sub-a', 1), delivery('bob', 'sub-b', 1)],
      [
        { episodeId: 'run_1:input:i1', subscriptionId: 'sub-b', shownAt: at(3) },
        {
          episodeId: 'run_1:input:i1',
          subscriptionId: 'sub-b',
          shownAt: at(2),
          actedAt: at(8),
          action: 'approve',
        },
        { episodeId: 'run_1:input:other', subscriptionId: 'sub-a', shownAt: at(2) },
      ],
    );
    const simple = (e: TimelineEntry) => [e.kind, e.at, e.userId, e.receipt ?? e.detail];
    assert.deepEqual(entries.map(simple), [
      ['notified', iso(1), 'alice', 'none'],
      ['notified', iso(1), 'bob', 'reported'],
      ['shown', iso(2), 'bob', undefined],
      ['action', iso(8), 'bob', 'approve'],
    ]);
  });

  it('sources merge in time order; a new source (escalation rungs) is one more list', () => {
    const rung: TimelineEntry = { at: iso(5), kind: 'rung', rung: 1, via: 'push', interactionId: 'i1' };
    const merged = mergeTimeline(
      pauseEntries(interactions),
      deviceEntries([delivery('bob', 'sub-b', 1)], []),
      [rung],
    );
    assert.deepEqual(
      merged.map((e) => e.kind),
      ['paused', 'notified', 'rung', 'answered', 'paused'],
    );
  });

  it('each settled rung: when, its 1-based place, via and to whom as its ladder says; one not delivered says how it ended', () => {
    const ladder = [
      { to: ['carol', 'dave'], via: 'push' },
      { to: 'team' as const, via: 'webhook' },
    ];
    const entries = rungEntries(
      [
        { interactionId: 'i1', index: 0, settledAt: at(5), result: 'delivered' },
        { interactionId: 'i1', index: 1, settledAt: at(7), result: 'not_addressable' },
        { interactionId: 'i2', index: 3, settledAt: at(30) },
        { interactionId: 'i3', index: 0, settledAt: at(40), result: 'gave_up' },
        { interactionId: 'i4', index: 0, settledAt: at(50), result: 'closed' },
      ],
      ladder,
    );
    assert.deepEqual(entries, [
      { at: iso(5), kind: 'rung', interactionId: 'i1', rung: 1, via: 'push', detail: 'to carol, dave' },
      {
        at: iso(7),
        kind: 'rung',
        interactionId: 'i1',
        rung: 2,
        via: 'webhook',
        detail: 'to team: reached nobody',
      },
      // The ladder changed since: the rung is still shown, without what it no longer knows.
      { at: iso(30), kind: 'rung', interactionId: 'i2', rung: 4 },
      {
        at: iso(40),
        kind: 'rung',
        interactionId: 'i3',
        rung: 1,
        via: 'push',
        detail: 'to carol, dave: gave up: its sends failed',
      },
      {
        at: iso(50),
        kind: 'rung',
        interactionId: 'i4',
        rung: 1,
        via: 'push',
        detail: 'to carol, dave: not sent: answered first',
      },
    ]);
  });
});
