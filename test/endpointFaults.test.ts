// Team endpoints' delivery through faults, on the real servers: the delivery suite's endpoints and runs
// (test/support/endpointRuns.ts), with the worker as a child process SIGKILLed twice while events are being
// delivered (each time started again), and one endpoint's receiver down (503) through the first runs, up again
// once a delivery to it gave up, then recovered (POST /api/v1/endpoints/:id/recover) once every delivery has
// settled. Each endpoint receives exactly the events it subscribed to from after its creation, verified with
// standardwebhooks, with its recorded sequence (increasing per run); nothing is lost.
//
// "Once in effect" across a SIGKILL: the claim per (event, endpoint) dedupes the event's workflow, its replays and
// the sweep, but not a POST whose answer died with the worker. A receiver may have taken it (answered 2xx) while the
// worker never reported the attempt to Temporal, which then runs the attempt again after its start-to-close: the
// same event, same body, same webhook-id, for the receiver to drop (docs/api.md; the push family repeats a send in
// flight at a kill the same way). So an event may arrive twice only across a kill: its first copy came before the
// worker started again after the kill, the next after that, one more per kill at most, and the attempt log shows
// that delivery's attempt run again by Temporal (activityAttempt > 1). Every other second copy fails. The receivers
// hold each answer a little, so POSTs are in flight when the kills land.
//
// Its size is the delivery suite's: ENDPOINT_TEST_ENDPOINTS (default 4) endpoints and ENDPOINT_TEST_RUNS (default 6)
// runs; the size is 20 and 100.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { SUBSCRIBABLE_EVENT_TYPES, endpointDeliveryKey } from '../domain/teamEvents';
import type { Mongo } from '../store/mongo';
import { adminOf } from './support/admin';
import {
  EndpointRuns,
  owedTo,
  takenCopies,
  typesOf,
  type RegisteredEndpoint,
  type TakenCopy,
} from './support/endpointRuns';
import type { ApiClient } from './support/harness';
import { processStackVars } from './support/processStack';
import type { WorkerProcess } from './support/workerProcess';
import { waitUntil } from './support/waitUntil';
import { startWorkerProcessStack, type WorkerProcessStack } from './support/workerProcessStack';

const ENDPOINTS = Number(process.env.ENDPOINT_TEST_ENDPOINTS ?? 4);
const RUNS = Number(process.env.ENDPOINT_TEST_RUNS ?? 6);
/** How long each receiver holds its answer: the window in which a kill cuts a POST the receiver took. */
const ANSWER_DELAY_MS = 150;

describe('team endpoints: delivery through worker kills and a receiver down', function () {
  // The size (20 × 100) takes minutes on a loaded machine.
  this.timeout(Math.max(300_000, ENDPOINTS * RUNS * 300));
  let stack: WorkerProcessStack;
  let mongo: Mongo;
  let client: Client;
  let admin: ApiClient;
  let worker: WorkerProcess;
  let runs: EndpointRuns;
  /**
   * When the worker started again after each kill: no worker ran between the kill and then, so a copy that arrived
   * before it came from the killed one (its socket's last bytes may be read just after its exit is seen).
   */
  const kills: Date[] = [];

  before(async () => {
    const vars = processStackVars(
      { db: 't_epfaults', queue: 'epfaults' },
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1,1,1',
        // An attempt cut by a kill runs again after its start-to-close (this + a margin): kept short.
        CALLBACK_TIMEOUT_SECONDS: '2',
        STALL_AFTER_SECONDS: '3',
        // No breaker opens: the down endpoint's deliveries run their schedule and give up (what its recover is
        // for) rather than wait behind it, which they would for as long as it stays down (its own suites test it).
        CALLBACK_BREAKER_FAILURES: '100000',
        SWEEP_INTERVAL_SECONDS: '3600',
        PORT: '0',
      },
    );
    stack = await startWorkerProcessStack(vars);
    ({ mongo, client, worker } = stack);
    admin = adminOf(stack.anonymous, 'ada', 'acme');
    runs = new EndpointRuns({
      admin,
      alice: stack.anonymous.as('alice', 'acme'),
      stores: stack.stores,
      db: mongo.db,
    });
  });

  after(async () => {
    await stack?.stop();
    await runs?.close();
  });

  /** Copies taken by every endpoint so far. */
  const takenInAll = () =>
    runs.endpoints.reduce((n, e) => n + e.receiver.received.filter((call) => call.status < 300).length, 0);

  /** Once `more` copies more than now have been taken (events are being delivered), kills the worker and starts it. */
  async function killWhileDelivering(more: number): Promise<void> {
    const from = takenInAll();
    await waitUntil(
      `${more} more deliveries before kill ${kills.length + 1}`,
      () => takenInAll() >= from + more,
      {
        timeoutMs: 120_000,
        intervalMs: 10,
        seen: takenInAll,
      },
    );
    await worker.kill();
    await worker.start();
    kills.push(new Date());
  }

  /**
   * A second copy is allowed across a kill, sent by Temporal's retry of the attempt the kill cut: the previous copy
   * came before the kill, this one after, and the attempt log holds an attempt its activity ran again.
   */
  const acrossKill = (retried: Set<string>) => (copies: TakenCopy[], endpoint: RegisteredEndpoint) => {
    if (!retried.has(endpointDeliveryKey(copies[0].event.id, endpoint.id))) return undefined;
    const crossed = copies.slice(1).map((copy, j) => {
      const kill = kills.find((k) => copies[j].call.at <= k && copy.call.at > k);
      return kill?.toISOString();
    });
    return crossed.every(Boolean) && new Set(crossed).size === crossed.length
      ? `again after the kill at ${crossed.join(', ')}`
      : undefined;
  };

  it('each endpoint gets exactly the events it subscribed to from after its creation, once in effect, nothing lost', async () => {
    const startedAt = new Date();
    // The late endpoint (below) is the last of them: a team has at most ENDPOINTS_PER_TEAM (20).
    for (let i = 0; i < ENDPOINTS - 1; i++) await runs.register(typesOf(i));
    for (const { receiver } of runs.endpoints)
      receiver.answerAlways({ status: 204, delayMs: ANSWER_DELAY_MS });
    const down: RegisteredEndpoint = runs.endpoints[0];
    down.receiver.answerAlways({ status: 503 });

    // The first runs, the worker killed while their events go out; the receiver is back once they ended.
    const firstRuns = runs.runLives(0, Math.ceil(RUNS / 2));
    await killWhileDelivering(2);
    const first = await firstRuns;
    // Up again once a delivery to it gave up (refused at every attempt of its schedule): the recover's part.
    await waitUntil(
      'a delivery to the down endpoint given up',
      () => mongo.db.collection('endpoint_attempts').countDocuments({ endpointId: down.id, gaveUp: true }),
      { timeoutMs: 60_000 },
    );
    down.receiver.answerAlways({ status: 204, delayMs: ANSWER_DELAY_MS });
    // Created now: it hears only of what happens from here on.
    const late = await runs.register([...SUBSCRIBABLE_EVENT_TYPES]);
    late.receiver.answerAlways({ status: 204, delayMs: ANSWER_DELAY_MS });
    const secondRuns = runs.runLives(first.length, RUNS - first.length);
    await killWhileDelivering(2);
    const runIds = [...first, ...(await secondRuns)];

    const events = await runs.waitForEveryEvent(runIds);
    runs.assertSequences(events, runIds);
    await EndpointRuns.waitForDeliveries(client, events);
    assert.ok(
      down.receiver.received.some((call) => call.status === 503),
      'the receiver was down while events were owed to it',
    );

    // The recover sends the down endpoint what it has not taken, each once.
    const takenBefore = new Set(takenCopies(down).map((copy) => copy.event.id));
    const missed = owedTo(down, events).filter((id) => !takenBefore.has(id));
    assert.ok(missed.length > 0, 'the outage cost the endpoint events');
    const recover = await admin.post(`/api/v1/endpoints/${down.id}/recover`, {
      since: startedAt.toISOString(),
    });
    assert.equal(recover.status, 202, recover.text);
    assert.deepEqual(await client.workflow.getHandle(recover.body.id).result(), {
      found: missed.length,
      delivered: missed.length,
      failed: 0,
    });

    await runs.waitForOwed(events);
    const retried = await mongo.db
      .collection('endpoint_attempts')
      .distinct('episodeId', { teamId: 'acme', activityAttempt: { $gt: 1 } });
    const repeats = await (async () => {
      try {
        return runs.assertEachOwedOnce(events, acrossKill(new Set(retried.map(String))));
      } catch (err) {
        // What explains a copy too many: when the kills were, and the attempt log of the deliveries it names.
        const named = (String(err).match(/ev:\S+/g) ?? []).map((id) => id.replace(/:$/, ''));
        const log = await mongo.db
          .collection('endpoint_attempts')
          .find(
            { teamId: 'acme' },
            {
              projection: {
                _id: 0,
                episodeId: 1,
                at: 1,
                result: 1,
                status: 1,
                error: 1,
                activityAttempt: 1,
                trigger: 1,
              },
            },
          )
          .toArray();
        console.error(
          'kills',
          kills,
          log.filter((row) => named.some((id) => String(row.episodeId).includes(id))),
        );
        throw err;
      }
    })();
    assert.ok(owedTo(late, events).length > 0, 'the late endpoint heard of the later runs');
    // Each kill landed while events were being delivered: some went out before it and some after.
    for (const kill of kills) {
      const taken = runs.endpoints.flatMap((e) => takenCopies(e).map((copy) => copy.call.at));
      assert.ok(
        taken.some((at) => at < kill) && taken.some((at) => at > kill),
        `deliveries on both sides of the kill at ${kill.toISOString()}`,
      );
    }
    assert.deepEqual(worker.unexpectedExits, [], 'the worker only exited when killed');
    console.log(
      `      ${events.length} events, ${takenInAll()} copies taken, ${missed.length} recovered; ` +
        `repeats across the kills: ${repeats.length ? repeats.join('; ') : 'none'}`,
    );
  });
});
