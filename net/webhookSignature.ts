// Standard Webhooks signing, as any off-the-shelf receiver library verifies it.
import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks: webhook-signature = "v1," + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), where the
 * key is the base64 part of the whsec_ secret. The id stays the same across attempts; the timestamp is each
 * attempt's own.
 */
export function signWebhook(
  secret: string,
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const signature = createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64');
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${signature}`,
  };
}
