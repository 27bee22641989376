// delivery/push/fanOut's Web Push headers: a Topic per message a device should see once, so a push service holding
// an older copy for an offline device replaces it (RFC 8030 §5.4).
import assert from 'node:assert/strict';
import { pushOptionsFor } from '../../delivery/push/fanOut';
import { renderDigest } from '../../domain/push';

describe('push Topic', () => {
  it("a person's digests share one Topic, as they share one tag: a newer digest replaces a queued older one", () => {
    const digest = (digestId: string) =>
      renderDigest({
        digestId,
        tag: 'digest|acme|alice',
        counts: { run_finished: 1 },
        newest: [{ title: 'Nightly', kind: 'run_finished' }],
        studioUrl: 'https://studio.example',
      });
    const [first, second] = [pushOptionsFor(digest('dg-1')), pushOptionsFor(digest('dg-2'))];
    assert.equal(first.topic, second.topic);
    assert.match(first.topic, /^[A-Za-z0-9_-]{32}$/);
    assert.notEqual(
      first.topic,
      pushOptionsFor(
        renderDigest({
          ...{ digestId: 'dg-3', tag: 'digest|acme|bob' },
          counts: {},
          newest: [],
          studioUrl: 'https://studio.example',
        }),
      ).topic,
    );
  });
});
