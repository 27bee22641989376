// Run health as a pure state machine: which events are progress, when a stall fires, what a pause silences.
import assert from 'node:assert/strict';
import {
  budgetOwedAtPausedEnd,
  countedBeforeStall,
  fireStall,
  initialHealth,
  noteStatusWritten,
  observe,
  progressBeforePause,
  stallDueAt,
  toldOutOfOrder,
  usageBeforeEnd,
  type HealthState,
} from '../../domain/health';

const STALL_MS = 60_000;
const start = (budgetLimit?: number): HealthState =>
  initialHealth({ runId: 'run_h', teamId: 'acme', ...(budgetLimit !== undefined ? { budgetLimit } : {}) }, 0);

describe('run health', () => {
  it('an active run is due to stall stallAfter past its last progress, and each event pushes that out', () => {
    let state = start();
    assert.equal(stallDueAt(state, STALL_MS), STALL_MS);
    state = observe(state, { type: 'node_started', data: { node: 'plan' } }, 5_000).state;
    assert.equal(stallDueAt(state, STALL_MS), 5_000 + STALL_MS);
    assert.equal(state.currentNode, 'plan');
  });

  it('an event named after a property every object has (constructor) is progress, not the end of the run', () => {
    const state = start();
    const next = observe(state, { type: 'constructor' }, 30_000, { ownEventTypesOnly: true }).state;
    assert.equal(next.phase, 'active');
    assert.equal(next.terminalStatus, undefined);
    assert.equal(next.lastLivenessAt, 30_000);
  });

  it('a run that ends paused is owed the budget alerts its spend while paused earned; no other event or phase is', () => {
    const quiet = { quietWhilePaused: true };
    let state = observe(start(10), { type: 'run_paused' }, 1_000, quiet).state;
    const spent = observe(state, { type: 'usage', data: { spent: 12 } }, 2_000, quiet);
    assert.deepEqual(spent.alerts, [], 'silent while paused');
    state = spent.state;
    assert.deepEqual(budgetOwedAtPausedEnd(state, { type: 'usage', data: { spent: 13 } }).alerts, []);
    const owed = budgetOwedAtPausedEnd(state, { type: 'run_cancelled' });
    assert.deepEqual(
      owed.alerts.map((a) => a.kind),
      ['budget_warning', 'budget_exceeded'],
    );
    assert.deepEqual(budgetOwedAtPausedEnd(owed.state, { type: 'run_cancelled' }).alerts, [], 'once');
    const active = observe(start(10), { type: 'usage', data: { spent: 12 } }, 1_000).state;
    assert.deepEqual(
      budgetOwedAtPausedEnd(active, { type: 'run_finished' }).alerts,
      [],
      'alerted as it came',
    );
  });

  it('a pause or resume written before the latest status change applied is told out of order; an end never is', () => {
    let state = start();
    const resume = { type: 'run_resumed', writtenAt: 2_000 };
    assert.equal(toldOutOfOrder(state, { type: 'run_paused', writtenAt: 1_000 }), false, 'nothing noted yet');
    state = noteStatusWritten(state, resume);
    assert.equal(state.statusWrittenAt, 2_000);
    assert.equal(toldOutOfOrder(state, { type: 'run_paused', writtenAt: 1_000 }), true);
    assert.equal(toldOutOfOrder(state, { type: 'run_paused', writtenAt: 2_500 }), false);
    assert.equal(toldOutOfOrder(state, { type: 'run_cancelled', writtenAt: 1_000 }), false, 'an end ends it');
    assert.equal(toldOutOfOrder(state, { type: 'node_started', writtenAt: 1_000 }), false, 'progress');
    assert.equal(toldOutOfOrder(state, { type: 'run_paused' }), false, 'told without a write time');
    assert.equal(
      noteStatusWritten(state, { type: 'run_paused', writtenAt: 1_500 }),
      state,
      'never moves back',
    );
  });

  it('progress written before the pause applied does not make the paused run active; progress after it does', () => {
    const pause = { type: 'run_paused', writtenAt: 2_000 };
    const paused = noteStatusWritten(observe(start(), pause, 2_000).state, pause);
    assert.equal(paused.phase, 'paused');
    assert.equal(progressBeforePause(paused, { type: 'node_started', writtenAt: 1_000 }), true);
    assert.equal(progressBeforePause(paused, { type: 'node_started', writtenAt: 2_500 }), false, 'after it');
    assert.equal(progressBeforePause(paused, { type: 'node_started' }), false, 'told without a write time');
    assert.equal(
      progressBeforePause(paused, { type: 'usage', writtenAt: 1_000 }),
      false,
      'spend still counts',
    );
    const active = observe(start(), { type: 'node_started' }, 1_000).state;
    assert.equal(progressBeforePause(active, { type: 'node_started', writtenAt: 0 }), false, 'not paused');
  });

  it('spend written before the end, told after it, is counted with the budget alerts it earned', () => {
    const end = { type: 'run_finished', writtenAt: 2_000 };
    const spentSome = observe(start(10), { type: 'usage', data: { spent: 3 } }, 1_000).state;
    const ended = noteStatusWritten(observe(spentSome, end, 2_000).state, end);
    assert.equal(ended.phase, 'terminal');
    const late = usageBeforeEnd(ended, { type: 'usage', data: { spent: 12 }, writtenAt: 1_500 });
    assert.deepEqual(
      late?.alerts.map((a) => a.kind),
      ['budget_warning', 'budget_exceeded'],
    );
    assert.equal(late?.state.spent, 12);
    assert.equal(late?.state.phase, 'terminal');
    const older = usageBeforeEnd(ended, { type: 'usage', data: { spent: 1 }, writtenAt: 1_500 });
    assert.equal(older?.state.spent, 3, 'an older report never lowers what was spent');
    assert.deepEqual(older?.alerts, []);
    const spend = { type: 'usage', data: { spent: 12 } };
    assert.equal(usageBeforeEnd(ended, { ...spend, writtenAt: 2_500 }), undefined, 'written after the end');
    assert.equal(usageBeforeEnd(ended, spend), undefined, 'told without a write time');
    assert.equal(usageBeforeEnd(spentSome, { ...spend, writtenAt: 0 }), undefined, 'not ended');
  });

  it("the run's own health twin and a workspace ticker are not progress", () => {
    const state = start();
    for (const type of ['run_health', 'run_workspace_checkpoint']) {
      const next = observe(state, { type }, 30_000);
      assert.equal(next.state, state);
      assert.deepEqual(next.alerts, []);
    }
  });

  it('a stall fires once per episode, and the next event of any kind recovers it under its own key', () => {
    const stalled = fireStall(start(), STALL_MS);
    assert.deepEqual(
      stalled.alerts.map((a) => [a.kind, a.episodeKey, a.severity]),
      [['stall', 'health:run_h:stall:1', 'error']],
    );
    assert.equal(stallDueAt(stalled.state, STALL_MS), undefined, 'a stalled run is not due to stall again');
    const recovered = observe(stalled.state, { type: 'tool_called' }, STALL_MS + 1_000);
    assert.deepEqual(
      recovered.alerts.map((a) => [a.kind, a.episodeKey]),
      [['stall_recovered', 'health:run_h:stall_recovered:1']],
    );
    assert.equal(recovered.state.phase, 'active');
    assert.equal(fireStall(recovered.state, 3 * STALL_MS).alerts[0].episodeKey, 'health:run_h:stall:2');
  });

  it('a stalled run told an event written no later than its last progress has not recovered; a newer one or an end has', () => {
    const progressed = observe(start(), { type: 'run_resumed', at: 5_000, writtenAt: 5_000 }, 5_000).state;
    const { state: stalled } = fireStall(progressed, 5_000 + STALL_MS);
    assert.equal(countedBeforeStall(stalled, { type: 'run_resumed', writtenAt: 5_000 }), true, 'told again');
    assert.equal(countedBeforeStall(stalled, { type: 'node_started', writtenAt: 5_001 }), false);
    assert.equal(
      countedBeforeStall(stalled, { type: 'node_started', at: 4_000 }),
      false,
      'only when it was written',
    );
    assert.equal(
      countedBeforeStall(stalled, { type: 'run_failed', writtenAt: 4_000 }),
      false,
      'an end ends it',
    );
    assert.equal(
      countedBeforeStall(progressed, { type: 'run_resumed', writtenAt: 5_000 }),
      false,
      'only stalled',
    );
  });

  it('a pause is an intentional wait: no stall is due, and only node_started or run_resumed ends it', () => {
    const paused = observe(start(), { type: 'human_input_requested' }, 1_000).state;
    assert.equal(paused.phase, 'paused');
    assert.equal(stallDueAt(paused, STALL_MS), undefined);
    assert.equal(observe(paused, { type: 'tool_called' }, 2_000).state.phase, 'paused');
    assert.equal(observe(paused, { type: 'run_resumed' }, 2_000).state.phase, 'active');
    assert.equal(observe(paused, { type: 'node_started', data: { node: 'x' } }, 2_000).state.phase, 'active');
  });

  it('a terminal event ends health for good; later events change nothing', () => {
    const ended = observe(start(), { type: 'run_failed' }, 1_000).state;
    assert.equal(ended.phase, 'terminal');
    assert.equal(ended.terminalStatus, 'failed');
    assert.equal(stallDueAt(ended, STALL_MS), undefined);
    assert.equal(observe(ended, { type: 'node_started' }, 2_000).state, ended);
  });

  it('budget: a warning at 80 % and an exceeded alert at 100 %, each once', () => {
    let state = start(100);
    const kinds: string[] = [];
    for (const spent of [50, 80, 90, 100, 150]) {
      const step = observe(state, { type: 'usage', data: { spent } }, spent);
      state = step.state;
      kinds.push(...step.alerts.map((a) => a.kind));
    }
    assert.deepEqual(kinds, ['budget_warning', 'budget_exceeded']);
  });

  it('no budget, or a zero budget, alerts nothing however much is spent', () => {
    for (const state of [start(), start(0)])
      assert.deepEqual(observe(state, { type: 'usage', data: { spent: 1e9 } }, 1).alerts, []);
  });
});
