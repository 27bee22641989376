// api/authKeys: the identity provider's key set on a clock the test moves. How long a set stays fresh, how long the
// last good one serves through failed reloads, and the backoff between them, to the millisecond; the end-to-end
// outage (test/identity.test.ts) runs on the wall clock and checks what happens, not when.
import assert from 'node:assert/strict';
import { exportJWK, generateKeyPair, jwtVerify, SignJWT, type JSONWebKeySet } from 'jose';
import { KeysUnavailableError, remoteKeySet } from '../../api/authKeys';

describe('the identity provider key set (api/authKeys)', () => {
  let token: string;
  let keySet: JSONWebKeySet;

  before(async () => {
    const { publicKey, privateKey } = await generateKeyPair('RS256');
    keySet = { keys: [{ ...(await exportJWK(publicKey)), kid: 'rsa-1', alg: 'RS256' }] };
    token = await new SignJWT({ sub: 'erin' })
      .setProtectedHeader({ alg: 'RS256', kid: 'rsa-1' })
      .setExpirationTime('1h')
      .sign(privateKey);
  });

  /** A key set fresh for 1 s, then trusted 3 s more through failed reloads; the provider answers as `provider` says. */
  function provider() {
    let clock = 0;
    let down = false;
    let fetches = 0;
    const told: string[] = [];
    const keys = remoteKeySet({
      url: 'https://idp.test/jwks',
      cacheSeconds: 1,
      maxStaleSeconds: 3,
      cooldownSeconds: 1,
      now: () => clock,
      log: (line) => told.push(line),
      fetchKeySet: async () => {
        fetches++;
        if (down) throw new Error('answered 503');
        return keySet;
      },
    });
    return {
      at: (ms: number) => (clock = ms),
      goDown: () => (down = true),
      comeBack: () => (down = false),
      fetches: () => fetches,
      told,
      verify: () => jwtVerify(token, keys),
    };
  }

  it('serves the last good set through failed reloads backed off 1 s, 2 s, 4 s, until it is too old; then the provider again', async () => {
    const idp = provider();
    await idp.verify();
    idp.at(999);
    await idp.verify();
    assert.equal(idp.fetches(), 1, 'fresh for 1 s: no reload');

    idp.goDown();
    // [when, fetches after it, whether the last good set still verifies]
    const steps: Array<[number, number, boolean]> = [
      [1000, 2, true], // stale: a reload, which fails; the set of 1 s ago serves
      [1999, 2, true], // backed off 1 s
      [2000, 3, true],
      [3999, 3, true], // backed off 2 s
      [4000, 4, false], // 1 s fresh + 3 s stale: too old, and the reload fails
      [7999, 4, false], // backed off 4 s: no fetch, still unavailable
    ];
    for (const [ms, fetches, serves] of steps) {
      idp.at(ms);
      if (serves) await idp.verify();
      else await assert.rejects(idp.verify(), KeysUnavailableError, `at ${ms} ms`);
      assert.equal(idp.fetches(), fetches, `fetches by ${ms} ms`);
    }
    assert.equal(idp.told.length, 3, 'each failed reload told once');
    assert.match(idp.told[0], /\(1 in a row\): answered 503; the key set of 1 s ago still serves/);

    idp.comeBack();
    idp.at(8000);
    await idp.verify();
    assert.equal(idp.fetches(), 5);
    idp.at(8999);
    await idp.verify();
    assert.equal(idp.fetches(), 5, 'fresh again: no reload');
  });

  it('many requests while a reload is under way share its one fetch', async () => {
    let release!: () => void;
    let fetches = 0;
    let clock = 0;
    const keys = remoteKeySet({
      url: 'https://idp.test/jwks',
      cacheSeconds: 1,
      maxStaleSeconds: 3,
      cooldownSeconds: 1,
      now: () => clock,
      fetchKeySet: async () => {
        if (++fetches > 1) await new Promise<void>((resolve) => (release = resolve));
        return keySet;
      },
    });
    await jwtVerify(token, keys);
    clock = 1000; // stale
    const waiting = Array.from({ length: 20 }, () => jwtVerify(token, keys));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(fetches, 2, 'one reload for twenty requests');
    release();
    const verified = await Promise.all(waiting);
    assert.equal(verified.length, 20);
    assert.equal(fetches, 2);
  });
});
