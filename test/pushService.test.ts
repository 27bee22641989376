// The loopback push service itself: it decrypts what the RFC says, accepts what web-push sends, refuses bad
// VAPID the way a real push service would, and plays back scripted failures.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import webpush, {
  type PushSubscription,
  type RequestDetails,
  type RequestOptions,
  WebPushError,
} from 'web-push';
import {
  decryptAes128gcm,
  signVapidJwt,
  startPushService,
  vapidAuthorization,
  type PushService,
} from './support/pushService';

interface AppendixA {
  plaintext: string;
  ua_private: string;
  ua_public: string;
  auth_secret: string;
  body: string;
}

const SUBJECT = 'mailto:ops@example.com';

const payloadFor = (episodeId: string) => ({
  v: 1,
  kind: 'test',
  title: 'Test notification',
  body: 'Push works.',
  url: 'https://flow.example.com/runs/run_1',
  tag: episodeId,
  runId: 'run_1',
  episodeId,
});

/** The status a web-push send got: its result's on success, its WebPushError's on failure. */
async function statusOf(sending: Promise<unknown>): Promise<number> {
  try {
    const result = (await sending) as { statusCode: number };
    return result.statusCode;
  } catch (err) {
    if (err instanceof WebPushError) return err.statusCode;
    throw err;
  }
}

/** POSTs a request web-push built, over plain HTTP with fetch, after applying header overrides. */
async function postDetails(
  details: RequestDetails,
  overrides: Record<string, string | undefined> = {},
): Promise<Response> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...details.headers, ...overrides })) {
    if (value !== undefined && name.toLowerCase() !== 'content-length') headers[name] = String(value);
  }
  // The service answers plain HTTP on the same port, which spares fetch() the test certificate.
  return fetch(details.endpoint.replace(/^https:/, 'http:'), {
    method: 'POST',
    headers,
    body: details.body ? new Uint8Array(details.body) : undefined,
  });
}

describe('loopback push service', () => {
  let push: PushService;
  const vapid = webpush.generateVAPIDKeys();
  const vapidDetails = { subject: SUBJECT, ...vapid };

  const send = (subscription: PushSubscription, body: unknown, options: RequestOptions = {}) =>
    webpush.sendNotification(subscription, JSON.stringify(body), {
      vapidDetails,
      agent: push.agent,
      ...options,
    });

  before(async () => {
    push = await startPushService();
  });
  after(async () => {
    await push.close();
  });
  beforeEach(() => push.reset());

  it('decrypts the RFC 8291 Appendix A message to its plaintext', () => {
    const vector = JSON.parse(
      readFileSync(path.resolve(__dirname, '../../shared/vectors/rfc8291-appendix-a.json'), 'utf8'),
    ) as AppendixA;
    const body = Buffer.from(vector.body, 'base64url');
    const plaintext = decryptAes128gcm(body, vector.ua_private, vector.ua_public, vector.auth_secret);
    assert.equal(plaintext.toString('utf8'), vector.plaintext);

    const otherAuth = Buffer.alloc(16, 7).toString('base64url');
    assert.throws(() => decryptAes128gcm(body, vector.ua_private, vector.ua_public, otherAuth));
  });

  it("accepts web-push's sendNotification and records the decrypted payload, TTL, Urgency and Topic", async () => {
    const subscription = push.endpoint('alice');
    assert.match(subscription.endpoint, /^https:\/\/127\.0\.0\.1:\d+\/push\/alice-[0-9a-f]+$/);

    const result = await send(subscription, payloadFor('run_1:end'), {
      TTL: 60,
      urgency: 'high',
      topic: 'ep1',
    });
    assert.equal(result.statusCode, 201);
    assert.match(result.headers.location, new RegExp(`^${push.origin}/message/`));

    const [delivery, ...more] = push.received(subscription);
    assert.equal(more.length, 0);
    assert.deepEqual(delivery.payload, payloadFor('run_1:end'));
    assert.equal(delivery.rawText, JSON.stringify(payloadFor('run_1:end')));
    assert.deepEqual(delivery.headers, { ttl: 60, urgency: 'high', topic: 'ep1' });
    assert.equal(delivery.vapidPublicKey, vapid.publicKey);
    assert.equal(delivery.claims.aud, push.origin);
    assert.equal(delivery.claims.sub, SUBJECT);
    assert.equal(delivery.name, 'alice');
    assert.equal(delivery.tls, true);
    assert.equal(push.received().length, 1);
    assert.equal(push.received('alice').length, 1);
    assert.deepEqual(push.rejections(), []);
  });

  it('accepts the same request over plain HTTP (generateRequestDetails + fetch) and counts distinct JWTs', async () => {
    const subscription = push.endpoint();
    const details = webpush.generateRequestDetails(subscription, JSON.stringify(payloadFor('e1')), {
      vapidDetails,
      TTL: 0,
    });
    const first = await postDetails(details);
    assert.equal(first.status, 201);
    assert.equal(first.headers.get('ttl'), '0');

    // The same Authorization header again (a cached JWT) is one token; a freshly signed one is another.
    const sameJwt = webpush.generateRequestDetails(subscription, JSON.stringify(payloadFor('e2')), {
      vapidDetails,
      TTL: 0,
    });
    assert.equal((await postDetails(sameJwt, { Authorization: details.headers.Authorization })).status, 201);
    assert.equal(push.distinctJwtCount, 1);
    assert.equal((await postDetails(sameJwt)).status, 201);
    assert.equal(push.distinctJwtCount, 2);

    const received = await push.waitFor(3, subscription);
    assert.deepEqual(
      received.map((d) => [(d.payload as { episodeId: string }).episodeId, d.headers.urgency, d.tls]),
      [
        ['e1', 'normal', false],
        ['e2', 'normal', false],
        ['e2', 'normal', false],
      ],
    );
  });

  it('rejects a JWT signed with one key but presented with k= of another, and records nothing', async () => {
    const subscription = push.endpoint();
    const other = webpush.generateVAPIDKeys();
    const status = await statusOf(
      send(subscription, payloadFor('e'), {
        vapidDetails: { subject: SUBJECT, publicKey: other.publicKey, privateKey: vapid.privateKey },
      }),
    );
    assert.equal(status, 401);
    assert.deepEqual(push.received(), []);
    const [rejection] = push.rejections(subscription);
    assert.equal(rejection.status, 401);
    assert.match(rejection.reason, /signature does not verify/);
  });

  it('rejects a JWT whose aud is another origin', async () => {
    const subscription = push.endpoint();
    const details = webpush.generateRequestDetails(subscription, JSON.stringify(payloadFor('e')), {
      vapidDetails,
    });
    const foreign = webpush.getVapidHeaders(
      'https://fcm.googleapis.com',
      SUBJECT,
      vapid.publicKey,
      vapid.privateKey,
      'aes128gcm',
    );
    const res = await postDetails(details, { Authorization: foreign.Authorization });
    assert.equal(res.status, 401);
    assert.match(
      push.rejections()[0].reason,
      /aud "https:\/\/fcm\.googleapis\.com" is not this push service/,
    );
    assert.deepEqual(push.received(), []);
  });

  it('rejects a JWT that expires more than 24 hours ahead, or has expired', async () => {
    const subscription = push.endpoint();
    const details = webpush.generateRequestDetails(subscription, JSON.stringify(payloadFor('e')), {
      vapidDetails,
    });
    const now = Math.floor(Date.now() / 1000);
    const withExp = (exp: number) =>
      vapidAuthorization(signVapidJwt({ aud: push.origin, exp, sub: SUBJECT }, vapid), vapid.publicKey);

    assert.equal((await postDetails(details, { Authorization: withExp(now + 25 * 3600) })).status, 401);
    assert.equal((await postDetails(details, { Authorization: withExp(now - 60) })).status, 401);
    assert.deepEqual(
      push.rejections().map((r) => r.reason),
      ['JWT exp is more than 24 hours ahead', 'JWT has expired'],
    );
    // The same hand-made JWT with a lawful exp goes through, so only exp was at fault.
    assert.equal((await postDetails(details, { Authorization: withExp(now + 3600) })).status, 201);
    assert.equal(push.received().length, 1);
  });

  it('refuses a missing Authorization, the wrong Content-Encoding, a missing TTL and a key it was not made for', async () => {
    const subscription = push.endpoint();
    const details = webpush.generateRequestDetails(subscription, JSON.stringify(payloadFor('e')), {
      vapidDetails,
    });
    assert.equal((await postDetails(details, { Authorization: undefined })).status, 401);
    assert.equal((await postDetails(details, { 'Content-Encoding': 'aesgcm' })).status, 400);
    assert.equal((await postDetails(details, { TTL: undefined })).status, 400);

    const restricted = push.endpoint('restricted', {
      applicationServerKey: webpush.generateVAPIDKeys().publicKey,
    });
    assert.equal(await statusOf(send(restricted, payloadFor('e'))), 403);

    assert.deepEqual(
      push.rejections().map((r) => r.status),
      [401, 400, 400, 403],
    );
    assert.deepEqual(push.received(), []);
  });

  it('accepts the draft-era WebPush Authorization with Crypto-Key: p256ecdsa=', async () => {
    const subscription = push.endpoint();
    const details = webpush.generateRequestDetails(subscription, JSON.stringify(payloadFor('e')), {
      vapidDetails,
    });
    const legacy = webpush.getVapidHeaders(push.origin, SUBJECT, vapid.publicKey, vapid.privateKey, 'aesgcm');
    const res = await postDetails(details, {
      Authorization: legacy.Authorization,
      'Crypto-Key': legacy['Crypto-Key'],
    });
    assert.equal(res.status, 201);
    assert.equal(push.received()[0].vapidPublicKey, vapid.publicKey);
  });

  it('answers a scripted 410 once, then delivers the next one', async () => {
    const subscription = push.endpoint();
    push.failNext(subscription, [410]);
    await assert.rejects(send(subscription, payloadFor('e1')), (err: unknown) => {
      assert.ok(err instanceof WebPushError);
      assert.equal(err.statusCode, 410);
      return true;
    });
    assert.equal((await send(subscription, payloadFor('e2'))).statusCode, 201);
    assert.deepEqual(
      push.received(subscription).map((d) => (d.payload as { episodeId: string }).episodeId),
      ['e2'],
    );
    assert.deepEqual(
      push.attempts(subscription).map((a) => [a.status, a.outcome]),
      [
        [410, 'scripted'],
        [201, 'accepted'],
      ],
    );
  });

  it('answers a scripted 429 with Retry-After, plays [500, 500] in order, and fails always until recover()', async () => {
    const subscription = push.endpoint('busy');
    push.failNext('busy', [429], { 'Retry-After': '7' });
    await assert.rejects(send(subscription, payloadFor('e')), (err: unknown) => {
      assert.ok(err instanceof WebPushError);
      assert.equal(err.statusCode, 429);
      assert.equal(err.headers['retry-after'], '7');
      return true;
    });

    push.failNext(subscription.endpoint, [500, 500]);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 500);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 500);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 201);

    push.failAlways(subscription, 413);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 413);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 413);
    push.recover(subscription);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 201);

    push.failRatio(1, 503);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 503);
    push.failRatio(0);
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 201);
    assert.equal(push.received(subscription).length, 3);
  });

  it('refuses a body over 4096 bytes with 413, as RFC 8030 push services may', async () => {
    const subscription = push.endpoint();
    const status = await statusOf(send(subscription, { ...payloadFor('e'), body: 'x'.repeat(4000) }));
    assert.equal(status, 413);
    assert.match(push.rejections()[0].reason, /over 4096/);
  });

  it('answers 404 for an endpoint it never issued', async () => {
    const subscription = { ...push.endpoint(), endpoint: `${push.origin}/push/nobody` };
    assert.equal(await statusOf(send(subscription, payloadFor('e'))), 404);
  });
});
