// Guard order (the seed's webPushEnabled): with web push off the notification routes do not exist, so what a
// caller gets does not depend on a token: a GET is the JSON 404, any other method 405 (the GET catch-all). With
// push on, the routes exist and need a caller (401 without one).
import assert from 'node:assert/strict';
import webpush from 'web-push';
import type { ApiHandle } from '../api/server';
import { ApiClient, startTestApi } from './support/harness';
import { testConfig } from './support/stack';

const ROUTES: [string, string, unknown?][] = [
  ['GET', '/api/v1/notifications/push/vapid-public-key'],
  ['GET', '/api/v1/notifications/prefs'],
  ['PUT', '/api/v1/notifications/prefs', { scope: 'team' }],
  ['POST', '/api/v1/notifications/push/subscriptions', { endpoint: 'https://push.example.com/x' }],
  ['DELETE', '/api/v1/notifications/push/subscriptions', { endpoint: 'https://push.example.com/x' }],
  ['POST', '/api/v1/notifications/push/test', {}],
  ['GET', '/api/v1/notifications/push/subscriptions'],
  ['DELETE', '/api/v1/notifications/push/subscriptions/abc'],
  ['GET', '/api/v1/notifications'],
];

describe('guard order', () => {
  describe('web push off', () => {
    let api: ApiHandle;
    let anonymous: ApiClient;
    let alice: ApiClient;

    before(async () => {
      ({ api, client: anonymous } = await startTestApi(testConfig()));
      alice = anonymous.as('alice', 'acme');
    });
    after(() => api.close());

    for (const [method, path, body] of ROUTES) {
      const expected = method === 'GET' ? 404 : 405;
      it(`${method} ${path} without a token is ${expected}, as with one`, async () => {
        const unauthenticated = await anonymous.request(method, path, body);
        const authenticated = await alice.request(method, path, body);
        assert.equal(unauthenticated.status, expected, unauthenticated.text);
        assert.equal(authenticated.status, expected, authenticated.text);
        assert.deepEqual(unauthenticated.body, authenticated.body);
        assert.equal(unauthenticated.headers.get('allow'), authenticated.headers.get('allow'));
      });
    }

    it('a method no route knows is 501 either way', async () => {
      const path = '/api/v1/notifications/prefs';
      const unauthenticated = await anonymous.request('PROPFIND', path);
      assert.equal(unauthenticated.status, 501, unauthenticated.text);
      assert.deepEqual(unauthenticated.body, (await alice.request('PROPFIND', path)).body);
    });

    it('other API routes still need a caller', async () => {
      assert.equal((await anonymous.get('/api/v1/runs')).status, 401);
    });
  });

  describe('web push on', () => {
    let api: ApiHandle;
    let anonymous: ApiClient;

    before(async () => {
      const vapid = webpush.generateVAPIDKeys();
      ({ api, client: anonymous } = await startTestApi(
        testConfig({ VAPID_PUBLIC_KEY: vapid.publicKey, VAPID_PRIVATE_KEY: vapid.privateKey }),
      ));
    });
    after(() => api.close());

    it('the notification routes exist and need a caller (401)', async () => {
      for (const [method, path, body] of ROUTES.slice(0, 6)) {
        const res = await anonymous.request(method, path, body);
        assert.equal(res.status, 401, `${method} ${path}: ${res.text}`);
      }
    });
  });
});
