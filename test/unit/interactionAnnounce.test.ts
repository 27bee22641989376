// An answer's close owes the team's endpoints its interaction.answered event: when telling them fails (the store or
// Temporal down for a moment), the close's activity fails, so Temporal tries it again (its sends skip the devices
// already reached), instead of finishing with the event lost. Push is not configured here, so nothing is sent.
import assert from 'node:assert/strict';
import { createInteractionActivities, type InteractionActivityDeps } from '../../activities/interaction';
import type { PushActivityDeps } from '../../activities/push';

const ref = { runId: 'run_1', teamId: 'acme', interactionId: 'int_1' };
const answer = { answeredBy: 'alice', at: new Date(0).toISOString() };

function activities(announce: InteractionActivityDeps['announce']) {
  // Only what closeAnswered reads without a push sender: push not configured, nothing else touched.
  const push = { sender: undefined, log: () => undefined } as unknown as PushActivityDeps;
  return createInteractionActivities({ push, announce } as unknown as InteractionActivityDeps);
}

describe("an answer's close and its team event", () => {
  it('fails the attempt when the event could not be raised, and raises it on the next', async () => {
    const raised: string[] = [];
    let down = true;
    const close = activities(async (event) => {
      if (down) throw new Error('store unavailable');
      raised.push(event.type);
    });
    await assert.rejects(close.closeAnswered(ref, answer), /store unavailable/);
    down = false;
    assert.equal((await close.closeAnswered(ref, answer)).result, 'not_addressable');
    assert.deepEqual(raised, ['interaction.answered']);
  });
});
