// Standard Webhooks signing, as any off-the-shelf receiver library verifies it.
import { createHmac } from 'node:crypto';

/**
 * Standard Webhooks: webhook-signature = "v1," + base64(HMAC-SHA256(key, "<id>.<timestamp>.<body>")), where the
 * key is the base64 part of the whsec_ secret. The id stays the same across attempts; the timestamp is each
 * attempt's own. Several secrets (a rotation's overlap): one space-separated signature each, which a receiver
 * holding any one of them verifies.
 */
export function signWebhook(
  secrets: string | string[],
  id: string,
  timestampSeconds: number,
  body: string,
): Record<string, string> {
  const signature = (secret: string) => {
    const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
    return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
  };
  return {
    'webhook-id': id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': [secrets].flat().map(signature).join(' '),
  };
}
