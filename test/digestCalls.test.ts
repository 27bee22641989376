// The digest's calls to Temporal (a held push added to the person's digest, a prefs change told to it) made while
// Temporal takes connections and never answers: each settles within the call deadline, so a prefs request or a
// push activity is not held for minutes by a partition after its own write is done.
import assert from 'node:assert/strict';
import { addToDigest, digestPrefsChanged } from '../client/digest';
import type { DigestEntry } from '../contract/workflows';
import { startSilentTemporal, type SilentTemporal } from './support/silentTemporal';

describe('the digest calls with Temporal unresponsive', function () {
  // The call deadline (30 s) and a margin: without one, the calls wait for good and this timeout fails the test.
  this.timeout(50_000);
  let temporal: SilentTemporal;
  before(async () => (temporal = await startSilentTemporal()));
  after(async () => temporal?.close());

  it('a prefs change and an added entry each fail within the call deadline instead of waiting', async () => {
    const at = new Date().toISOString();
    const entry: DigestEntry = {
      episodeId: 'ep_1',
      runId: 'run_1',
      kind: 'completed',
      title: 'done',
      at,
      releaseAt: at,
      reason: 'burst',
    };
    const settled = await Promise.allSettled([
      digestPrefsChanged(temporal.client, 'acme', 'alice'),
      addToDigest(temporal.client, 'flow-notify', 'acme', 'alice', entry),
    ]);
    for (const outcome of settled) assert.equal(outcome.status, 'rejected');
  });
});
