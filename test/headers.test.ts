// Security headers: the studio's files and its SPA deep links carry a strict CSP; the API's answers (errors
// included) one that allows nothing; all of them nosniff, no framing and no Referer. The studio's page has no
// inline script or style, so the strict policy cannot break it (test/studio.test.ts runs it in Chromium).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { ApiHandle } from '../api/server';
import { API_CSP } from '../api/securityHeaders';
import { STUDIO_DIR } from '../api/studio';
import { ApiClient, startTestApi } from './support/harness';
import { testConfig } from './support/stack';

/** Every script of the studio (the entry, its ES modules, the service worker), as paths under STUDIO_DIR. */
const studioScripts = (): string[] =>
  readdirSync(STUDIO_DIR, { recursive: true, encoding: 'utf8' })
    .filter((file) => file.endsWith('.js'))
    .map((file) => file.split(path.sep).join('/'));

function directives(csp: string | null): Map<string, string> {
  assert.ok(csp, 'a content-security-policy header');
  return new Map(
    csp.split(';').map((d) => {
      const [name, ...values] = d.trim().split(/\s+/);
      return [name, values.join(' ')] as [string, string];
    }),
  );
}

function assertCommon(headers: Headers, what: string): void {
  assert.equal(headers.get('x-content-type-options'), 'nosniff', what);
  assert.equal(headers.get('referrer-policy'), 'no-referrer', what);
  assert.equal(headers.get('x-frame-options'), 'DENY', what);
  assert.equal(directives(headers.get('content-security-policy')).get('frame-ancestors'), "'none'", what);
  // No other origin's window keeps a handle on ours, and no other origin may embed what we answer.
  assert.equal(headers.get('cross-origin-opener-policy'), 'same-origin', what);
  assert.equal(headers.get('cross-origin-resource-policy'), 'same-origin', what);
  // Served over plain HTTP, not behind a trusted TLS proxy: HSTS would be ignored, and is not sent.
  assert.equal(headers.get('strict-transport-security'), null, what);
}

describe('security headers', () => {
  let api: ApiHandle;
  let anonymous: ApiClient;
  let alice: ApiClient;

  before(async () => {
    ({ api, client: anonymous } = await startTestApi(testConfig()));
    alice = anonymous.as('alice', 'acme');
  });
  after(() => api.close());

  it('the studio: a strict CSP (same-origin scripts and styles only, nothing inline) on every file', async () => {
    const scripts = studioScripts().map((file) => `/${file}`);
    assert.ok(scripts.includes('/shared/api.js'), 'the ES modules app.js imports');
    for (const p of ['/', '/runs/run_x', ...scripts, '/styles.css', '/icon.svg']) {
      const res = await anonymous.get(p);
      assert.equal(res.status, 200, p);
      if (p.endsWith('.js')) {
        // A module script is refused unless served as JavaScript; only the service worker skips the cache.
        assert.equal(res.headers.get('content-type'), 'text/javascript; charset=utf-8', p);
        assert.equal(
          res.headers.get('cache-control'),
          p === '/sw.js' ? 'no-cache' : 'public, max-age=300',
          p,
        );
      }
      assertCommon(res.headers, p);
      const csp = directives(res.headers.get('content-security-policy'));
      assert.equal(csp.get('default-src'), "'none'", p);
      assert.equal(csp.get('script-src'), "'self'", p);
      assert.equal(csp.get('style-src'), "'self'", p);
      assert.equal(csp.get('connect-src'), "'self'", p);
      assert.equal(csp.get('worker-src'), "'self'", p);
      assert.equal(csp.get('base-uri'), "'none'", p);
      for (const [name, value] of csp) assert.doesNotMatch(value, /unsafe-|\*|data:|blob:/, `${p} ${name}`);
    }
  });

  it('the API: a CSP that allows nothing, on answers and errors alike', async () => {
    const cases: [string, () => Promise<{ status: number; headers: Headers }>, number][] = [
      ['GET /api/v1/runs', () => alice.get('/api/v1/runs'), 200],
      ['no token', () => anonymous.get('/api/v1/runs'), 401],
      ['unknown API path', () => alice.get('/api/v1/nope'), 404],
      ['wrong method', () => alice.request('PATCH', '/api/v1/runs'), 405],
      ['bad JSON', () => alice.request('POST', '/api/v1/runs', '{'), 400],
      ['GET /healthz', () => anonymous.get('/healthz'), 200],
      ['GET /readyz', () => anonymous.get('/readyz'), 200],
      ['GET /metrics (not served)', () => anonymous.get('/metrics'), 404],
      ['GET /api/v1/openapi.json', () => anonymous.get('/api/v1/openapi.json'), 200],
    ];
    for (const [what, call, status] of cases) {
      const res = await call();
      assert.equal(res.status, status, what);
      assertCommon(res.headers, what);
      // The API's policy exactly: nothing may load, not even a script of our own.
      assert.equal(res.headers.get('content-security-policy'), API_CSP, what);
    }
  });

  it("a method a path does not take is a 405 that says which it takes (Allow), in the API's JSON error shape", async () => {
    for (const [client, method, path, allow] of [
      [alice, 'PATCH', '/api/v1/runs', 'GET, HEAD, POST'],
      [alice, 'DELETE', '/api/v1/teams/current/escalation', 'GET, HEAD, PUT'],
    ] as const) {
      const res = await client.request(method, path);
      assert.equal(res.status, 405, `${method} ${path}`);
      const allowed = res.headers.get('allow')?.split(', ').sort().join(', ');
      assert.equal(allowed, allow, `${method} ${path}`);
      assert.equal(typeof res.body.error, 'string', res.text);
    }
  });

  it('Strict-Transport-Security behind a TLS-terminating proxy (TRUST_PROXY=1), unless it says the request was plain', async () => {
    const { api: proxied, client } = await startTestApi(testConfig({ TRUST_PROXY: '1' }));
    try {
      for (const [what, headers, hsts] of [
        ['forwarded https', { 'x-forwarded-proto': 'https' }, true],
        ['no forwarded protocol', {}, true],
        ['forwarded http', { 'x-forwarded-proto': 'http' }, false],
      ] as const) {
        for (const p of ['/', '/healthz', '/api/v1/runs']) {
          const res = await client.request('GET', p, undefined, headers);
          const value = res.headers.get('strict-transport-security');
          if (hsts) assert.match(value ?? '', /^max-age=31536000$/, `${what} ${p}`);
          else assert.equal(value, null, `${what} ${p}`);
        }
      }
    } finally {
      await proxied.close();
    }
    // Without TRUST_PROXY a forwarded protocol is anyone's word: no HSTS.
    const res = await anonymous.request('GET', '/healthz', undefined, { 'x-forwarded-proto': 'https' });
    assert.equal(res.headers.get('strict-transport-security'), null);
  });

  it("behind the proxy (TRUST_PROXY=1) an address is the one the proxy saw: X-Forwarded-For's leftmost entries, or moves within an IPv6 /64, are one address to its bounds", async () => {
    const { api: proxied, client } = await startTestApi(testConfig({ TRUST_PROXY: '1' }));
    try {
      /** Actions until a 429, each forwarded for `forwarded(i)`: the 429, or undefined past the bound's 60. */
      const actions = async (forwarded: (i: number) => string) => {
        for (let i = 0; i <= 60; i++) {
          const token = `${String(i).padStart(2, '0')}${'B'.repeat(41)}`;
          const res = await client.request(
            'POST',
            '/api/v1/interactions/actions',
            { token },
            { 'x-forwarded-for': forwarded(i) },
          );
          if (res.status === 429) return res;
          assert.equal(res.status, 404, res.text);
        }
        return undefined;
      };
      // The proxy appends the address it saw; what comes before it is the client's own word.
      assert.ok(await actions((i) => `198.51.100.${i}, 203.0.113.7`), 'the proxied address is bounded');
      assert.ok(await actions((i) => `2001:db8:5:6::${i.toString(16)}`), 'an IPv6 /64 is one address');
    } finally {
      await proxied.close();
    }
  });

  it('the studio page has no inline script, inline style or event-handler attribute', () => {
    const html = readFileSync(path.join(STUDIO_DIR, 'index.html'), 'utf8');
    for (const tag of html.match(/<script\b[^>]*>[\s\S]*?<\/script>/gi) ?? []) {
      assert.match(tag, /^<script\b[^>]*\bsrc="\/[^"]+"[^>]*><\/script>$/, tag);
    }
    assert.doesNotMatch(html, /<style\b|\sstyle=|\son[a-z]+=/i);
    // Markup the scripts build is held to the same rule.
    for (const file of studioScripts()) {
      const js = readFileSync(path.join(STUDIO_DIR, file), 'utf8');
      assert.doesNotMatch(js, /\sstyle=|\son[a-z]+="|javascript:|\beval\(|new Function\(/, file);
    }
  });
});
