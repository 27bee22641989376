// Three faults the full drill found, each reproduced without the drill: an operator alert sent again by an
// activity retried after its 2xx, an answer the client cannot retry once a write after it failed, and Mongo
// clients that never came back after a server restart.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../activities';
import { createOpsActivities } from '../activities/ops';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import { routeDecisionAlert, type OperatorAlert } from '../domain/ops';
import { claimKeys, inputEpisodeId } from '../domain/outcome';
import { IllegalTransitionError } from '../domain/runStatus';
import { createRunsService, type Caller, type RunsServiceDeps } from '../runs/service';
import type { Stores } from '../store';
import { hashActionToken, newActionToken } from '../store/actionTokens';
import { MONGO_CLIENT_OPTIONS, type Mongo } from '../store/mongo';
import { startThrowawayStack } from '../platform/embedded';
import { operatorAlertWorkflowId } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { openStores, startTestApi, startTestWorker, temporalClient, type ApiClient } from './support/harness';
import { nativeConnection, testConfig, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { workflowBundle } from './support/workflowBundle';
import { operatorAlertWorkflow } from '../workflows/operatorAlert';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

describe('recovery from faults the drill found', function () {
  let webhook: CallbackReceiver;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let closeClient: () => Promise<void>;

  before(async () => {
    webhook = await CallbackReceiver.start();
    config = testConfig({ OPS_ALERT_WEBHOOK_URL: webhook.url, SWEEP_INTERVAL_SECONDS: '3600' });
    ({ mongo, stores } = await openStores(config));
    ({ client, close: closeClient } = await temporalClient(config));
  });
  after(async () => {
    await closeClient?.();
    await mongo?.client.close();
    await webhook?.close();
  });
  beforeEach(() => {
    webhook.received.length = 0;
  });

  const alertsFor = (episodeKey: string) =>
    webhook.received.filter((r) => (JSON.parse(r.body) as OperatorAlert).episodeKey === episodeKey);

  describe('an operator alert is sent once even when its activity is retried after the send', () => {
    const alertFor = (decisionId: string): OperatorAlert =>
      routeDecisionAlert(
        {
          runId: `run_${decisionId}`,
          teamId: 'acme',
          decisionId,
          error: { code: 'no_route', message: 'no model matched' },
        },
        new Date().toISOString(),
      );

    it('the activity run twice (its first completion lost) POSTs once, with the alert key as Idempotency-Key', async () => {
      const ops = createOpsActivities({
        runs: stores.runs,
        claims: stores.claims,
        webhookUrl: webhook.url,
        timeoutMs: 5000,
        retryHours: 24,
        claimGraceSeconds: 300,
        now: () => new Date(),
      });
      const alert = alertFor(`twice_${Date.now()}`);
      const claim = { key: claimKeys.ops(alert.episodeKey), holder: 'wf/run-1' };
      assert.ok(await stores.claims.tryMark(claim.key, claim.holder));
      assert.equal(await ops.postOperatorAlert(alert, claim), 'sent');
      // The worker died before reporting the completion: Temporal runs the activity again.
      assert.equal(await ops.postOperatorAlert(alert, claim), 'already_sent');
      const received = alertsFor(alert.episodeKey);
      assert.equal(received.length, 1, 'one POST for the alert');
      assert.equal(received[0].headers['idempotency-key'], `ops|${alert.episodeKey}`);
      assert.equal(await stores.claims.state(claim.key), 'delivered', 'settled by the activity itself');
    });

    it('through the dispatcher: an attempt that dies after the 2xx is retried by Temporal without a second alert', async () => {
      const activities = createActivities({ config, stores, client, log: () => undefined });
      let attempts = 0;
      const worker = await Worker.create({
        connection: await nativeConnection(),
        namespace: config.temporalNamespace,
        taskQueue: config.temporalTaskQueue,
        workflowBundle: await workflowBundle(),
        activities: {
          ...activities,
          // The receiver answered 2xx, then the worker died before the activity completed.
          async postOperatorAlert(...args: Parameters<typeof activities.postOperatorAlert>) {
            attempts++;
            const sent = await activities.postOperatorAlert(...args);
            if (attempts === 1) throw new Error('worker lost after the 2xx');
            return sent;
          },
        },
      });
      const running = worker.run();
      try {
        const alert = alertFor(`dies_${Date.now()}`);
        const result = await client.workflow.execute(operatorAlertWorkflow, {
          workflowId: operatorAlertWorkflowId(alert.episodeKey),
          taskQueue: config.temporalTaskQueue,
          args: [alert],
        });
        assert.equal(result, 'delivered');
        // The attempt settled the claim before it died: the dispatcher finds it settled instead of posting again.
        assert.equal(attempts, 1, 'no second attempt was needed');
        assert.equal(alertsFor(alert.episodeKey).length, 1, 'the operator got the alert once');
      } finally {
        worker.shutdown();
        await running;
      }
    });
  });

  describe('answering a human-input interaction is safe to retry', () => {
    const caller: Caller = { userId: 'alice', teamId: 'acme' };
    const silentEmitter = { emitRunOutcome: async () => undefined };

    /** The engine over stores where the next write after a recorded answer fails once (or its ack is lost). */
    function engineFailingOnceAfter(which: 'event' | 'status') {
      let armed = false;
      const interactions: RunsServiceDeps['interactions'] = {
        ...stores.interactions,
        async recordAnswer(...args) {
          const recorded = await stores.interactions.recordAnswer(...args);
          armed = recorded;
          return recorded;
        },
      };
      const lost = () => {
        armed = false;
        return new Error('connection reset: Mongo is restarting');
      };
      const events: RunsServiceDeps['events'] = {
        ...stores.events,
        async append(...args) {
          if (armed && which === 'event') throw lost();
          return stores.events.append(...args);
        },
        async appendOnce(...args) {
          if (armed && which === 'event') throw lost();
          return stores.events.appendOnce(...args);
        },
      };
      const runs: RunsServiceDeps['runs'] = {
        ...stores.runs,
        async transition(...args) {
          const updated = await stores.runs.transition(...args);
          if (armed && which === 'status') throw lost(); // written, but the acknowledgement was lost
          return updated;
        },
      };
      return createRunsService({ ...stores, interactions, events, runs, emitter: silentEmitter });
    }

    async function pausedRun(engine: ReturnType<typeof createRunsService>) {
      const run = await engine.create(caller, { title: 'Approve the import' });
      const { interactionId } = await engine.pause(caller, run._id, 'Import 1,204 rows?');
      return { runId: run._id, interactionId };
    }

    const resumedEvents = async (runId: string) =>
      (await stores.events.listForRun(runId)).filter((e) => e.type === 'run_resumed');

    it('the write after the answer fails: the retry resumes the run, with one run_resumed event', async () => {
      const engine = engineFailingOnceAfter('event');
      const { runId, interactionId } = await pausedRun(engine);
      await assert.rejects(engine.answer(caller, runId, interactionId, 'yes'), /Mongo is restarting/);
      const retried = await engine.answer(caller, runId, interactionId, 'yes');
      assert.equal(retried.status, 'running');
      assert.equal((await stores.runs.getById(runId))?.status, 'running');
      assert.equal((await resumedEvents(runId)).length, 1);
    });

    it('the status write landed but its acknowledgement was lost: the retry answers the resumed run', async () => {
      const engine = engineFailingOnceAfter('status');
      const { runId, interactionId } = await pausedRun(engine);
      await assert.rejects(engine.answer(caller, runId, interactionId, 'yes'), /Mongo is restarting/);
      const retried = await engine.answer(caller, runId, interactionId, 'yes');
      assert.equal(retried.status, 'running');
      assert.equal((await resumedEvents(runId)).length, 1);
    });

    it('a different answer is still refused, but no longer leaves the run stuck on the stored one', async () => {
      const engine = engineFailingOnceAfter('event');
      const { runId, interactionId } = await pausedRun(engine);
      await assert.rejects(engine.answer(caller, runId, interactionId, 'yes'), /Mongo is restarting/);
      await assert.rejects(
        engine.answer(caller, runId, interactionId, 'no'),
        (err: unknown) => err instanceof IllegalTransitionError && /already answered/.test(err.message),
      );
      assert.equal((await stores.runs.getById(runId))?.status, 'running', 'resumed on the first answer');
      assert.equal((await stores.interactions.get(runId, interactionId))?.answer, 'yes');
    });

    it('once the run has moved on, answering again is a 409, whatever the answer', async () => {
      const engine = createRunsService({ ...stores, emitter: silentEmitter });
      const { runId, interactionId } = await pausedRun(engine);
      await engine.answer(caller, runId, interactionId, 'yes');
      assert.equal((await engine.answer(caller, runId, interactionId, 'yes')).status, 'running');
      await assert.rejects(engine.answer(caller, runId, interactionId, 'no'), IllegalTransitionError);
      await engine.complete(caller, runId, 'done');
      await assert.rejects(engine.answer(caller, runId, interactionId, 'yes'), IllegalTransitionError);
      assert.equal((await resumedEvents(runId)).length, 1);
    });

    it('an action token taken whose request failed before its answer was stored (the give-back failing too) answers on the retry', async () => {
      // The store goes away after the token is taken: the answer's first read fails, and so does the give-back.
      let away = false;
      const storeAway = () => new Error('connection reset: Mongo is restarting');
      const actionTokens: RunsServiceDeps['actionTokens'] = {
        ...stores.actionTokens,
        async take(...args) {
          const taken = await stores.actionTokens.take(...args);
          away = taken;
          return taken;
        },
        async giveBack(...args) {
          if (away) throw storeAway();
          return stores.actionTokens.giveBack(...args);
        },
      };
      const interactions: RunsServiceDeps['interactions'] = {
        ...stores.interactions,
        async get(...args) {
          if (away) throw storeAway();
          return stores.interactions.get(...args);
        },
      };
      const engine = createRunsService({ ...stores, actionTokens, interactions, emitter: silentEmitter });
      const { runId, interactionId } = await pausedRun(engine);
      const token = newActionToken();
      const now = new Date();
      await stores.actionTokens.insertMany([
        {
          _id: hashActionToken(token),
          teamId: caller.teamId,
          runId,
          interactionId,
          userId: 'bob',
          choiceId: 'yes',
          episodeId: inputEpisodeId(runId, interactionId),
          createdAt: now,
          expiresAt: new Date(now.getTime() + 3600_000),
        },
      ]);
      await assert.rejects(engine.actWithToken(token), /Mongo is restarting/);
      away = false;
      assert.equal(
        (await stores.interactions.get(runId, interactionId))?.status,
        'pending',
        'nothing stored',
      );
      // Expired meanwhile, it answers nothing: the answer would be made now.
      const tokens = mongo.db.collection<{ _id: string; expiresAt: Date }>('action_tokens');
      const expiring = (at: Date) =>
        tokens.updateOne({ _id: hashActionToken(token) }, { $set: { expiresAt: at } });
      await expiring(new Date(Date.now() - 1000));
      await assert.rejects(engine.actWithToken(token), /expired/);
      assert.equal((await stores.interactions.get(runId, interactionId))?.status, 'pending');
      await expiring(new Date(Date.now() + 3600_000));

      const retried = await engine.actWithToken(token);
      assert.equal(retried.did, 'answered');
      const interaction = await stores.interactions.get(runId, interactionId);
      assert.equal(interaction?.answer, 'yes');
      assert.equal(interaction?.answeredBy, 'bob', "answered as the token's person");
      assert.equal((await stores.runs.getById(runId))?.status, 'running');
      assert.equal((await resumedEvents(runId)).length, 1);
      // Answered, the token is spent like any other.
      await assert.rejects(engine.actWithToken(token), /already used/);
    });
  });

  describe('Mongo clients come back after the server restarts', function () {
    this.timeout(180_000);

    it('a command written on a connection whose socket the server just closed fails instead of hanging', async () => {
      // The race the drill hit: the socket is destroyed, its 'close' not yet emitted, and the heartbeat writes.
      const probe = await openStores(config);
      try {
        await probe.mongo.db.command({ ping: 1 });
        // The driver's internals: the one server's monitor and the connection it heartbeats on.
        interface DriverConnection {
          socket: { destroy(): void };
          command(ns: unknown, cmd: object, options: object): Promise<unknown>;
        }
        type Internals = {
          topology: { s: { servers: Map<string, { monitor: { connection?: DriverConnection } }> } };
        };
        const topology = (probe.mongo.client as unknown as Internals).topology;
        const monitor = [...topology.s.servers.values()][0].monitor;
        const connection = await waitUntil('the monitor to hold a connection', () => monitor.connection, {
          timeoutMs: 60_000,
          intervalMs: 50,
        });
        connection.socket.destroy();
        const { ns } = require('mongodb/lib/utils') as { ns: (s: string) => unknown }; // eslint-disable-line @typescript-eslint/no-require-imports
        const hello = connection.command(ns('admin.$cmd'), { hello: 1 }, {});
        const outcome = await Promise.race([
          hello.then(
            () => 'answered',
            (err: Error) => `failed: ${err.name}`,
          ),
          sleep(3000).then(() => 'hung'),
        ]);
        assert.equal(outcome, 'failed: MongoNetworkError');
        await probe.mongo.db.command({ ping: 1 }); // and the client carries on
      } finally {
        await probe.mongo.client.close();
      }
    });

    it("the API's and the worker's clients work again after each of three restarts under load, without a new client", async () => {
      // A FerretDB of its own to restart (the shared one may be external, and other suites use it).
      const dataRoot = mkdtempSync(path.join(tmpdir(), 'flow-notify-restart-'));
      const own = await startThrowawayStack(dataRoot, { temporalAddress: testStack().temporalAddress });
      const server = own.mongoServer!;
      const ownConfig: Config = { ...config, mongoUrl: own.mongoUrl };
      const { mongo: ownMongo, stores: ownStores } = await openStores(ownConfig);
      assert.deepEqual(
        {
          poll: MONGO_CLIENT_OPTIONS.serverMonitoringMode,
          heartbeat: MONGO_CLIENT_OPTIONS.heartbeatFrequencyMS,
        },
        { poll: 'poll', heartbeat: 2000 },
      );
      let api: ApiHandle | undefined;
      const worker = await startTestWorker(ownConfig, ownStores);
      let stopLoad = false;
      try {
        const started = await startTestApi(ownConfig);
        api = started.api;
        const alice: ApiClient = started.client.as('alice', 'acme');
        // Load on both clients while the server goes away: the API's reads, the worker's claim writes.
        const load = Array.from({ length: 8 }, async (_, i) => {
          for (let n = 0; !stopLoad; n++) {
            await alice.get('/api/v1/runs').catch(() => undefined);
            await ownStores.claims.tryMark(`load|${i}|${n}`, 'load').catch(() => undefined);
          }
        });
        for (let round = 1; round <= 3; round++) {
          await sleep(1000 + Math.random() * 1000);
          await server.restart();
          // The API's client: a launch, which writes the run and its first event. (The minute bounds a hang; the
          // clients find the server again on their 2 s heartbeat.)
          let launch: { status: number; text: string } | undefined;
          await waitUntil(
            `the API's client to work again after restart ${round}`,
            async () =>
              (launch = await alice.post('/api/v1/runs', { title: `after restart ${round}` })).status === 201,
            { timeoutMs: 60_000, intervalMs: 250, seen: () => `${launch?.status} ${launch?.text}` },
          );
          // The worker's client (and this suite's): an alert dispatched through claims and the webhook.
          await waitUntil(
            `this suite's client to work again after restart ${round}`,
            async () => {
              await ownStores.claims.isMarked('ping'); // an answer either way: the client reaches the server
              return true;
            },
            { timeoutMs: 60_000, intervalMs: 250, errorsMeanNotYet: true },
          );
          const alert = routeDecisionAlert(
            {
              runId: 'run_restart',
              teamId: 'acme',
              decisionId: `r${round}_${Date.now()}`,
              error: { code: 'x', message: 'y' },
            },
            new Date().toISOString(),
          );
          let result: string | undefined;
          let failure: unknown;
          client.workflow
            .execute(operatorAlertWorkflow, {
              workflowId: operatorAlertWorkflowId(alert.episodeKey),
              taskQueue: ownConfig.temporalTaskQueue,
              args: [alert],
            })
            .then(
              (answer) => (result = answer),
              (err: unknown) => (failure = err),
            );
          // The bound only guards a hang: a worker that never finds the restarted server again.
          await waitUntil(
            `the worker to finish the alert of round ${round}`,
            () => {
              if (failure) throw failure;
              return result;
            },
            { timeoutMs: 60_000 },
          );
          assert.equal(result, 'delivered', `round ${round}`);
        }
        stopLoad = true;
        await Promise.all(load);
      } finally {
        stopLoad = true;
        await api?.close();
        await worker.stop();
        await ownMongo.client.close();
        await own.stop();
        rmSync(dataRoot, { recursive: true, force: true });
      }
    });
  });
});
