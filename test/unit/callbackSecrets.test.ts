// Which secrets sign a callback after a rotation, and what a Standard Webhooks receiver makes of the header.
import assert from 'node:assert/strict';
import { Webhook, WebhookVerificationError } from 'standardwebhooks';
import { signingSecrets } from '../../domain/callback';
import { signWebhook } from '../../delivery/callback/signature';
import { AT } from './fixtures';

const OLD = `whsec_${Buffer.alloc(32, 1).toString('base64')}`;
const NEW = `whsec_${Buffer.alloc(32, 2).toString('base64')}`;
const OVERLAP = 3600;
const after = (seconds: number) => new Date(AT.getTime() + seconds * 1000);

describe('callback signing secrets', () => {
  it('the new secret, and the previous one until the overlap ends (its last millisecond included)', () => {
    const callback = { secret: NEW, previousSecret: { secret: OLD, rotatedAt: AT } };
    assert.deepEqual(signingSecrets({ secret: NEW }, AT, OVERLAP), [NEW]);
    assert.deepEqual(signingSecrets(callback, AT, OVERLAP), [NEW, OLD]);
    assert.deepEqual(signingSecrets(callback, new Date(after(OVERLAP).getTime() - 1), OVERLAP), [NEW, OLD]);
    assert.deepEqual(signingSecrets(callback, after(OVERLAP), OVERLAP), [NEW]);
  });

  it('two space-separated signatures: a receiver holding either secret verifies, one holding neither does not', () => {
    const body = JSON.stringify({
      version: '1',
      type: 'run.test',
      run: { id: 'run_abc', status: 'running' },
    });
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = signWebhook([NEW, OLD], 'run_abc:test:1', timestamp, body);
    const [first, second] = headers['webhook-signature'].split(' ');
    assert.equal(first, signWebhook(NEW, 'run_abc:test:1', timestamp, body)['webhook-signature']);
    assert.equal(second, signWebhook(OLD, 'run_abc:test:1', timestamp, body)['webhook-signature']);
    for (const secret of [NEW, OLD])
      assert.deepEqual(new Webhook(secret).verify(body, headers), JSON.parse(body));
    const stranger = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
    assert.throws(() => new Webhook(stranger).verify(body, headers), WebhookVerificationError);
  });
});
