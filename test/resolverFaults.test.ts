// A resolver hiccup is not a refusal: lookups that fail on purpose (injected through the guard's `lookup` option)
// must not prune push subscriptions or give up on callbacks, while a name that does not exist still counts.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import fs from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { Config } from '../config';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { FAN_OUT_ATTEMPTS } from '../domain/push';
import { createRunsService, type RunsService } from '../runs/service';
import {
  checkCallbackTarget,
  resolverLookup,
  TargetRefusedError,
  type HostLookup,
} from '../delivery/ssrfGuard';
import { startDnsServer, type DnsServer } from './support/dnsServer';
import { waitUntil } from './support/waitUntil';
import type { Stores } from '../store';
import type { EpisodeResult } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { startWorkerStack, type WorkerStack } from './support/familyStack';
import { startPushService, type PushService } from './support/pushService';
import { TEST_PUSH_BURST_LIMIT } from './support/stack';

/** The resolver's transient failures, as Node reports them; 'unknown' throws an error without a code. */
const TRANSIENT = ['EAI_AGAIN', 'ESERVFAIL', 'ETIMEOUT', 'ECONNREFUSED', 'unknown'];

/** A scripted resolver: per host, the next lookups fail with these codes, then it answers 127.0.0.1. */
function scriptedLookup() {
  const next = new Map<string, string[]>();
  const always = new Map<string, string>();
  const calls: string[] = [];
  const lookup: HostLookup = async (hostname) => {
    calls.push(hostname);
    const code = next.get(hostname)?.shift() ?? always.get(hostname);
    if (code === 'hang') return new Promise(() => undefined);
    if (code === 'unknown') throw new Error('resolver exploded');
    if (code !== undefined) {
      throw Object.assign(new Error(`getaddrinfo ${code} ${hostname}`), { code, hostname });
    }
    return [{ address: '127.0.0.1', family: 4 }];
  };
  return {
    lookup,
    calls: (host: string) => calls.filter((h) => h === host).length,
    failNext: (host: string, ...codes: string[]) => next.set(host, codes),
    failAlways: (host: string, code: string | undefined) =>
      code === undefined ? always.delete(host) : always.set(host, code),
    reset: () => {
      next.clear();
      always.clear();
      calls.length = 0;
    },
  };
}

describe('resolver faults at the guard', () => {
  for (const code of TRANSIENT) {
    it(`${code} is not a refusal: the check fails with ResolverUnavailableError`, async () => {
      const resolver = scriptedLookup();
      resolver.failAlways('x.example', code);
      await assert.rejects(checkCallbackTarget('https://x.example/', { lookup: resolver.lookup }), (err) => {
        assert.ok(!(err instanceof TargetRefusedError), `a refusal: ${String(err)}`);
        assert.equal((err as Error).name, 'ResolverUnavailableError');
        assert.equal((err as { code?: string }).code, code);
        return true;
      });
    });
  }

  it('a lookup that does not answer in time is a resolver failure (ETIMEOUT), not a hang', async () => {
    const resolver = scriptedLookup();
    resolver.failAlways('slow.example', 'hang');
    const opts = { lookup: resolver.lookup, lookupTimeoutMs: 200 };
    await assert.rejects(checkCallbackTarget('https://slow.example/', opts), (err) => {
      assert.equal((err as Error).name, 'ResolverUnavailableError');
      assert.equal((err as { code?: string }).code, 'ETIMEOUT');
      return true;
    });
  });

  it('ENOTFOUND is still a refusal, with the category refused: dns', async () => {
    const resolver = scriptedLookup();
    resolver.failAlways('gone.example', 'ENOTFOUND');
    await assert.rejects(checkCallbackTarget('https://gone.example/', { lookup: resolver.lookup }), (err) => {
      assert.ok(err instanceof TargetRefusedError);
      assert.equal(err.category, 'refused: dns');
      return true;
    });
  });
});

describe("the guard's lookups never wait on Node's thread pool", function () {
  // A name that resolves only slowly (its authoritative server an attacker's) held a thread of the pool for as long
  // as the system resolver waited, after the check had given up on it; four of them (a run's callback each) held
  // all four, and every other tenant's lookup, and every file read of the process, waited behind them.
  let dns: DnsServer;
  let dir: string;

  before(async () => {
    dns = await startDnsServer({
      answers: { 'victim.test': ['127.0.0.1'], 'dual.test': ['127.0.0.1', '::1'] },
      hungSuffix: '.slow.test',
    });
    dir = mkdtempSync(path.join(tmpdir(), 'pool-'));
  });
  after(async () => {
    await dns?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Holds every thread of the pool (an open of a FIFO waits for its writer) until the returned release. */
  async function poolHeld(): Promise<() => Promise<void>> {
    const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
    const fifos = Array.from({ length: threads }, (_, i) => path.join(dir, `fifo${i}`));
    for (const fifo of fifos) execFileSync('mkfifo', [fifo]);
    const opened = fifos.map((fifo) => fs.open(fifo, 'r'));
    return async () => {
      for (const fifo of fifos) closeSync(openSync(fifo, 'w'));
      for (const handle of await Promise.all(opened)) await handle.close();
      for (const fifo of fifos) rmSync(fifo);
    };
  }

  it('with every thread of the pool held, localhost and a name its DNS server answers still resolve', async () => {
    const release = await poolHeld();
    try {
      const local = await checkCallbackTarget('http://localhost:1/hook', { allowPrivate: true });
      assert.ok(['127.0.0.1', '::1'].includes(local.address), local.address);
      const lookup = resolverLookup({ servers: [dns.address] });
      const named = await checkCallbackTarget('http://victim.test/hook', { allowPrivate: true, lookup });
      assert.equal(named.address, '127.0.0.1');
    } finally {
      await release();
    }
  });

  it('a name with both families pins the one the host can reach first: IPv6 where it has a global address, else IPv4', async () => {
    for (const preferIpv6 of [true, false]) {
      const lookup = resolverLookup({ servers: [dns.address], preferIpv6 });
      const target = await checkCallbackTarget('http://dual.test/hook', { allowPrivate: true, lookup });
      assert.equal(target.address, preferIpv6 ? '::1' : '127.0.0.1');
      assert.equal(target.family, preferIpv6 ? 6 : 4);
    }
  });

  it('names whose DNS server never answers hold up no other lookup, and fail as a resolver that could not answer', async () => {
    const lookup = resolverLookup({ servers: [dns.address] });
    let settled = 0;
    const hostile = Array.from({ length: 8 }, (_, i) =>
      checkCallbackTarget(`https://h${i}.slow.test/hook`, { lookup }).finally(() => settled++),
    );
    for (const check of hostile) check.catch(() => undefined);
    await waitUntil('every hostile name asked', () =>
      Array.from({ length: 8 }, (_, i) => dns.asked(`h${i}.slow.test`)).every((n) => n > 0),
    );
    const named = await checkCallbackTarget('http://victim.test/hook', { allowPrivate: true, lookup });
    assert.equal(named.address, '127.0.0.1');
    assert.equal(settled, 0, 'answered while every hostile lookup was still waiting');
    for (const check of hostile)
      await assert.rejects(check, (err) => (err as Error).name === 'ResolverUnavailableError');
    await assert.rejects(checkCallbackTarget('http://gone.test/hook', { lookup }), (err) => {
      assert.ok(err instanceof TargetRefusedError);
      assert.equal(err.category, 'refused: dns');
      return true;
    });
  });
});

describe('resolver faults end to end', function () {
  this.timeout(90_000);
  const vapid = webpush.generateVAPIDKeys();
  const resolver = scriptedLookup();
  let push: PushService;
  let receiver: CallbackReceiver;
  let stack: WorkerStack;
  let config: Config;
  let stores: Stores;
  let client: Client;
  let engine: RunsService;

  before(async () => {
    push = await startPushService();
    receiver = await CallbackReceiver.start();
    stack = await startWorkerStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1,1,1,1',
        SWEEP_INTERVAL_SECONDS: '3600',
        // Prune counts need episode after episode pushed to one person in seconds, never folded into a digest.
        PUSH_BURST_LIMIT: TEST_PUSH_BURST_LIMIT,
      },
      // Fast retries: a resolver down for every fan-out attempt releases the episode in ~3 s, not 30.
      { push, lookup: resolver.lookup, fastRetries: true },
    );
    ({ config, stores, client } = stack);
    engine = createRunsService({
      ...stores,
      emitter: createOutcomeEmitter({
        client,
        taskQueue: config.temporalTaskQueue,
        runs: stores.runs,
        options: episodeOptions(config),
      }),
    });
  });
  after(async () => {
    await stack?.stop();
    await push?.close();
    await receiver?.close();
  });
  beforeEach(() => {
    resolver.reset();
    push.reset();
    receiver.received.length = 0;
  });

  /** One episode: a run of this user, cancelled; resolves to the episode's result. */
  async function episode(userId: string, callbackUrl?: string): Promise<EpisodeResult> {
    const caller = { userId, teamId: 'acme' };
    const run = await engine.create(caller, {
      title: 'resolver',
      ...(callbackUrl ? { callback: { url: callbackUrl } } : {}),
    });
    await engine.cancel(caller, run._id);
    return (await client.workflow.getHandle(`${run._id}:end`).result()) as EpisodeResult;
  }

  /** A subscription on the push service, addressed by the name `localhost` (which the loopback certificate names). */
  async function subscribe(userId: string) {
    const real = push.endpoint(userId);
    const endpoint = `https://localhost:${new URL(push.origin).port}/push/${push.idOf(real)}`;
    await stores.pushSubscriptions.upsert(
      { userId, teamId: 'acme' },
      { endpoint, keys: real.keys },
      new Date(),
    );
    return real;
  }
  const subscriptionsOf = async (userId: string) => stores.pushSubscriptions.listForUsers([userId]);

  describe('push', () => {
    it('EAI_AGAIN on every attempt: the fan-out is retried, the subscription kept, the episode released', async () => {
      await subscribe('dana');
      resolver.failAlways('localhost', 'EAI_AGAIN');
      const result = await episode('dana');
      assert.equal(result.push, 'released');
      assert.equal((await subscriptionsOf('dana')).length, 1, 'a resolver hiccup prunes nothing');
      assert.equal(resolver.calls('localhost'), FAN_OUT_ATTEMPTS, 'one lookup per fan-out attempt');
      assert.equal(push.attempts().length, 0);
    });

    it('every transient code, then an answer: the next fan-out attempt delivers', async () => {
      for (const code of TRANSIENT.filter((c) => c !== 'EAI_AGAIN')) {
        const user = `erin-${code.toLowerCase()}`;
        const real = await subscribe(user);
        resolver.failNext('localhost', code);
        const result = await episode(user);
        assert.equal(result.push, 'delivered', code);
        assert.equal(push.received(real).length, 1, code);
        assert.equal((await subscriptionsOf(user)).length, 1, code);
      }
    });

    it('a fan-out resolves each host once, however many of its endpoints it pushes to', async () => {
      const subs = [
        await subscribe('kim'),
        await subscribe('kim'),
        await subscribe('kim'),
        await subscribe('kim'),
      ];
      assert.equal((await episode('kim')).push, 'delivered');
      for (const sub of subs) assert.equal(push.received(sub).length, 1);
      assert.equal(resolver.calls('localhost'), 1);
    });

    it('ENOTFOUND in three episodes in quick succession prunes nothing; a success in between starts the count again', async () => {
      const real = await subscribe('fay');
      resolver.failAlways('localhost', 'ENOTFOUND');
      for (const n of [1, 2]) {
        assert.equal((await episode('fay')).push, 'released');
        assert.equal((await subscriptionsOf('fay')).length, 1, `kept after ${n} unresolved episode(s)`);
      }
      resolver.failAlways('localhost', undefined);
      assert.equal((await episode('fay')).push, 'delivered');
      assert.equal(push.received(real).length, 1);
      resolver.failAlways('localhost', 'ENOTFOUND');
      for (const n of [1, 2]) {
        assert.equal((await episode('fay')).push, 'released');
        assert.equal((await subscriptionsOf('fay')).length, 1, `kept after ${n} unresolved episode(s) again`);
      }
      assert.equal((await episode('fay')).push, 'released');
      const [row] = await subscriptionsOf('fay');
      assert.ok(row, 'kept: three in a row within minutes, not PUSH_PRUNE_MIN_HOURS (pushPrune.test.ts)');
      assert.equal(row.unresolved?.count, 3);
    });
  });

  describe('callback', () => {
    const hookUrl = () => receiver.url.replace('127.0.0.1', 'hooks.callback.test');

    it('EAI_AGAIN twice, then an answer: the callback follows its schedule and is delivered', async () => {
      resolver.failNext('hooks.callback.test', 'EAI_AGAIN', 'EAI_AGAIN');
      const result = await episode('gus', hookUrl());
      assert.equal(result.callback, 'delivered');
      assert.equal(receiver.received.length, 1);
      assert.equal(resolver.calls('hooks.callback.test'), 3);
    });

    it('a resolver down for the whole schedule: every attempt is made, then it gives up', async () => {
      resolver.failAlways('hooks.callback.test', 'ESERVFAIL');
      const result = await episode('gus', hookUrl());
      assert.equal(result.callback, 'gave_up');
      assert.equal(resolver.calls('hooks.callback.test'), 5, 'four waits, five attempts');
      const claim = await stores.claims.describe(`cb|${result.episodeId}`);
      assert.equal(claim.result, 'gave_up: dns: temporary failure');
      assert.equal(receiver.received.length, 0);
    });

    it('ENOTFOUND once, then an answer: retried on the schedule too (a receiver’s name can come back)', async () => {
      resolver.failNext('hooks.callback.test', 'ENOTFOUND');
      const result = await episode('gus', hookUrl());
      assert.equal(result.callback, 'delivered');
      assert.equal(receiver.received.length, 1);
    });
  });
});
