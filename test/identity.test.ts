// Identity: what a bearer token must be (numeric exp, a bounded lifetime, no iat from the future), the secret's
// minimum size at start-up, npm run token, and tokens of a deployment's identity provider verified against its
// JWKS (a loopback IdP that rotates its keys and goes down).
import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { promisify } from 'node:util';
import type { ApiHandle } from '../api/server';
import { loadConfig } from '../config';
import { PROJECT_ROOT } from '../platform/embedded';
import { ApiClient, startTestApi } from './support/harness';
import { JwksServer } from './support/jwksServer';
import { TEST_JWT_SECRET, testConfig, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';

const nowSeconds = (): number => Math.floor(Date.now() / 1000);
/** Signed by hand, so any payload (a string exp, say) can be made; exactly the claims given. */
function hs256(payload: object): string {
  const part = (value: object): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  const signed = `${part({ alg: 'HS256', typ: 'JWT' })}.${part(payload)}`;
  return `${signed}.${createHmac('sha256', TEST_JWT_SECRET).update(signed).digest('base64url')}`;
}

describe('identity', function () {
  this.timeout(60_000);

  describe('HS256 tokens', () => {
    let api: ApiHandle;
    const as = (token: string) => new ApiClient(api.url, token).get('/api/v1/runs');

    before(async () => {
      ({ api } = await startTestApi(testConfig()));
    });
    after(() => api.close());

    it('a token without exp is 401', async () => {
      const res = await as(hs256({ sub: 'alice', team: 'acme', iat: nowSeconds() }));
      assert.equal(res.status, 401, res.text);
      assert.equal(res.body.error, 'token must carry a numeric exp');
    });

    it('ids are 1–256 bytes of printable characters: longer (in any script) or with a control character, 401 naming the rule', async () => {
      const exp = nowSeconds() + 600;
      const wide = '团'.repeat(86); // 258 bytes in 86 characters
      for (const [sub, team] of [
        [wide, 'acme'],
        ['alice', 'ac\u0001me'],
      ]) {
        const res = await as(hs256({ sub, team, exp }));
        assert.equal(res.status, 401, res.text);
        assert.equal(res.body.error, 'sub and team must be 1–256 bytes (UTF-8) without control characters');
      }
      const ok = await as(hs256({ sub: '团'.repeat(85), team: 'acme', exp }));
      assert.equal(ok.status, 200, ok.text);
    });

    it('a non-numeric exp is 401', async () => {
      const res = await as(hs256({ sub: 'alice', team: 'acme', exp: String(nowSeconds() + 600) }));
      assert.equal(res.status, 401, res.text);
    });

    it('a token living longer than the maximum (7 days by default) is 401', async () => {
      const iat = nowSeconds();
      const long = await as(hs256({ sub: 'alice', team: 'acme', iat, exp: iat + 30 * 86400 }));
      assert.equal(long.status, 401, long.text);
      assert.match(long.body.error, /token lifetime exceeds 604800 seconds/);
      // Without iat the lifetime counts from now.
      const noIat = await as(hs256({ sub: 'alice', team: 'acme', exp: iat + 8 * 86400 }));
      assert.equal(noIat.status, 401, noIat.text);
      const week = await as(hs256({ sub: 'alice', team: 'acme', iat, exp: iat + 7 * 86400 }));
      assert.equal(week.status, 200, week.text);
    });

    it('an iat in the future beyond the clock skew (60 s) is 401; within it, accepted', async () => {
      const future = nowSeconds() + 600;
      const res = await as(hs256({ sub: 'alice', team: 'acme', iat: future, exp: future + 3600 }));
      assert.equal(res.status, 401, res.text);
      assert.equal(res.body.error, 'token issued in the future');
      const slightly = nowSeconds() + 20;
      const ok = await as(hs256({ sub: 'alice', team: 'acme', iat: slightly, exp: slightly + 3600 }));
      assert.equal(ok.status, 200, ok.text);
    });

    it('AUTH_ISSUER and AUTH_AUDIENCE, set without a JWKS, are checked on HS256 tokens', async () => {
      const { api: strict } = await startTestApi(
        testConfig({ AUTH_ISSUER: 'https://flow.test/', AUTH_AUDIENCE: 'flow-notify' }),
      );
      try {
        const iat = nowSeconds();
        const claims = { sub: 'alice', team: 'acme', iat, exp: iat + 600 };
        const get = (token: string) => new ApiClient(strict.url, token).get('/api/v1/runs');
        const plain = await get(hs256(claims));
        assert.equal(plain.status, 401, plain.text);
        const wrong = await get(hs256({ ...claims, iss: 'https://flow.test/', aud: 'other' }));
        assert.equal(wrong.status, 401, wrong.text);
        const right = await get(hs256({ ...claims, iss: 'https://flow.test/', aud: 'flow-notify' }));
        assert.equal(right.status, 200, right.text);
      } finally {
        await strict.close();
      }
    });

    it('a user or team id holding "|" is 401: team a with user b|c and team a|b with user c would share keys', async () => {
      const exp = nowSeconds() + 600;
      for (const [sub, team] of [
        ['b|c', 'a'],
        ['c', 'a|b'],
      ]) {
        const res = await as(hs256({ sub, team, iat: nowSeconds(), exp }));
        assert.equal(res.status, 401, `${sub} in ${team}: ${res.text}`);
        assert.equal(res.body.error, 'sub and team must not contain "|"');
      }
    });

    it('npm run token prints a token the API accepts', async () => {
      // Not spawnSync: the API runs in this process, and a loop blocked for seconds lets its keep-alive timer
      // and the client's idle socket race (the next request can meet a socket the server is closing).
      const printed = await promisify(execFile)(
        process.execPath,
        ['-r', 'ts-node/register', 'scripts/token.ts', '--user', 'alice', '--team', 'acme'],
        { cwd: PROJECT_ROOT, env: { ...process.env, AUTH_JWT_SECRET: TEST_JWT_SECRET }, encoding: 'utf8' },
      );
      const res = await as(printed.stdout.trim());
      assert.equal(res.status, 200, res.text);
    });
  });

  describe('start-up', () => {
    for (const entry of ['api/server.ts', 'worker.ts']) {
      it(`${entry}: an AUTH_JWT_SECRET under 32 bytes stops start-up with one line naming it (exit 78)`, () => {
        const result = spawnSync(process.execPath, ['-r', 'ts-node/register', entry], {
          cwd: PROJECT_ROOT,
          env: {
            PATH: process.env.PATH ?? '',
            MONGO_URL: testStack().mongoUrl,
            TEMPORAL_ADDRESS: testStack().temporalAddress,
            AUTH_JWT_SECRET: 'x'.repeat(31),
          },
          encoding: 'utf8',
          timeout: 30_000,
        });
        assert.equal(result.status, 78, result.stderr);
        const lines = result.stderr.trim().split('\n');
        assert.equal(lines.length, 1, result.stderr);
        assert.match(lines[0], /AUTH_JWT_SECRET must be at least 32 bytes/);
      });
    }
  });

  describe('start-up bounds', () => {
    const cases: [string, Record<string, string>, RegExp][] = [
      [
        'a clock skew over 300 s',
        { AUTH_CLOCK_SKEW_SECONDS: '301' },
        /AUTH_CLOCK_SKEW_SECONDS must be at most 300 seconds, got "301"/,
      ],
      [
        'a token lifetime over 30 days',
        { AUTH_MAX_TOKEN_LIFETIME_SECONDS: String(30 * 86400 + 1) },
        /AUTH_MAX_TOKEN_LIFETIME_SECONDS must be at most 2592000 seconds/,
      ],
      [
        'a metrics port beyond loopback without METRICS_TOKEN',
        { HOST: '0.0.0.0', METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' },
        /METRICS_HOST must be loopback unless METRICS_TOKEN is set/,
      ],
    ];
    for (const [what, env, message] of cases) {
      it(`api/server.ts: ${what} stops start-up with one line naming it (exit 78)`, () => {
        const result = spawnSync(process.execPath, ['-r', 'ts-node/register', 'api/server.ts'], {
          cwd: PROJECT_ROOT,
          env: {
            PATH: process.env.PATH ?? '',
            MONGO_URL: testStack().mongoUrl,
            TEMPORAL_ADDRESS: testStack().temporalAddress,
            AUTH_JWT_SECRET: TEST_JWT_SECRET,
            ...env,
          },
          encoding: 'utf8',
          timeout: 30_000,
        });
        assert.equal(result.status, 78, result.stderr);
        const lines = result.stderr.trim().split('\n');
        assert.equal(lines.length, 1, result.stderr);
        assert.match(lines[0], message);
      });
    }

    it('the bounds themselves are accepted', () => {
      const config = loadConfig({
        MONGO_URL: 'mongodb://127.0.0.1:1',
        AUTH_JWT_SECRET: TEST_JWT_SECRET,
        AUTH_CLOCK_SKEW_SECONDS: '300',
        AUTH_MAX_TOKEN_LIFETIME_SECONDS: String(30 * 86400),
      });
      assert.equal(config.authClockSkewSeconds, 300);
      assert.equal(config.authMaxTokenLifetimeSeconds, 30 * 86400);
    });
  });

  describe('JWKS configuration', () => {
    const base = {
      MONGO_URL: 'mongodb://127.0.0.1:1',
      AUTH_ISSUER: 'https://idp.test/',
      AUTH_AUDIENCE: 'flow',
    };
    it('needs an issuer and an audience, and https unless the provider is on loopback', () => {
      assert.throws(
        () => loadConfig({ ...base, AUTH_ISSUER: '', AUTH_JWKS_URL: 'https://idp.test/jwks' }),
        /AUTH_ISSUER is required when AUTH_JWKS_URL is set/,
      );
      assert.throws(
        () => loadConfig({ ...base, AUTH_AUDIENCE: '', AUTH_JWKS_URL: 'https://idp.test/jwks' }),
        /AUTH_AUDIENCE is required when AUTH_JWKS_URL is set/,
      );
      assert.throws(
        () => loadConfig({ ...base, AUTH_JWKS_URL: 'http://idp.test/jwks' }),
        /AUTH_JWKS_URL must use https: \(http only on loopback\)/,
      );
      // With a JWKS the HS256 secret is optional; without either, start-up refuses.
      const config = loadConfig({ ...base, AUTH_JWKS_URL: 'http://127.0.0.1:9/jwks' });
      assert.equal(config.authJwtSecret, undefined);
      assert.equal(config.authJwks?.userClaim, 'sub');
      assert.throws(() => loadConfig({ MONGO_URL: base.MONGO_URL }), /AUTH_JWT_SECRET is required/);
    });
  });

  describe('an identity provider outage: the last good key set', () => {
    const audience = 'flow-notify';
    let idp: JwksServer;
    let api: ApiHandle;
    const call = (token: string) => new ApiClient(api.url, token).get('/api/v1/runs');
    const many = (n: number, token: string) => Promise.all(Array.from({ length: n }, () => call(token)));

    before(async () => {
      idp = await JwksServer.start();
      await idp.addKey('rsa-1', 'RS256');
      ({ api } = await startTestApi(
        testConfig({
          AUTH_JWKS_URL: idp.url,
          AUTH_ISSUER: idp.issuer,
          AUTH_AUDIENCE: audience,
          AUTH_JWKS_COOLDOWN_SECONDS: '1',
          AUTH_JWKS_CACHE_SECONDS: '1',
          // Five more seconds of use than of freshness: room for the requests below on a busy machine.
          AUTH_JWKS_MAX_STALE_SECONDS: '5',
        }),
      ));
    });
    after(async () => {
      await api.close();
      await idp.stop();
    });

    it('serves the last good keys while reloads fail, a few fetches for many requests; 503 once too old', async () => {
      const token = await idp.sign('rsa-1', { sub: 'erin', team: 'acme' }, audience);
      const good = await call(token);
      assert.equal(good.status, 200, good.text);
      assert.equal(idp.fetches, 1);

      // What happens, in order; when to the millisecond is the unit test's (test/unit/authKeys.test.ts), on a clock
      // it moves. Once the set is stale (1 s) a request reloads it, the reload fails, and the stale set verifies.
      idp.failWith = 503;
      let stale = good;
      await waitUntil(
        'a request to reload the stale set',
        async () => {
          stale = await call(token);
          return idp.fetches > 1;
        },
        { intervalMs: 200, seen: () => `${idp.fetches} fetches, last ${stale.status}` },
      );
      assert.equal(stale.status, 200, `the request whose reload failed: ${stale.text}`);
      const during = await many(20, token);
      assert.deepEqual(
        during.map((r) => r.status),
        Array(20).fill(200),
        `stale keys still verify: ${during.find((r) => r.status !== 200)?.text}`,
      );
      // The failed reloads back off 1 s, 2 s, 4 s: within the set's 6 s of use at most three, whatever the
      // requests and however slowly they come.
      assert.ok(idp.fetches - 1 <= 3, `${idp.fetches - 1} reloads for 21 requests with the stale set`);

      // Past the freshness plus AUTH_JWKS_MAX_STALE_SECONDS the set is too old to trust: 503, as without keys.
      let last = during[0];
      await waitUntil(
        'the key set to be too old to trust (503)',
        async () => (last = await call(token)).status === 503,
        {
          timeoutMs: 30_000,
          intervalMs: 200,
          seen: () => last.text,
        },
      );
      assert.match(last.body.error, /identity provider keys are unavailable/);
      assert.ok(idp.fetches < 8, `${idp.fetches} fetches: the reloads back off`);

      idp.failWith = undefined;
      let back = last;
      await waitUntil(
        'the provider to be back (200)',
        async () => (back = await call(token)).status === 200,
        { timeoutMs: 30_000, intervalMs: 200, seen: () => back.text },
      );
    });
  });

  describe('tokens of an identity provider (JWKS)', () => {
    const audience = 'flow-notify';
    let idp: JwksServer;
    let api: ApiHandle;
    const call = (token: string) => new ApiClient(api.url, token).post('/api/v1/runs', { title: 'idp' });

    before(async () => {
      idp = await JwksServer.start();
      await idp.addKey('rsa-1', 'RS256');
      ({ api } = await startTestApi(
        testConfig({
          AUTH_JWKS_URL: idp.url,
          AUTH_ISSUER: idp.issuer,
          AUTH_AUDIENCE: audience,
          AUTH_USER_CLAIM: 'email',
          AUTH_TEAM_CLAIM: 'org_id',
          AUTH_JWKS_COOLDOWN_SECONDS: '1',
        }),
      ));
    });
    after(async () => {
      await api.close();
      await idp.stop();
    });

    it('accepts an RS256 token with the configured claims, fetching the keys once', async () => {
      const claims = { email: 'alice@acme.test', org_id: 'acme' };
      const first = await call(await idp.sign('rsa-1', claims, audience));
      assert.equal(first.status, 201, first.text);
      assert.equal(first.body.ownerId, 'alice@acme.test');
      assert.equal(first.body.teamId, 'acme');
      const second = await call(await idp.sign('rsa-1', claims, audience));
      assert.equal(second.status, 201, second.text);
      assert.equal(idp.fetches, 1, 'the keys are cached');
    });

    it('refuses another audience, another issuer, missing claims and a key the IdP never published', async () => {
      const claims = { email: 'alice@acme.test', org_id: 'acme' };
      const wrongAud = await call(await idp.sign('rsa-1', claims, 'another-app'));
      assert.equal(wrongAud.status, 401, wrongAud.text);
      const wrongIss = await call(await idp.sign('rsa-1', claims, audience, 'https://evil.test/'));
      assert.equal(wrongIss.status, 401, wrongIss.text);
      const noTeam = await call(await idp.sign('rsa-1', { email: 'alice@acme.test' }, audience));
      assert.equal(noTeam.status, 401, noTeam.text);
      assert.equal(noTeam.body.error, 'token must carry email and org_id');
      const noExp = await call(await idp.sign('rsa-1', { ...claims, exp: undefined }, audience));
      assert.equal(noExp.status, 401, noExp.text);
      await idp.addKey('rogue', 'RS256', false);
      const rogue = await call(await idp.sign('rogue', claims, audience));
      assert.equal(rogue.status, 401, rogue.text);
    });

    it('follows a key rotation: an unknown kid fetches the keys again (after the cooldown)', async () => {
      await idp.addKey('ec-2', 'ES256', false);
      idp.publishOnly('ec-2');
      await new Promise((resolve) => setTimeout(resolve, 1100)); // past AUTH_JWKS_COOLDOWN_SECONDS
      const before = idp.fetches;
      const claims = { email: 'bob@acme.test', org_id: 'acme' };
      const rotated = await call(await idp.sign('ec-2', claims, audience));
      assert.equal(rotated.status, 201, rotated.text);
      assert.equal(rotated.body.ownerId, 'bob@acme.test');
      assert.equal(idp.fetches, before + 1);
      // The retired key is gone from the fetched set.
      const retired = await call(await idp.sign('rsa-1', claims, audience));
      assert.equal(retired.status, 401, retired.text);
    });

    it('answers 503 when the keys cannot be fetched, and recovers when the IdP is back', async () => {
      await idp.addKey('ec-3', 'ES256', false);
      idp.publishOnly('ec-2', 'ec-3');
      idp.failWith = 500;
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const claims = { email: 'carol@acme.test', org_id: 'acme' };
      const down = await call(await idp.sign('ec-3', claims, audience));
      assert.equal(down.status, 503, down.text);
      assert.match(down.body.error, /identity provider keys are unavailable/);
      // A key already held still verifies while the IdP is down.
      const held = await call(await idp.sign('ec-2', claims, audience));
      assert.equal(held.status, 201, held.text);
      idp.failWith = undefined;
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const back = await call(await idp.sign('ec-3', claims, audience));
      assert.equal(back.status, 201, back.text);
    });

    it('an HS256 token of the local secret is accepted beside the JWKS, held to the same issuer and audience', async () => {
      const iat = nowSeconds();
      const claims = { sub: 'dave', team: 'acme', iat, exp: iat + 600 };
      const res = await call(hs256({ ...claims, iss: idp.issuer, aud: audience }));
      assert.equal(res.status, 201, res.text);
      for (const [what, token] of [
        ['no iss or aud', hs256(claims)],
        ['no aud', hs256({ ...claims, iss: idp.issuer })],
        ['another issuer', hs256({ ...claims, iss: 'https://evil.test/', aud: audience })],
        ['another audience', hs256({ ...claims, iss: idp.issuer, aud: 'another-app' })],
      ] as const) {
        const refused = await call(token);
        assert.equal(refused.status, 401, `${what}: ${refused.text}`);
      }
    });
  });
});
