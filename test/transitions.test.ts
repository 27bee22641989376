// Concurrent conflicting transitions on the real servers: exactly one wins, the loser is a 409 that wrote
// nothing (no phantom events), and the run's health workflow follows the winner.
import assert from 'node:assert/strict';
import { defaultPayloadConverter } from '@temporalio/common';
import { createOutcomeEmitter, episodeOptions } from '../client/emitter';
import { createInteractionSignaler } from '../client/interaction';
import { createRunsService, type RunsServiceDeps } from '../runs/service';
import { IllegalTransitionError } from '../domain/runStatus';
import type { Stores } from '../store';
import { startFamilyStack, sweepActivitiesOf, type FamilyStack } from './support/familyStack';
import { ApiClient, startTestApi } from './support/harness';
import { startSilentTemporal } from './support/silentTemporal';
import { waitUntil } from './support/waitUntil';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Op = 'pause' | 'park' | 'soft-pause' | 'complete' | 'fail' | 'cancel';
const BODY: Record<Op, unknown> = {
  pause: { prompt: 'Ship it?' },
  park: { wall: 'daily_tokens' },
  'soft-pause': {},
  complete: { finalAnswer: 'done' },
  fail: { error: { code: 'oom', message: 'killed' } },
  cancel: {},
};
/** The events an operation writes, and the health phase it leads to. */
const WRITES: Record<Op, { events: string[]; phase: string }> = {
  pause: { events: ['human_input_requested', 'run_paused'], phase: 'paused' },
  park: { events: ['run_paused'], phase: 'paused' },
  'soft-pause': { events: ['run_paused'], phase: 'paused' },
  complete: { events: ['run_finished'], phase: 'terminal' },
  fail: { events: ['run_failed'], phase: 'terminal' },
  cancel: { events: ['run_cancelled'], phase: 'terminal' },
};

describe('concurrent transitions', function () {
  let stack: FamilyStack;
  let stores: Stores;
  let alice: ApiClient;

  before(async () => {
    stack = await startFamilyStack({
      STALL_AFTER_SECONDS: '3600',
      HEALTH_REAP_SECONDS: '3600',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ stores } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  /** APIs a case started of its own, closed with the stack. */
  const ownApis: { close(): Promise<void> }[] = [];
  after(async () => {
    for (const api of ownApis.splice(0)) await api.close();
    await stack?.stop();
  });

  const pairs: [Op, Op][] = [
    ['pause', 'complete'],
    ['complete', 'pause'],
    ['soft-pause', 'fail'],
    ['park', 'cancel'],
    ['cancel', 'park'],
    ['pause', 'soft-pause'],
  ];

  it('an event whose run ends between its read and its write is refused, and taken back: nothing after the end', async () => {
    // An API of its own holds the event's read of the run until the run has ended.
    let ended!: () => void;
    const runEnded = new Promise<void>((resolve) => (ended = resolve));
    let held: string | undefined;
    const raceApi = await startTestApi(stack.config, {
      stores: (built) => ({
        ...built,
        runs: {
          ...built.runs,
          getForTeam: async (...args) => {
            const run = await built.runs.getForTeam(...args);
            if (args[1] === held) {
              held = undefined;
              await runEnded;
            }
            return run;
          },
        },
      }),
    });
    ownApis.push(raceApi.api);
    const racer = raceApi.client.as('alice', 'acme');
    const created = await racer.post('/api/v1/runs', { title: 'Ends mid-event' });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    held = id;
    const event = racer.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'late' });
    await waitUntil('the event read the run', () => held === undefined);
    const completed = await alice.post(`/api/v1/runs/${id}/complete`, { finalAnswer: 'done' });
    assert.equal(completed.status, 200, completed.text);
    ended();
    const late = await event;
    assert.equal(late.status, 409, late.text);
    const types = (await stores.events.listForRun(id)).map((e) => e.type);
    assert.equal(types.at(-1), 'run_finished', types.join(', '));
    assert.ok(!types.includes('node_started'), types.join(', '));
  });

  it('two conflicting transitions: one 409, no phantom events, health follows the winner', async () => {
    // The two requests race for real only when both read the run before either writes: on a loaded machine one
    // can finish first, and where the second op is legal after the first (fail after a soft-pause) both succeed.
    // An API of its own holds each raced run's read until the other request has read it too.
    const racing = new Map<string, { arrived: number; bothRead: Promise<void>; release: () => void }>();
    const raceApi = await startTestApi(stack.config, {
      stores: (built) => ({
        ...built,
        runs: {
          ...built.runs,
          getForTeam: async (...args) => {
            const race = racing.get(args[1]);
            if (race && ++race.arrived === 2) race.release();
            await race?.bothRead;
            return built.runs.getForTeam(...args);
          },
        },
      }),
    });
    ownApis.push(raceApi.api);
    const racer = raceApi.client.as('alice', 'acme');
    const runs: { id: string; winner: Op; loser: Op }[] = [];
    for (const [a, b] of pairs) {
      for (let i = 0; i < 2; i++) {
        // Through the racing API too: its batcher sends the progress ahead of the race's status change.
        const created = await racer.post('/api/v1/runs', { title: `${a} vs ${b}` });
        assert.equal(created.status, 201, created.text);
        const id = created.body.id as string;
        // Health exists and is active before the race, as for any running run.
        await racer.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'work' });
        let release!: () => void;
        const bothRead = new Promise<void>((resolve) => (release = resolve));
        racing.set(id, { arrived: 0, bothRead, release });
        const [ra, rb] = await Promise.all([
          racer.post(`/api/v1/runs/${id}/${a}`, BODY[a]),
          racer.post(`/api/v1/runs/${id}/${b}`, BODY[b]),
        ]);
        racing.delete(id);
        const statuses = [ra.status, rb.status].sort();
        assert.equal(
          statuses[1],
          409,
          `${a} vs ${b}: one must lose (${ra.status} ${ra.text} / ${rb.status} ${rb.text})`,
        );
        assert.ok(statuses[0] >= 200 && statuses[0] < 300, `${a} vs ${b}: one must win (${statuses})`);
        runs.push(ra.status === 409 ? { id, winner: b, loser: a } : { id, winner: a, loser: b });
      }
    }

    for (const { id, winner, loser } of runs) {
      const types = (await stores.events.listForRun(id)).map((e) => e.type);
      assert.deepEqual(
        types,
        ['run_started', 'node_started', ...WRITES[winner].events],
        `${winner} beat ${loser} on ${id}: the loser's events must not be written`,
      );
    }

    // Health settles on the winner's phase and stays there (the loser never signalled it).
    const phaseOf = async (id: string) => (await alice.get(`/api/v1/runs/${id}/health`)).body?.phase;
    for (const { id, winner } of runs) {
      let phase: unknown;
      await waitUntil(
        `the health of ${id} at ${winner}'s phase`,
        async () => (phase = await phaseOf(id)) === WRITES[winner].phase,
        { timeoutMs: 60_000, seen: () => phase },
      );
    }
    await sleep(1000);
    const phases = await Promise.all(runs.map(async (r) => ({ ...r, phase: await phaseOf(r.id) })));
    assert.deepEqual(
      phases.filter((p) => p.phase !== WRITES[p.winner].phase),
      [],
      'health must follow the winning transition',
    );
  }).timeout(120_000);

  /**
   * A service whose next status write dies (its worker killed after winning the revision), and one that works
   * (emitting the outcomes it owes, or not).
   */
  function dyingOnce({ emitting, after = 'win' }: { emitting: boolean; after?: 'win' | 'status write' }) {
    const caller = { userId: 'alice', teamId: 'acme' };
    let dies = true;
    const dieOnce = () => {
      if (!dies) return;
      dies = false;
      throw new Error(`worker killed after the ${after}`);
    };
    const runs: RunsServiceDeps['runs'] = {
      ...stores.runs,
      async transition(...args) {
        if (after === 'win') dieOnce();
        return stores.runs.transition(...args);
      },
    };
    const events: RunsServiceDeps['events'] = {
      ...stores.events,
      async append(...args) {
        if (after === 'status write') dieOnce();
        return stores.events.append(...args);
      },
    };
    const silent = { emitRunOutcome: async () => undefined };
    return {
      caller,
      dying: createRunsService({ ...stores, runs, events, emitter: silent }),
      engine: createRunsService({
        ...stores,
        emitter: emitting
          ? createOutcomeEmitter({
              client: stack.client,
              taskQueue: stack.config.temporalTaskQueue,
              runs: stores.runs,
              options: episodeOptions(stack.config),
            })
          : silent,
      }),
    };
  }

  it('a transition whose writer died after winning is finished by the next caller, not left stuck', async () => {
    const { caller, dying, engine } = dyingOnce({ emitting: false });
    const run = await engine.create(caller, { title: 'half-done' });
    await assert.rejects(dying.softPause(caller, run._id), /worker killed/);
    assert.equal((await stores.runs.getById(run._id))?.status, 'running', 'the status write never landed');
    await assert.rejects(
      engine.complete(caller, run._id, 'late'),
      (err: unknown) => err instanceof IllegalTransitionError,
    );
    assert.equal((await stores.runs.getById(run._id))?.status, 'paused', 'the won transition was finished');
    const types = (await stores.events.listForRun(run._id)).map((e) => e.type);
    assert.deepEqual(types, ['run_started', 'run_paused']);
    await engine.resume(caller, run._id);
    assert.equal((await engine.complete(caller, run._id, 'ok')).status, 'finished', 'the run moves on');
  });

  it('an answer whose revision another request finished, the run then ended, is no loser: answered, never taken back', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const silent = { emitRunOutcome: async () => undefined };
    const engine = createRunsService({ ...stores, emitter: silent });
    const run = await engine.create(caller, { title: 'slow answer' });
    const { interactionId } = await engine.pause(caller, run._id, 'Ship?');
    // The answer wins its revision, then stalls before its status write.
    let won!: () => void;
    let release!: () => void;
    const claimed = new Promise<void>((resolve) => (won = resolve));
    const held = new Promise<void>((resolve) => (release = resolve));
    const slow: RunsServiceDeps['runs'] = {
      ...stores.runs,
      async transition(...args) {
        won();
        await held;
        return stores.runs.transition(...args);
      },
    };
    const answering = createRunsService({ ...stores, runs: slow, emitter: silent });
    const answered = answering.answer(caller, run._id, interactionId, 'yes');
    await claimed;
    // A cancel loses the revision and finishes the answer's transition; its retry ends the run.
    await assert.rejects(
      engine.cancel(caller, run._id),
      (err: unknown) => err instanceof IllegalTransitionError,
    );
    assert.equal(
      (await stores.runs.getById(run._id))?.status,
      'running',
      "the answer's transition was finished",
    );
    await engine.cancel(caller, run._id);
    release();
    await answered;
    assert.equal((await stores.interactions.get(run._id, interactionId))?.status, 'answered');
  });

  it('keeps only the current and the previous transition of a run, and never the answer', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const engine = createRunsService({ ...stores, emitter: { emitRunOutcome: async () => undefined } });
    const run = await engine.create(caller, { title: 'many pauses' });
    const rows = stack.mongo.db.collection('run_transitions');
    for (let i = 0; i < 6; i++) {
      await engine.softPause(caller, run._id);
      await engine.resume(caller, run._id);
      assert.ok((await rows.countDocuments({ runId: run._id })) <= 2, `after ${2 * (i + 1)} transitions`);
    }
    const answer = `the answer ${'x'.repeat(50_000)}`;
    const ended = await engine.complete(caller, run._id, answer);
    assert.equal(ended.finalAnswer, answer);
    assert.equal(ended.revision, 13);
    const kept = await rows.find({ runId: run._id }).toArray();
    assert.deepEqual(
      kept.map((r) => r.revision).sort((a, b) => a - b),
      [11, 12],
      'the last two revisions',
    );
    assert.ok(!JSON.stringify(kept).includes('the answer'), 'no transition row holds the answer');
    const finished = (await stores.events.listForRun(run._id)).find((e) => e.type === 'run_finished');
    assert.equal(finished?.data.finalAnswer, answer, 'the event still carries the answer');
    // A caller that read the run two transitions ago cannot win a revision whose row was removed.
    const stale = { ...ended, status: 'running' as const, revision: 10 };
    const staleRuns: RunsServiceDeps['runs'] = { ...stores.runs, getForTeam: async () => stale };
    const late = createRunsService({
      ...stores,
      runs: staleRuns,
      emitter: { emitRunOutcome: async () => undefined },
    });
    await assert.rejects(
      late.cancel(caller, run._id),
      (err: unknown) => err instanceof IllegalTransitionError,
    );
    assert.equal((await stores.runs.getById(run._id))?.status, 'finished');
    const types = (await stores.events.listForRun(run._id)).map((e) => e.type);
    assert.equal(types.filter((t) => t === 'run_cancelled').length, 0, 'the stale transition wrote nothing');
    assert.ok((await rows.countDocuments({ runId: run._id })) <= 2);
    // A stale complete stages no answer, and leaves no row the sweep would take for a writer that died.
    await assert.rejects(
      late.complete(caller, run._id, 'a stale answer'),
      (err: unknown) => err instanceof IllegalTransitionError,
    );
    assert.equal(await rows.countDocuments({ runId: run._id, open: true }), 0);
  });

  it('a complete whose writer died after winning is finished with its answer', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const silent = { emitRunOutcome: async () => undefined };
    let dies = true;
    const runs: RunsServiceDeps['runs'] = {
      ...stores.runs,
      async transition(...args) {
        if (dies) {
          dies = false;
          throw new Error('worker killed before the status write');
        }
        return stores.runs.transition(...args);
      },
    };
    const dying = createRunsService({ ...stores, runs, emitter: silent });
    const engine = createRunsService({ ...stores, emitter: silent });
    const run = await engine.create(caller, { title: 'half-done answer' });
    await assert.rejects(dying.complete(caller, run._id, 'the real answer'), /worker killed/);
    await assert.rejects(
      engine.cancel(caller, run._id),
      (err: unknown) => err instanceof IllegalTransitionError,
    );
    const ended = await stores.runs.getById(run._id);
    assert.equal(ended?.status, 'finished', 'the won transition was finished');
    assert.equal(ended?.finalAnswer, 'the real answer');
    const events = await stores.events.listForRun(run._id);
    assert.deepEqual(
      events.map((e) => e.type),
      ['run_started', 'run_finished'],
    );
    assert.equal(events[1].data.finalAnswer, 'the real answer');
  });

  it('an answer that loses to a cancel (409) leaves the question unanswered: nothing announces it later', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const silent = { emitRunOutcome: async () => undefined };
    const engine = createRunsService({ ...stores, emitter: silent });
    const run = await engine.create(caller, { title: 'cancelled while answered' });
    const { interactionId } = await engine.pause(caller, run._id, 'Ship it?');
    // The answer's process read the run waiting on the question; another process cancels it before the answer's
    // transition (its answer already stored).
    const interactions = {
      ...stores.interactions,
      recordAnswer: async (...args: Parameters<Stores['interactions']['recordAnswer']>) => {
        await engine.cancel(caller, run._id);
        return stores.interactions.recordAnswer(...args);
      },
    };
    const answering = createRunsService({ ...stores, interactions, emitter: silent });
    await assert.rejects(answering.answer(caller, run._id, interactionId, 'yes'), IllegalTransitionError);
    assert.equal((await stores.runs.getById(run._id))?.status, 'cancelled');
    const question = await stores.interactions.get(run._id, interactionId);
    assert.notEqual(question?.status, 'answered', 'a refused answer was stored');
    assert.equal(question?.answer, undefined);
  });

  it('a complete that loses its revision writes nothing on the run, not even its answer', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const silent = { emitRunOutcome: async () => undefined };
    const engine = createRunsService({ ...stores, emitter: silent });
    const run = await engine.create(caller, { title: 'lost complete' });
    // Someone else won revision 0 (its row is in) and has not written the status yet.
    const stalled = { ...stores.runs, transition: async () => null };
    const rival = createRunsService({ ...stores, runs: stalled, emitter: silent });
    await assert.rejects(rival.cancel(caller, run._id), IllegalTransitionError);
    const written: unknown[] = [];
    const watched = createRunsService({ ...stores, runs: observedRuns(stores, written), emitter: silent });
    await assert.rejects(
      watched.complete(caller, run._id, 'never staged'),
      (err: unknown) => err instanceof IllegalTransitionError,
    );
    const after = await stores.runs.getById(run._id);
    assert.equal(after?.status, 'cancelled', 'the rival transition was finished');
    assert.ok(!JSON.stringify(after).includes('never staged'), 'the loser left its answer on the run');
    assert.deepEqual(
      written.filter((w) => JSON.stringify(w).includes('never staged')),
      [],
      'the loser wrote its answer on the run before it lost',
    );
  });

  it('the retry of an operation whose first try died after winning finishes that try, and its outcome goes out', async () => {
    const { caller, dying, engine } = dyingOnce({ emitting: true });
    const run = await engine.create(caller, { title: 'retried fail' });
    const error = { code: 'oom', message: 'killed' };
    await assert.rejects(dying.fail(caller, run._id, error), /worker killed/);
    assert.equal((await stores.runs.getById(run._id))?.status, 'running', 'the status write never landed');
    // Told the run changed (it cannot tell its own first try from another request), after finishing that try.
    await assert.rejects(engine.fail(caller, run._id, error), IllegalTransitionError);
    assert.equal((await stores.runs.getById(run._id))?.status, 'failed');
    await stack.client.workflow.getHandle(`${run._id}:end`).describe();
    assert.deepEqual(
      (await stores.events.listForRun(run._id)).map((e) => e.type),
      ['run_started', 'run_failed'],
    );
  });

  it('a won transition nobody calls again is finished by the sweep, and its outcome goes out', async () => {
    const { caller, dying, engine } = dyingOnce({ emitting: true });
    const run = await engine.create(caller, { title: 'abandoned fail' });
    await assert.rejects(dying.fail(caller, run._id, { code: 'oom', message: 'killed' }), /worker killed/);
    const sweep = sweepActivitiesOf(stack);
    await sweep.sweepOnce();
    assert.equal(
      (await stores.runs.getById(run._id))?.status,
      'running',
      'a writer may still be at it: not yet',
    );
    // A pass minutes later, its writer long gone.
    const later = sweepActivitiesOf(stack, { now: () => new Date(Date.now() + 10 * 60_000) });
    const pass = await later.sweepOnce();
    assert.equal(pass.transitionsFinished, 1, JSON.stringify(pass));
    assert.equal((await stores.runs.getById(run._id))?.status, 'failed');
    // Started with the worker's episode options (its callback schedule and timeouts), not the defaults.
    const history = await stack.client.workflow.getHandle(`${run._id}:end`).fetchHistory();
    const [, options] = history.events![0].workflowExecutionStartedEventAttributes!.input!.payloads!;
    assert.deepEqual(defaultPayloadConverter.fromPayload(options), episodeOptions(stack.config));
    assert.deepEqual(
      (await stores.events.listForRun(run._id)).map((e) => e.type),
      ['run_started', 'run_failed'],
    );
    assert.equal((await later.sweepOnce()).transitionsFinished ?? 0, 0, 'once');
  });

  it('a transition whose writer died after its status write has its events written by the sweep', async () => {
    const { caller, dying } = dyingOnce({ emitting: true, after: 'status write' });
    // Through the API, so its health is watching it before it fails.
    const created = await alice.post('/api/v1/runs', { title: 'failed, untold' });
    const run = { _id: created.body.id as string };
    await alice.post(`/api/v1/runs/${run._id}/events`, { type: 'node_started', node: 'work' });
    await assert.rejects(dying.fail(caller, run._id, { code: 'oom', message: 'killed' }), /worker killed/);
    assert.equal((await stores.runs.getById(run._id))?.status, 'failed', 'the status write landed');
    const later = sweepActivitiesOf(stack, { now: () => new Date(Date.now() + 10 * 60_000) });
    const pass = await later.sweepOnce();
    assert.equal(pass.transitionsFinished, 1, JSON.stringify(pass));
    assert.deepEqual(
      (await stores.events.listForRun(run._id)).map((e) => e.type),
      ['run_started', 'node_started', 'run_failed'],
    );
    let phase: unknown;
    await waitUntil(
      'run health told the run ended',
      async () => (phase = (await alice.get(`/api/v1/runs/${run._id}/health`)).body?.phase) === 'terminal',
      { timeoutMs: 60_000, seen: () => phase },
    );
    await stack.client.workflow.getHandle(`${run._id}:end`).describe();
    assert.equal((await later.sweepOnce()).transitionsFinished ?? 0, 0, 'once');
  });

  it('a park whose writer died after its status write keeps its events though the run moved on twice before the sweep', async () => {
    const { caller, dying, engine } = dyingOnce({ emitting: false, after: 'status write' });
    const run = await engine.create(caller, { title: 'parked, untold, moved on' });
    await assert.rejects(dying.park(caller, run._id, 'daily_tokens'), /worker killed/);
    assert.equal((await stores.runs.getById(run._id))?.status, 'paused', 'the status write landed');
    // Within the sweep's grace, the run moves on: resumed, then parked again.
    await engine.resume(caller, run._id);
    await engine.park(caller, run._id, 'daily_tokens');
    const later = sweepActivitiesOf(stack, { now: () => new Date(Date.now() + 10 * 60_000) });
    const pass = await later.sweepOnce();
    assert.equal(pass.transitionsFinished, 1, JSON.stringify(pass));
    assert.deepEqual(
      (await stores.events.listForRun(run._id)).map((e) => e.type),
      ['run_started', 'run_paused', 'run_resumed', 'run_paused'],
    );
    assert.equal((await later.sweepOnce()).transitionsFinished ?? 0, 0, 'once');
  });

  it("a transition whose health signal failed is told to health again by the sweep: a resumed run's health does not stay paused", async () => {
    const created = await alice.post('/api/v1/runs', { title: 'resumed, health untold' });
    const runId = created.body.id as string;
    await alice.post(`/api/v1/runs/${runId}/events`, { type: 'node_started', node: 'work' });
    assert.equal((await alice.post(`/api/v1/runs/${runId}/soft-pause`, {})).status, 200);
    const phaseOf = async () => (await alice.get(`/api/v1/runs/${runId}/health`)).body?.phase;
    let phase: unknown;
    await waitUntil('health paused', async () => (phase = await phaseOf()) === 'paused', {
      timeoutMs: 60_000,
      seen: () => phase,
    });
    // Temporal away for the resume's signal: the resume itself succeeds.
    const away = createRunsService({
      ...stores,
      emitter: { emitRunOutcome: async () => undefined },
      health: {
        observe: async () => {
          throw new Error('Temporal away');
        },
        flushAll: async () => undefined,
      },
    });
    assert.equal((await away.resume({ userId: 'alice', teamId: 'acme' }, runId)).status, 'running');
    assert.equal(await phaseOf(), 'paused', 'health was not told');
    const later = sweepActivitiesOf(stack, { now: () => new Date(Date.now() + 10 * 60_000) });
    assert.equal((await later.sweepOnce()).transitionsFinished, 1);
    await waitUntil('health active again', async () => (phase = await phaseOf()) === 'active', {
      timeoutMs: 60_000,
      seen: () => phase,
    });
    assert.deepEqual(
      (await stores.events.listForRun(runId)).map((e) => e.type),
      ['run_started', 'node_started', 'run_paused', 'run_resumed'],
    );
  });

  it('a pause and an answer with Temporal unresponsive answer within the call deadline, and report what they could not start or tell', async function () {
    // Two calls' deadlines one after the other (the pause's starts, then the answer's close).
    this.timeout(150_000);
    const temporal = await startSilentTemporal();
    const unresponsive = temporal.client;
    try {
      const failures: string[] = [];
      const partitioned = createRunsService({
        ...stores,
        emitter: createOutcomeEmitter({
          client: unresponsive,
          taskQueue: stack.config.temporalTaskQueue,
          runs: stores.runs,
          options: episodeOptions(stack.config),
        }),
        interactionSignals: createInteractionSignaler(unresponsive, stack.config.temporalTaskQueue),
        onEmitError: (_runId, err) => void failures.push(String(err)),
      });
      const caller = { userId: 'alice', teamId: 'acme' };
      const run = await partitioned.create(caller, { title: 'Temporal away' });
      const { interactionId } = await partitioned.pause(caller, run._id, 'Ship it?');
      assert.equal((await partitioned.answer(caller, run._id, interactionId, 'yes')).status, 'running');
      assert.equal(failures.length, 2, `the outcome's start and the close's signal failed: ${failures}`);
    } finally {
      await temporal.close();
    }
  });

  it('a complete whose writer died between its win and its answer is taken over by the next operation', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const silent = { emitRunOutcome: async () => undefined };
    const engine = createRunsService({ ...stores, emitter: silent });
    const run = await engine.create(caller, { title: 'answer never staged' });
    let claimed = false;
    const dying = createRunsService({
      ...stores,
      runTransitions: {
        ...stores.runTransitions,
        async claim(t) {
          claimed = await stores.runTransitions.claim(t);
          if (claimed) throw new Error('worker killed after winning the revision');
          return claimed;
        },
      },
      emitter: silent,
    });
    await assert.rejects(dying.complete(caller, run._id, 'lost with the worker'), /worker killed/);
    assert.ok(claimed, 'the dying complete won revision 0');
    // The next operation neither finishes a complete without its answer nor stays locked out: it wins.
    const cancelled = await engine.cancel(caller, run._id);
    assert.equal(cancelled.status, 'cancelled');
    assert.equal(cancelled.finalAnswer, undefined);
    const types = (await stores.events.listForRun(run._id)).map((e) => e.type);
    assert.deepEqual(types, ['run_started', 'run_cancelled'], 'no phantom run_finished');
  });
  it('two operations taking over a given-up revision at once: one wins, the other is a 409 that wrote nothing', async () => {
    const caller = { userId: 'alice', teamId: 'acme' };
    const silent = { emitRunOutcome: async () => undefined };
    const engine = createRunsService({ ...stores, emitter: silent });
    const run = await engine.create(caller, { title: 'two takers' });
    const dying = createRunsService({
      ...stores,
      runTransitions: {
        ...stores.runTransitions,
        async claim(t) {
          if (await stores.runTransitions.claim(t))
            throw new Error('worker killed after winning the revision');
          return false;
        },
      },
      emitter: silent,
    });
    await assert.rejects(dying.complete(caller, run._id, 'lost with the worker'), /worker killed/);
    // The pause has given the complete up and is about to remove its row when the cancel takes the revision.
    let atRemoval!: () => void;
    const pauseAtRemoval = new Promise<void>((resolve) => (atRemoval = resolve));
    let cancelDone!: () => void;
    const cancelled = new Promise<void>((resolve) => (cancelDone = resolve));
    const pausing = createRunsService({
      ...stores,
      runTransitions: {
        ...stores.runTransitions,
        async forget(...args) {
          if (args[1] === 0) {
            atRemoval();
            await cancelled;
          }
          return stores.runTransitions.forget(...args);
        },
      },
      emitter: silent,
    });
    const pause = pausing.pause(caller, run._id, 'Ship it?');
    pause.catch(() => undefined);
    await pauseAtRemoval;
    assert.equal((await engine.cancel(caller, run._id)).status, 'cancelled');
    cancelDone();
    await assert.rejects(pause, (err: unknown) => err instanceof IllegalTransitionError);
    assert.equal((await stores.runs.getById(run._id))?.status, 'cancelled');
    const types = (await stores.events.listForRun(run._id)).map((e) => e.type);
    assert.deepEqual(types, ['run_started', 'run_cancelled'], 'nothing of the pause');
  });
});

/** The runs store, recording every write's arguments into `written`. */
function observedRuns(stores: Stores, written: unknown[]): RunsServiceDeps['runs'] {
  const observed = { ...stores.runs } as Record<string, unknown>;
  for (const [name, fn] of Object.entries(stores.runs)) {
    if (typeof fn !== 'function' || /^(get|list|find)/.test(name)) continue;
    observed[name] = async (...args: unknown[]) => {
      written.push([name, ...args]);
      return (fn as (...a: unknown[]) => unknown).apply(stores.runs, args);
    };
  }
  return observed as RunsServiceDeps['runs'];
}
