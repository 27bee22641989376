// delivery/callback/pacing: slots per origin (FIFO, bounded wait) and the circuit breaker, on a clock the test moves.
import assert from 'node:assert/strict';
import {
  createOriginPacing,
  originOf,
  type BreakerChange,
  type OriginPacingOptions,
  type PacingEntry,
} from '../../delivery/callback/pacing';

const A = 'http://a.example:80';
const B = 'https://b.example:443';

function pacing(options: Partial<OriginPacingOptions> = {}) {
  let clock = 1_000_000;
  const changes: BreakerChange[] = [];
  const p = createOriginPacing({
    maxInFlight: 2,
    breakerFailures: 3,
    cooldownMs: 1000,
    maxCooldownMs: 4000,
    now: () => clock,
    random: () => 0.5, // no jitter: ×1 exactly
    onBreakerChange: (change) => changes.push(change),
    ...options,
  });
  return { p, changes, advance: (ms: number) => (clock += ms) };
}

type Let = Extract<PacingEntry, { held: false }>;
const go = (entry: PacingEntry): Let => {
  assert.equal(entry.held, false, `expected to be let through, was held: ${String(entry.held)}`);
  return entry as Let;
};
const enter = (p: ReturnType<typeof pacing>['p'], origin = A, maxWaitMs = 1000) =>
  p.enter(origin, { maxWaitMs });

/** n failures in a row, one at a time. */
async function fail(p: ReturnType<typeof pacing>['p'], n: number, origin = A) {
  for (let i = 0; i < n; i++) go(await enter(p, origin)).done('failure');
}

describe('delivery/callback/pacing', () => {
  it('originOf: scheme://host:port with the default port written, no path or credentials', () => {
    assert.equal(originOf('https://user:pw@Hooks.Example.com/x?y'), 'https://hooks.example.com:443');
    assert.equal(originOf('http://127.0.0.1:8080/hooks'), 'http://127.0.0.1:8080');
    assert.equal(originOf('http://[::1]/h'), 'http://[::1]:80');
    assert.equal(originOf('not a url'), undefined);
  });

  describe('slots', () => {
    it('at most maxInFlight per origin; the rest wait first come first served; other origins are not held', async () => {
      const { p } = pacing();
      const first = go(await enter(p));
      const second = go(await enter(p));
      const order: string[] = [];
      const third = enter(p).then((e) => (order.push('third'), go(e)));
      const fourth = enter(p).then((e) => (order.push('fourth'), go(e)));
      go(await enter(p, B)).done('success'); // another origin has its own slots
      assert.deepEqual(p.state(A), { breaker: 'closed', inFlight: 2, waiting: 2, failures: 0 });
      first.done('success');
      (await third).done('success');
      second.done('success');
      (await fourth).done('success');
      assert.deepEqual(order, ['third', 'fourth']);
      assert.deepEqual(p.state(A), { breaker: 'closed', inFlight: 0, waiting: 0, failures: 0 });
    });

    it('a wait past maxWaitMs is held as paced and leaves the queue; a second done() changes nothing', async () => {
      const { p } = pacing({ maxInFlight: 1 });
      const holder = go(await enter(p));
      assert.deepEqual(await enter(p, A, 20), { held: 'paced' });
      assert.deepEqual(await enter(p, A, 0), { held: 'paced' });
      assert.equal(p.state(A).waiting, 0);
      holder.done('success');
      holder.done('success');
      assert.equal(p.state(A).inFlight, 0);
      go(await enter(p)).done('success');
    });

    it('an aborted signal gives up the wait', async () => {
      const { p } = pacing({ maxInFlight: 1 });
      const holder = go(await enter(p));
      const controller = new AbortController();
      const waiting = p.enter(A, { maxWaitMs: 60_000, signal: controller.signal });
      controller.abort();
      assert.deepEqual(await waiting, { held: 'paced' });
      assert.equal(p.state(A).waiting, 0);
      holder.done('neutral');
    });

    it('paced and neutral outcomes never count against the origin', async () => {
      const { p } = pacing();
      await fail(p, 2);
      go(await enter(p)).done('neutral');
      assert.equal(p.state(A).failures, 2);
      go(await enter(p)).done('success');
      assert.equal(p.state(A).failures, 0, 'a success ends the run of failures');
    });
  });

  describe('breaker', () => {
    it('opens after breakerFailures in a row: held with the cool-down left, nothing in flight, one change', async () => {
      const { p, changes, advance } = pacing();
      await fail(p, 3);
      assert.deepEqual(changes, [
        { state: 'open', origin: A, tenant: '', failures: 3, cooldownMs: 1000, openAtOrigin: 1 },
      ]);
      assert.equal(p.state(A).breaker, 'open');
      advance(400);
      const held = await enter(p);
      assert.equal(held.held, 'breaker_open');
      // The 600 ms left, spread by up to half again (random 0.5 → ×1.25).
      assert.equal((held as { retryAfterMs: number }).retryAfterMs, 750);
      assert.equal(p.state(A).inFlight, 0);
      go(await enter(p, B)).done('success'); // other origins are not affected
    });

    it('half-open lets one probe through; a failed probe doubles the cool-down up to the cap', async () => {
      const { p, changes, advance } = pacing();
      await fail(p, 3);
      const cooldowns: number[] = [];
      for (let i = 0; i < 4; i++) {
        advance(changes.at(-1)!.state === 'open' ? (changes.at(-1) as { cooldownMs: number }).cooldownMs : 0);
        assert.equal(p.state(A).breaker, 'half-open');
        const probe = go(await enter(p));
        assert.equal(
          (await enter(p)).held,
          'breaker_open',
          'a second request while the probe is out is held',
        );
        probe.done('failure');
        cooldowns.push((changes.at(-1) as { cooldownMs: number }).cooldownMs);
      }
      assert.deepEqual(cooldowns, [2000, 4000, 4000, 4000]);
    });

    it('a successful probe closes it (one change, how long it was open) and resets the cool-down', async () => {
      const { p, changes, advance } = pacing();
      await fail(p, 3);
      advance(1000);
      go(await enter(p)).done('failure');
      advance(2000);
      go(await enter(p)).done('success');
      assert.deepEqual(changes.at(-1), {
        state: 'closed',
        origin: A,
        tenant: '',
        openForMs: 3000,
        openAtOrigin: 0,
      });
      assert.deepEqual(p.state(A), { breaker: 'closed', inFlight: 0, waiting: 0, failures: 0 });
      await fail(p, 3);
      assert.deepEqual(changes.at(-1), {
        state: 'open',
        origin: A,
        tenant: '',
        failures: 3,
        cooldownMs: 1000,
        openAtOrigin: 1,
      });
    });

    it('a probe that ends neutral (never reached the origin) lets the next request probe', async () => {
      const { p, advance } = pacing();
      await fail(p, 3);
      advance(1000);
      go(await enter(p)).done('neutral');
      assert.equal(p.state(A).breaker, 'half-open');
      go(await enter(p)).done('success');
      assert.equal(p.state(A).breaker, 'closed');
    });

    it('requests queued for a slot when it opens do not go on to the origin', async () => {
      const { p } = pacing({ maxInFlight: 1, breakerFailures: 1 });
      const inFlight = go(await enter(p));
      const queued = enter(p);
      inFlight.done('failure');
      assert.equal((await queued).held, 'breaker_open');
      assert.equal(p.state(A).inFlight, 0);
    });

    it('failures of requests let through before it opened do not extend it', async () => {
      const { p, changes } = pacing({ maxInFlight: 5 });
      const entries = await Promise.all([1, 2, 3, 4, 5].map(() => enter(p)));
      for (const entry of entries) go(entry).done('failure');
      assert.equal(changes.filter((c) => c.state === 'open').length, 1);
    });

    it('bypassBreaker (a redelivery) goes past an open breaker, in a slot; its success closes it', async () => {
      const { p, changes } = pacing({ maxInFlight: 1 });
      await fail(p, 3);
      const bypass = go(await p.enter(A, { maxWaitMs: 0, bypassBreaker: true }));
      assert.deepEqual(await p.enter(A, { maxWaitMs: 0, bypassBreaker: true }), { held: 'paced' });
      bypass.done('success');
      assert.equal(changes.at(-1)!.state, 'closed');
    });

    it('a probe failing after another request closed the breaker counts as one failure, not a reopening', async () => {
      const { p, changes, advance } = pacing();
      await fail(p, 3);
      advance(1000);
      const probe = go(await enter(p));
      go(await p.enter(A, { maxWaitMs: 0, bypassBreaker: true })).done('success');
      assert.equal(p.state(A).breaker, 'closed');
      probe.done('failure');
      assert.equal(changes.at(-1)!.state, 'closed', 'no change: one failure of three');
      assert.deepEqual(p.state(A), { breaker: 'closed', inFlight: 0, waiting: 0, failures: 1 });
    });

    it("is the tenant's: one tenant's failures at an origin hold none of another tenant's requests there", async () => {
      const { p, changes } = pacing({ maxInFlight: 4 });
      const as = (tenant: string) => p.enter(A, { maxWaitMs: 1000, tenant });
      for (let i = 0; i < 3; i++) go(await as('team-a')).done('failure');
      assert.equal((await as('team-a')).held, 'breaker_open');
      assert.deepEqual(p.state(A, 'team-a').breaker, 'open');
      // Team B's requests to the same origin go, and their failures count on B's breaker only.
      go(await as('team-b')).done('success');
      go(await as('team-b')).done('failure');
      go(await as('team-b')).done('failure');
      assert.deepEqual(p.state(A, 'team-b'), { breaker: 'closed', inFlight: 0, waiting: 0, failures: 2 });
      go(await as('team-b')).done('failure');
      assert.deepEqual(
        changes.map((c) => c.state === 'open' && [c.tenant, c.openAtOrigin]),
        [
          ['team-a', 1],
          ['team-b', 2],
        ],
      );
      // The slots stay the origin's: every tenant's requests share them.
      const held = await Promise.all([1, 2, 3, 4].map(() => as('team-c')));
      assert.deepEqual(await p.enter(A, { maxWaitMs: 0, tenant: 'team-d' }), { held: 'paced' });
      for (const entry of held) go(entry).done('success');
    });

    it("keeps at most maxTenantsPerOrigin tenants' breakers at an origin, forgetting closed ones first", async () => {
      const { p } = pacing({ maxTenantsPerOrigin: 2 });
      const as = (tenant: string) => p.enter(A, { maxWaitMs: 1000, tenant });
      for (let i = 0; i < 3; i++) go(await as('open')).done('failure');
      go(await as('x')).done('failure');
      go(await as('y')).done('failure'); // over the cap: x (closed, least recent) goes, not the open one
      assert.equal(p.state(A, 'x').failures, 0);
      assert.equal(p.state(A, 'y').failures, 1);
      assert.equal(p.state(A, 'open').breaker, 'open');
    });

    it('jitter: the cool-down is the base ±20 %', async () => {
      for (const [random, expected] of [
        [0, 800],
        [1, 1200],
      ] as const) {
        const { p, changes } = pacing({ random: () => random });
        await fail(p, 3);
        assert.equal((changes[0] as { cooldownMs: number }).cooldownMs, expected);
      }
    });
  });

  describe('tracked origins', () => {
    it('bounded by maxOrigins: the least recently used idle origin is forgotten, closed ones first', async () => {
      const { p, changes } = pacing({ maxOrigins: 3, breakerFailures: 1 });
      const origin = (i: number) => `http://o${i}.example:80`;
      await fail(p, 1, origin(1)); // o1 open
      go(await enter(p, origin(2))).done('success');
      const busy = go(await enter(p, origin(3))); // o3 in flight
      go(await enter(p, origin(4))).done('success'); // over the cap: o2 (idle, closed) goes, not o1 (open)
      assert.equal(p.trackedOrigins, 3);
      assert.deepEqual(changes.at(-1), { state: 'forgotten', origin: origin(2) });
      go(await enter(p, origin(5))).done('success'); // o4 next (closed), then only the open o1 is idle
      go(await enter(p, origin(6))).done('success');
      assert.deepEqual(
        changes.filter((c) => c.state === 'forgotten').map((c) => c.origin),
        [origin(2), origin(4), origin(5)],
      );
      busy.done('success');
      assert.equal(p.state(origin(1)).breaker, 'open');
    });
  });
});
