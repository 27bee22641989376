// The give-up counter (flow_notify_callbacks_given_up_total) counts a schedule's give-ups only: an attempt that found
// its claim another's stops the schedule without giving up (the episode answers claimed_elsewhere).
import assert from 'node:assert/strict';
import { logAttempt } from '../../activities/callback';

describe('callback give-up metric', () => {
  const counted = async (outcome: Parameters<typeof logAttempt>[3]['outcome']): Promise<number> => {
    let gaveUp = 0;
    const metrics = { callbackGaveUp: () => void gaveUp++ } as never;
    await logAttempt(
      { metrics },
      undefined,
      { episodeId: 'run_1:end', runId: 'run_1' },
      { sent: false, outcome },
      {
        attempt: 2,
        trigger: 'episode',
      },
    );
    return gaveUp;
  };

  it('counts the last attempt that failed and a final refusal, never a claim found another’s', async () => {
    assert.equal(await counted({ result: 'retry', detail: 'http 503' }), 1);
    assert.equal(await counted({ result: 'stop', detail: 'http 410' }), 1);
    assert.equal(await counted({ result: 'stop', detail: 'claimed elsewhere', claimedElsewhere: true }), 0);
  });
});
