// The emitter: the same outcome emitted many times starts one episode workflow, named by the episode id and
// findable by run, team and kind.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { MongoClient } from 'mongodb';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import type { Config } from '../config';
import { createRunsService } from '../runs/service';
import { createStores, type Stores } from '../store';
import { startWorkerStack, type WorkerStack } from './support/familyStack';
import { searchAttributes } from '../contract/searchAttributes';
import { waitUntil } from './support/waitUntil';

describe('outcome emitter', () => {
  let stack: WorkerStack;
  let config: Config;
  let stores: Stores;
  let client: Client;

  before(async () => {
    stack = await startWorkerStack({});
    ({ config, stores, client } = stack);
  });
  after(() => stack?.stop());

  const caller = { userId: 'alice', teamId: 'acme' };
  const emitterAndEngine = () => {
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    });
    return { emitter, engine: createRunsService({ ...stores, emitter }) };
  };

  it('five concurrent emits of one outcome start one workflow, and a later emit after it closed starts none', async () => {
    const { emitter, engine } = emitterAndEngine();
    const run = await engine.create(caller, { title: 'five emits' });
    await engine.complete(caller, run._id, 'answer'); // the engine's own emit is the first
    const results = await Promise.all(Array.from({ length: 5 }, () => emitter.emitRunOutcome(run._id)));
    assert.ok(results.every((r) => r?.episodeId === `${run._id}:end`));
    assert.equal(results.filter((r) => r?.started).length, 0, 'the engine already started it');

    const handle = client.workflow.getHandle(`${run._id}:end`);
    await handle.result();
    const again = await emitter.emitRunOutcome(run._id);
    assert.equal(again?.started, false, 'a closed episode is not started again by an emitter');

    const executions = [];
    for await (const execution of client.workflow.list({ query: `WorkflowId = '${run._id}:end'` })) {
      executions.push(execution);
    }
    assert.equal(executions.length, 1);
  });

  it('of five concurrent first emits exactly one starts the workflow', async () => {
    const { emitter } = emitterAndEngine();
    // An engine whose own emit goes nowhere, so the five below race for the first start.
    const silent = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    const run = await silent.create(caller, { title: 'race' });
    await silent.cancel(caller, run._id);
    const results = await Promise.all(Array.from({ length: 5 }, () => emitter.emitRunOutcome(run._id)));
    assert.equal(results.filter((r) => r?.started).length, 1);
  });

  it('the episode workflow carries run, team and kind search attributes', async () => {
    const { engine } = emitterAndEngine();
    const run = await engine.create(caller, { title: 'searchable' });
    await engine.fail(caller, run._id, { code: 'tool_crashed', message: 'boom' });
    const description = await client.workflow.getHandle(`${run._id}:end`).describe();
    assert.equal(description.typedSearchAttributes.get(searchAttributes.runId), run._id);
    assert.equal(description.typedSearchAttributes.get(searchAttributes.teamId), 'acme');
    assert.equal(description.typedSearchAttributes.get(searchAttributes.outcomeKind), 'run_failed');
  });

  it("a pause's episode starts while the run's health signal is still on its way", async () => {
    // Health is told of the pause and the episode is started; neither waits for the other (under a burst, a
    // signal-with-start can take seconds, and the person waiting for the push should not).
    let release = () => {};
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding = false;
    const health = {
      observe: async () => {
        if (holding) await held;
      },
      flushAll: async () => {},
    };
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: stores.runs,
      options: episodeOptions(config),
    });
    const engine = createRunsService({ ...stores, emitter, health });
    const run = await engine.create(caller, { title: 'health held' });
    holding = true;
    const paused = engine.pause(caller, run._id, 'Ship it?');
    try {
      await waitUntil('the pause episode started', async () => {
        for await (const execution of client.workflow.list({
          query: `WorkflowType = 'episodeWorkflow' AND FlowRunId = '${run._id}'`,
        }))
          return execution;
        return undefined;
      });
    } finally {
      release();
    }
    await paused;
  });

  it('a pause reads its run once: the outcome is built from the run its transition wrote', async () => {
    const monitored = new MongoClient(config.mongoUrl, { monitorCommands: true });
    await monitored.connect();
    try {
      const watched = createStores(monitored.db(config.mongoDb), {
        claimGraceSeconds: config.claimGraceSeconds,
      });
      const emitter = createOutcomeEmitter({
        client,
        taskQueue: config.temporalTaskQueue,
        runs: watched.runs,
        options: episodeOptions(config),
      });
      const engine = createRunsService({ ...watched, emitter });
      const run = await engine.create(caller, { title: 'read once' });
      const runReads: string[] = [];
      monitored.on('commandStarted', (e) => {
        if (e.commandName === 'find' && e.command.find === 'runs')
          runReads.push(JSON.stringify(e.command.filter));
      });
      const { interactionId } = await engine.pause(caller, run._id, 'Ship it?');
      assert.equal(runReads.length, 1, `the run read once (the caller's load): ${runReads.join(', ')}`);
      const started = await client.workflow.getHandle(`${run._id}:input:${interactionId}`).describe();
      assert.equal(started.type, 'episodeWorkflow');
      await client.workflow.getHandle(`interaction|${interactionId}`).describe();
    } finally {
      await monitored.close();
    }
  });

  it('a running run emits nothing; an operator soft-pause is its own episode', async () => {
    const { emitter, engine } = emitterAndEngine();
    const run = await engine.create(caller, { title: 'soft' });
    assert.equal(await emitter.emitRunOutcome(run._id), undefined);
    await engine.softPause(caller, run._id);
    const result = await emitter.emitRunOutcome(run._id);
    assert.equal(result?.episodeId, `${run._id}:soft-pause:1`);
  });
});
