// The outcome spine: the persisted status decides the kind; ids are stable across calls and processes and
// distinct per pause episode.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { buildRunOutcome, claimKeys, episodeOfClaimKey, runOutcomeEventId } from '../../domain/outcome';
import { PROJECT_ROOT } from '../../platform/embedded';
import type { Run } from '../../domain/run';
import { endpointDeliveryKey, teamDeliveryOfClaimKey } from '../../domain/teamEvents';
import { aRun, AT } from './fixtures';

const at = AT;
const baseRun = aRun;

describe('buildRunOutcome', () => {
  it('a running run owes no outcome, whatever the body said', () => {
    assert.equal(buildRunOutcome(baseRun(), { code: 'x', message: 'y' }), undefined);
  });

  it('the persisted status wins over the body error', () => {
    const cancelled = buildRunOutcome(baseRun({ status: 'cancelled', endedAt: at }), {
      code: 'boom',
      message: 'm',
    });
    assert.equal(cancelled?.kind, 'run_cancelled');
    assert.equal(cancelled?.error, undefined);
    const finished = buildRunOutcome(baseRun({ status: 'finished', finalAnswer: '42', endedAt: at }), {
      code: 'boom',
      message: 'm',
    });
    assert.equal(finished?.kind, 'run_finished');
    assert.equal(finished?.finalAnswer, '42');
  });

  it("a failed run carries its persisted error, else the body's", () => {
    const persisted = buildRunOutcome(baseRun({ status: 'failed', error: { code: 'db', message: 'down' } }), {
      code: 'other',
      message: 'x',
    });
    assert.deepEqual(persisted?.error, { code: 'db', message: 'down' });
    const fromBody = buildRunOutcome(baseRun({ status: 'failed' }), { code: 'other', message: 'x' });
    assert.deepEqual(fromBody?.error, { code: 'other', message: 'x' });
  });

  it('each pause is its own episode; the terminal outcome is one', () => {
    const pause = (seq: number, over: Partial<NonNullable<Run['pause']>>) =>
      baseRun({ status: 'paused', pauseCount: seq, pause: { reason: 'human_input', seq, at, ...over } });
    const ids = [
      runOutcomeEventId(pause(1, { interactionId: 'int_1' })),
      runOutcomeEventId(pause(2, { interactionId: 'int_2' })),
      runOutcomeEventId(pause(3, { reason: 'usage_park', wall: 'daily_tokens' })),
      runOutcomeEventId(pause(4, { reason: 'usage_park', wall: 'daily_tokens' })),
      runOutcomeEventId(pause(5, { reason: 'operator' })),
      runOutcomeEventId(baseRun({ status: 'finished' })),
    ];
    assert.deepEqual(ids, [
      'run_abc:input:int_1',
      'run_abc:input:int_2',
      'run_abc:park:daily_tokens:3',
      'run_abc:park:daily_tokens:4',
      'run_abc:soft-pause:5',
      'run_abc:end',
    ]);
    for (const status of ['failed', 'cancelled'] as const) {
      assert.equal(runOutcomeEventId(baseRun({ status })), 'run_abc:end');
    }
  });

  it('a soft-pause outcome has an empty interaction id; a usage park carries its wall', () => {
    const soft = buildRunOutcome(baseRun({ status: 'paused', pause: { reason: 'operator', seq: 1, at } }));
    assert.equal(soft?.pause?.interactionId, '');
    const park = buildRunOutcome(
      baseRun({ status: 'paused', pause: { reason: 'usage_park', seq: 2, wall: 'monthly_usd', at } }),
    );
    assert.equal(park?.pause?.wall, 'monthly_usd');
    assert.equal(park?.kind, 'run_paused');
  });

  it('the same run yields the same outcome across calls and across processes', () => {
    const run = baseRun({
      status: 'paused',
      pauseCount: 1,
      pause: { reason: 'human_input', seq: 1, interactionId: 'int_9', at },
    });
    const here = buildRunOutcome(run);
    assert.deepEqual(buildRunOutcome(run), here);
    const script = `
      const { buildRunOutcome } = require('./domain/outcome');
      const run = JSON.parse(process.argv[1], (k, v) => (/At$|^at$/.test(k) ? new Date(v) : v));
      process.stdout.write(JSON.stringify(buildRunOutcome(run)));
    `;
    const child = spawnSync(process.execPath, ['-r', 'ts-node/register', '-e', script, JSON.stringify(run)], {
      cwd: PROJECT_ROOT,
      encoding: 'utf8',
    });
    assert.equal(child.status, 0, child.stderr);
    assert.deepEqual(JSON.parse(child.stdout), JSON.parse(JSON.stringify(here)));
  });
});

describe('episodeOfClaimKey', () => {
  it("reads each family's key of every kind of episode back to its run, and no other key", () => {
    const runs: Run[] = [
      aRun({ _id: 'run_a1', status: 'finished' }),
      aRun({
        _id: 'run_a2',
        status: 'paused',
        pause: { reason: 'human_input', seq: 1, interactionId: 'int_9', at: AT },
      }),
      aRun({
        _id: 'run_a3',
        status: 'paused',
        pause: { reason: 'usage_park', seq: 2, wall: 'tokens', at: AT },
      }),
      aRun({ _id: 'run_a4', status: 'paused', pause: { reason: 'operator', seq: 3, at: AT } }),
    ];
    for (const run of runs) {
      const episodeId = runOutcomeEventId(run)!;
      for (const key of [claimKeys.push(episodeId), claimKeys.callback(episodeId), claimKeys.ops(episodeId)])
        assert.deepEqual(episodeOfClaimKey(key), { runId: run._id, episodeId }, key);
    }
    for (const key of [
      'ops|health:run_a1:stall:1',
      'ops|route:run_a1:x',
      'rung|int_9|1',
      'answered|int_9',
      'interaction|int_9',
      'digest|digest|team|user|1',
      'takeover|run_a1:end|h|1',
      'run_a1',
      endpointDeliveryKey('ev:run_a1:end', 'ep_x'),
    ])
      assert.equal(episodeOfClaimKey(key), undefined, key);
  });
});

describe('teamDeliveryOfClaimKey', () => {
  it("reads a delivery's key back to its event and endpoint, an event id with | in it too, and no other key", () => {
    for (const eventId of [
      'ev:run_a1:end',
      'ev:ops|health:run_a1:stall:1',
      'ev:run_a1:interaction.answered:int_9',
    ])
      assert.deepEqual(teamDeliveryOfClaimKey(endpointDeliveryKey(eventId, 'ep_Ab-9')), {
        eventId,
        endpointId: 'ep_Ab-9',
      });
    for (const key of ['run_a1:end', 'cb|run_a1:end', 'ops|run_a1:end', 'ep|', 'ep|ev', 'rung|int_9|1'])
      assert.equal(teamDeliveryOfClaimKey(key), undefined, key);
  });
});
