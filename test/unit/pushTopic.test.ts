// delivery/push/fanOut's Web Push headers: a Topic per message a device should see once, so a push service holding
// an older copy of it for an offline device replaces it (RFC 8030 §5.4). A person's digests share a tag but not a
// Topic: each tells only what came since the last, so a newer one must not replace a queued older one.
import assert from 'node:assert/strict';
import { pushOptionsFor } from '../../delivery/push/fanOut';
import { renderDigest } from '../../domain/push';

describe('push Topic', () => {
  it("each of a person's digests has its own Topic, the same on every delivery of it", () => {
    const digest = (digestId: string) =>
      renderDigest({
        digestId,
        tag: 'digest|acme|alice',
        counts: { run_finished: 1 },
        newest: [{ title: 'Nightly', kind: 'run_finished' }],
        studioUrl: 'https://studio.example',
      });
    const [first, again, second] = [digest('dg-1'), digest('dg-1'), digest('dg-2')].map(pushOptionsFor);
    assert.equal(first.topic, again.topic);
    assert.notEqual(first.topic, second.topic);
    assert.match(first.topic, /^[A-Za-z0-9_-]{32}$/);
  });
});
