// /readyz costs a Temporal call and a Mongo ping: its answer is kept a moment and shared by the requests that
// come meanwhile, and it says ok or down, never why (that goes to the log).
import assert from 'node:assert/strict';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import { healthRouter, READINESS_CACHE_MS } from '../../platform/http/healthRoutes';

describe('readiness (/readyz)', () => {
  let server: Server;
  let base: string;
  let clock = 1_000_000;
  let draining = false;
  const calls = { temporal: 0, mongo: 0 };
  let mongoDown: Error | undefined;
  const lines: string[] = [];

  before(async () => {
    const app = new Koa();
    const router = healthRouter(
      {
        temporal: async () => {
          calls.temporal++;
          await new Promise((resolve) => setTimeout(resolve, 20));
        },
        mongo: async () => {
          calls.mongo++;
          if (mongoDown) throw mongoDown;
        },
        draining: () => draining,
      },
      { log: (line) => lines.push(line), now: () => clock },
    );
    app.use(router.routes());
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  const ready = async () => {
    const res = await fetch(`${base}/readyz`);
    return { status: res.status, body: (await res.json()) as Record<string, string> };
  };

  it('asks the servers once for the requests of a moment, concurrent or not; again once it has passed', async () => {
    assert.ok(READINESS_CACHE_MS >= 1000 && READINESS_CACHE_MS <= 2000);
    const answers = await Promise.all(Array.from({ length: 20 }, ready));
    for (const answer of answers)
      assert.deepEqual(answer, { status: 200, body: { temporal: 'ok', mongo: 'ok' } });
    await ready();
    assert.deepEqual(calls, { temporal: 1, mongo: 1 });
    clock += READINESS_CACHE_MS;
    await ready();
    assert.deepEqual(calls, { temporal: 2, mongo: 2 });
  });

  it('says down without why, and logs why', async () => {
    mongoDown = new Error('connect ECONNREFUSED 10.1.2.3:27017\n    at internal frames');
    clock += READINESS_CACHE_MS;
    const down = await ready();
    assert.deepEqual(down, { status: 503, body: { temporal: 'ok', mongo: 'down' } });
    assert.ok(
      lines.some((line) => line.includes('mongo down') && line.includes('10.1.2.3:27017')),
      lines.join('\n'),
    );
    mongoDown = undefined;
  });

  it('turns 503 at once when shutdown begins, kept answer or not', async () => {
    clock += READINESS_CACHE_MS;
    assert.equal((await ready()).status, 200);
    draining = true;
    const res = await ready();
    assert.equal(res.status, 503);
    assert.equal(res.body.shutdown, 'in progress');
    draining = false;
  });
});
