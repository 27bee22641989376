// delivery/push/sender's VAPID signer: one authorization per push-service origin, reused until near its expiry, and
// no more origins kept than its bound (the least recently signed forgotten first), however many were pushed to.
import assert from 'node:assert/strict';
import webpush from 'web-push';
import { createVapidSigner } from '../../delivery/push/sender';

describe('VAPID signer', () => {
  const keys = webpush.generateVAPIDKeys();
  const vapid = { subject: 'mailto:ops@example.com', publicKey: keys.publicKey, privateKey: keys.privateKey };

  it('reuses an origin’s authorization, and keeps at most maxAudiences origins', () => {
    const signer = createVapidSigner(vapid, Date.now, 3);
    const first = signer.authorization('https://a.example');
    assert.equal(signer.authorization('https://a.example'), first);
    for (const origin of ['https://b.example', 'https://c.example', 'https://d.example'])
      signer.authorization(origin);
    assert.equal(signer.kept(), 3);
  });
});
