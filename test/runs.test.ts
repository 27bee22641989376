// Runs through the API: every legal and illegal transition, the one-write pause, auth and team scoping.
import assert from 'node:assert/strict';
import { ASSISTANT_WATCHERS_PER_RUN, FINAL_ANSWER_LISTED_CHARS } from '../domain/run';
import type { ApiHandle } from '../api/server';
import { ApiClient, openStores, startTestApi } from './support/harness';
import { signToken } from './support/tokens';
import { TEST_JWT_SECRET, testConfig } from './support/stack';
import { MongoClient } from 'mongodb';
import { createEpisodeView, EPISODE_READS_IN_FLIGHT } from '../api/episodesView';
import { createStores, type Stores } from '../store';

type State =
  | 'running'
  | 'paused:human_input'
  | 'paused:usage_park'
  | 'paused:operator'
  | 'finished'
  | 'failed'
  | 'cancelled';
type Op = 'pause' | 'park' | 'soft-pause' | 'answer' | 'resume' | 'complete' | 'fail' | 'cancel';

const STATES: State[] = [
  'running',
  'paused:human_input',
  'paused:usage_park',
  'paused:operator',
  'finished',
  'failed',
  'cancelled',
];
const OPS: Op[] = ['pause', 'park', 'soft-pause', 'answer', 'resume', 'complete', 'fail', 'cancel'];

/** The status machine as the contract states it: the status each legal (state, op) leads to. */
const LEGAL: Partial<Record<State, Partial<Record<Op, string>>>> = {
  running: {
    pause: 'paused',
    park: 'paused',
    'soft-pause': 'paused',
    complete: 'finished',
    fail: 'failed',
    cancel: 'cancelled',
  },
  'paused:human_input': { answer: 'running', fail: 'failed', cancel: 'cancelled' },
  'paused:usage_park': { resume: 'running', fail: 'failed', cancel: 'cancelled' },
  'paused:operator': { resume: 'running', fail: 'failed', cancel: 'cancelled' },
};

describe('runs API', function () {
  let api: ApiHandle;
  let alice: ApiClient;
  let mongo: MongoClient;
  let stores: Stores;
  let mongoDb: string;

  before(async () => {
    const config = testConfig();
    mongoDb = config.mongoDb;
    const started = await startTestApi(config);
    api = started.api;
    alice = started.client.as('alice', 'acme');
    ({
      mongo: { client: mongo },
      stores,
    } = await openStores(config));
  });

  after(async () => {
    await api?.close();
    await mongo?.close();
  });

  const bodyFor = (op: Op): unknown =>
    ({
      pause: { prompt: 'Approve the deploy?' },
      park: { wall: 'daily_tokens' },
      complete: { finalAnswer: 'done' },
      fail: { error: { code: 'tool_crashed', message: 'boom' } },
    })[op as string] ?? {};

  async function runIn(state: State): Promise<{ id: string; interactionId: string }> {
    const created = await alice.post('/api/v1/runs', { title: `in ${state}` });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    // Every run first pauses for a human once, so "answer" always has a real interaction to name.
    const paused = await alice.post(`/api/v1/runs/${id}/pause`, bodyFor('pause'));
    assert.equal(paused.status, 200, paused.text);
    const interactionId = paused.body.interactionId as string;
    if (state === 'paused:human_input') return { id, interactionId };
    const answered = await alice.post(`/api/v1/runs/${id}/interactions/${interactionId}/answer`, {
      answer: 'yes',
    });
    assert.equal(answered.status, 200, answered.text);
    const setup: Partial<Record<State, Op>> = {
      'paused:usage_park': 'park',
      'paused:operator': 'soft-pause',
      finished: 'complete',
      failed: 'fail',
      cancelled: 'cancel',
    };
    const op = setup[state];
    if (op) {
      const res = await alice.post(`/api/v1/runs/${id}/${op}`, bodyFor(op));
      assert.equal(res.status, 200, res.text);
    }
    return { id, interactionId };
  }

  for (const state of STATES) {
    for (const op of OPS) {
      const expected = LEGAL[state]?.[op];
      it(`${state} + ${op} → ${expected ?? '409'}`, async () => {
        const { id, interactionId } = await runIn(state);
        const path =
          op === 'answer'
            ? `/api/v1/runs/${id}/interactions/${interactionId}/answer`
            : `/api/v1/runs/${id}/${op}`;
        const res = await alice.post(path, op === 'answer' ? { answer: 'ok' } : bodyFor(op));
        const after = await alice.get(`/api/v1/runs/${id}`);
        if (expected) {
          assert.equal(res.status, 200, res.text);
          assert.equal(after.body.status, expected);
        } else {
          assert.equal(res.status, 409, res.text);
          assert.match(res.body.error, /cannot|not waiting|already/);
          assert.equal(after.body.status, state.split(':')[0], 'an illegal transition changes nothing');
        }
      });
    }
  }

  it('pause writes the interaction, human_input_requested then run_paused, and the paused checkpoint', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'one write' });
    const id = created.body.id as string;
    const res = await alice.post(`/api/v1/runs/${id}/pause`, { prompt: 'Ship it?' });
    const interactionId = res.body.interactionId as string;

    const interaction = await stores.interactions.get(id, interactionId);
    assert.equal(interaction?.status, 'pending');
    assert.equal(interaction?.prompt, 'Ship it?');

    const types = (await stores.events.listForRun(id)).map((e) => e.type);
    assert.deepEqual(types.slice(-2), ['human_input_requested', 'run_paused']);

    const run = await stores.runs.getById(id);
    assert.equal(run?.status, 'paused');
    assert.equal(run?.checkpoint?.status, 'paused');
    assert.equal(run?.pause?.interactionId, interactionId);
    assert.equal(run?.pause?.reason, 'human_input');
  });

  it('launch takes a whsec_ secret of its own: the base64 of 24 to 64 bytes', async () => {
    for (const bytes of [24, 31, 64]) {
      const secret = `whsec_${Buffer.alloc(bytes, 7).toString('base64')}`;
      const created = await alice.post('/api/v1/runs', {
        callback: { url: 'https://hooks.example.com/flow', secret },
      });
      assert.equal(created.status, 201, `${bytes} bytes: ${created.text}`);
    }
  });

  it('launch returns a generated whsec_ callback secret once and never shows it again', async () => {
    const created = await alice.post('/api/v1/runs', { callback: { url: 'https://hooks.example.com/flow' } });
    assert.equal(created.status, 201);
    assert.match(created.body.callback.secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    const fetched = await alice.get(`/api/v1/runs/${created.body.id}`);
    assert.deepEqual(fetched.body.callback, { url: 'https://hooks.example.com/flow' });
    assert.doesNotMatch(fetched.text, /whsec_/);
  });

  it('refuses bad bodies with 400 and a clear message, and stores nothing', async () => {
    const before = (await alice.get('/api/v1/runs?limit=200')).body.runs.length;
    for (const body of [
      { callback: { url: 'ftp://example.com/x' } },
      { callback: { url: 'https://user:pw@example.com/x' } },
      { budget: { limit: -1 } },
      { title: 42 },
      { unknown: true },
      { callback: { url: 'https://hooks.example.com/flow', secret: `whsec_${'A'.repeat(1000)}` } },
      // Not the base64 of 24 to 64 bytes: 66 bytes, and a length no base64 has.
      {
        callback: {
          url: 'https://hooks.example.com/flow',
          secret: `whsec_${Buffer.alloc(66).toString('base64')}`,
        },
      },
      { callback: { url: 'https://hooks.example.com/flow', secret: `whsec_${'A'.repeat(33)}` } },
    ]) {
      const res = await alice.post('/api/v1/runs', body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.match(res.body.error, /^invalid request/);
    }
    const bad = await alice.request('POST', '/api/v1/runs', '{"title":', {
      'content-type': 'application/json',
    });
    assert.equal(bad.status, 400);
    assert.equal((await alice.get('/api/v1/runs?limit=200')).body.runs.length, before);
  });

  it('progress events: accepted, engine event types refused, usage needs spent', async () => {
    const { id } = await runIn('running');
    assert.equal(
      (await alice.post(`/api/v1/runs/${id}/events`, { type: 'node_started', node: 'plan' })).status,
      201,
    );
    assert.equal((await alice.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 3.5 })).status, 201);
    assert.equal((await alice.post(`/api/v1/runs/${id}/events`, { type: 'usage' })).status, 400);
    for (const type of ['run_started', 'run_finished', 'human_input_requested', 'run_resumed']) {
      const refused = await alice.post(`/api/v1/runs/${id}/events`, { type });
      assert.equal(refused.status, 400, `${type}: ${refused.text}`);
    }
  });

  it('assistant watches: PUT then DELETE; unknown run is 404', async () => {
    const { id } = await runIn('running');
    assert.equal((await alice.put(`/api/v1/assistants/asst_1/watches/${id}`)).status, 200);
    assert.equal(await stores.watches.hasActiveWatch('acme', id), true);
    assert.equal((await alice.delete(`/api/v1/assistants/asst_1/watches/${id}`)).status, 204);
    assert.equal(await stores.watches.hasActiveWatch('acme', id), false);
    assert.equal((await alice.put('/api/v1/assistants/asst_1/watches/run_nope')).status, 404);
  });

  it('a run holds at most ASSISTANT_WATCHERS_PER_RUN watches: the next is 409 and stores nothing; a removal frees a place', async () => {
    const { id } = await runIn('running');
    const watch = (n: number) => alice.put(`/api/v1/assistants/asst_${n}/watches/${id}`);
    for (let n = 0; n < ASSISTANT_WATCHERS_PER_RUN; n++) assert.equal((await watch(n)).status, 200);
    const refused = await watch(ASSISTANT_WATCHERS_PER_RUN);
    assert.equal(refused.status, 409, refused.text);
    assert.match(refused.body.error, /at most 100 assistants/);
    assert.equal(
      await stores.watches.exists('acme', `asst_${ASSISTANT_WATCHERS_PER_RUN}`, id),
      false,
      'no watch row',
    );
    assert.equal((await watch(0)).status, 200, 'a watch already held is held again');
    const run = (await alice.get(`/api/v1/runs/${id}`)).body;
    assert.equal(run.assistantWatchers.length, ASSISTANT_WATCHERS_PER_RUN);
    assert.equal((await alice.delete(`/api/v1/assistants/asst_0/watches/${id}`)).status, 204);
    assert.equal((await watch(ASSISTANT_WATCHERS_PER_RUN)).status, 200);
  });

  it("the standby veto reads the run's own tenant: a watch row of another team naming the run vetoes nothing", async () => {
    const { id } = await runIn('running');
    await mongo
      .db(mongoDb)
      .collection('assistant_run_watches')
      .insertOne({
        _id: `asst_x|${id}`,
        assistantId: 'asst_x',
        runId: id,
        teamId: 'other',
        active: true,
      } as never);
    assert.equal(await stores.watches.hasActiveWatch('acme', id), false);
    assert.equal(await stores.watches.hasActiveWatch('other', id), true);
  });

  describe('paging', () => {
    /** Every page of a listing from the first on, following nextBefore: the ids in the order shown. */
    async function allPages(client: ApiClient, path: string, key: string, limit: number): Promise<string[]> {
      const ids: string[] = [];
      let before: string | undefined;
      for (let page = 0; page < 100; page++) {
        const sep = path.includes('?') ? '&' : '?';
        const res = await client.get(
          `${path}${sep}limit=${limit}${before ? `&before=${encodeURIComponent(before)}` : ''}`,
        );
        assert.equal(res.status, 200, res.text);
        const rows = res.body[key] as Record<string, string>[];
        assert.ok(rows.length <= limit);
        ids.push(...rows.map((row) => row.id ?? row.episodeId));
        before = res.body.nextBefore as string | undefined;
        if (!before) return ids;
        assert.equal(rows.length, limit, 'a page with a next one is full');
      }
      throw new Error('no last page');
    }

    /** Newest first, ties in time by id, descending: the order every listing pages in. */
    const newestFirst = (rows: { id: string; at: Date }[]): string[] =>
      [...rows]
        .sort((a, b) => b.at.getTime() - a.at.getTime() || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
        .map((row) => row.id);

    it('GET /runs pages newest first by cursor; ties in createdAt neither skip nor repeat a run', async () => {
      const team = `paging_${Date.now()}`;
      const bob = alice.as('bob', team);
      const base = Date.now() - 3_600_000;
      // 11 runs over 4 distinct times: runs of 4 and 3 share a millisecond, so page ends fall inside ties.
      const times = [0, 0, 0, 0, 1, 2, 2, 2, 3, 3, 3].map((i) => new Date(base + i * 1000));
      const seeded = times.map((at, i) => ({ id: `run_page_${team}_${String(i).padStart(2, '0')}`, at }));
      for (const { id, at } of seeded)
        await stores.runs.insert({
          _id: id,
          teamId: team,
          ownerId: 'bob',
          title: id,
          status: 'running',
          revision: 0,
          pauseCount: 0,
          createdAt: at,
          updatedAt: at,
        } as never);
      // Another team's runs at the same times stay out of every page.
      for (const { id, at } of seeded.slice(0, 5))
        await stores.runs.insert({
          ...(await stores.runs.getById(id))!,
          _id: `${id}_x`,
          teamId: `${team}_x`,
          createdAt: at,
        });
      const expected = newestFirst(seeded);
      for (const limit of [1, 2, 3, 4, 5, 20]) {
        assert.deepEqual(await allPages(bob, '/api/v1/runs', 'runs', limit), expected, `limit ${limit}`);
      }
      const first = await bob.get('/api/v1/runs?limit=3');
      assert.equal(typeof first.body.nextBefore, 'string');
      assert.equal((await bob.get('/api/v1/runs')).body.nextBefore, undefined, 'one default page holds 11');
    });

    it("GET /runs lists each run in a few KB at the launch's largest: its ladder, watches and error are whole on GET /runs/:id", async () => {
      const dana = alice.as('dana', `largest_${Date.now()}`);
      const longId = (n: number) => `${n}`.padStart(128, 'i');
      const at = new Date();
      const ids: string[] = [];
      for (let n = 0; n < 20; n++) {
        const { body: run } = await dana.post('/api/v1/runs', {
          title: 't'.repeat(500),
          watchedIssueIds: Array.from({ length: 100 }, (_, i) => longId(i)),
          escalation: {
            rungs: Array.from({ length: 5 }, (_, r) => ({
              afterSeconds: 60 * (r + 1),
              to: Array.from({ length: 50 }, (_, u) => `${u}`.padStart(256, 'u')),
              via: 'push',
            })),
          },
        });
        assert.ok(run.id, JSON.stringify(run).slice(0, 200));
        ids.push(run.id as string);
        await stores.runs.insert({
          ...(await stores.runs.getById(run.id))!,
          _id: `${run.id}_failed`,
          status: 'failed',
          error: { code: 'x', message: 'm'.repeat(10_000) },
          assistantWatchers: Array.from({ length: 100 }, (_, i) => longId(i)),
          createdAt: at,
        });
      }
      const listed = await dana.get('/api/v1/runs?limit=40');
      assert.equal(listed.body.runs.length, 40);
      assert.ok(listed.text.length < 40 * 5_000, `a page of 40 runs is ${listed.text.length} characters`);
      const failed = (
        listed.body.runs as { status: string; error: { message: string }; errorMessageTruncated?: true }[]
      ).find((r) => r.status === 'failed')!;
      assert.equal(failed.error.message.length, 1000);
      assert.equal(failed.errorMessageTruncated, true);
      const whole = (await dana.get(`/api/v1/runs/${ids[0]}_failed`)).body;
      assert.equal(whole.error.message.length, 10_000);
      assert.equal(whole.escalation.rungs.length, 5);
      assert.equal(whole.watchedIssueIds.length, 100);
      assert.equal(whole.assistantWatchers.length, 100);
    });

    it('GET /runs lists the longest final answers by their first 1,000 characters (the whole one is on GET /runs/:id)', async () => {
      const carol = alice.as('carol', `answers_${Date.now()}`);
      const long =
        'é'.repeat(FINAL_ANSWER_LISTED_CHARS - 1) +
        '😀' +
        'x'.repeat(1_000_000 - 2 * FINAL_ANSWER_LISTED_CHARS);
      const ids: string[] = [];
      for (const finalAnswer of [long, 'Deployed v2.', long]) {
        const { body: run } = await carol.post('/api/v1/runs', { title: 'answers' });
        const done = await carol.post(`/api/v1/runs/${run.id}/complete`, { finalAnswer });
        assert.equal(done.status, 200, done.text);
        ids.push(run.id as string);
      }
      const listed = await carol.get('/api/v1/runs?limit=3');
      assert.equal(listed.status, 200, listed.text);
      assert.ok(listed.text.length < 3 * 16_000, `a page of 3 runs is ${listed.text.length} characters`);
      const byId = new Map((listed.body.runs as Record<string, unknown>[]).map((r) => [r.id, r]));
      const cut = byId.get(ids[0])!;
      // Cut before the emoji whose surrogate pair would straddle the bound: never half a character.
      assert.equal(cut.finalAnswer, long.slice(0, FINAL_ANSWER_LISTED_CHARS - 1));
      assert.equal(cut.finalAnswerTruncated, true);
      assert.equal(byId.get(ids[1])!.finalAnswer, 'Deployed v2.');
      assert.equal(byId.get(ids[1])!.finalAnswerTruncated, undefined);
      for (const run of byId.values())
        assert.deepEqual(
          Object.keys(run)
            .filter((key) => key.startsWith('finalAnswer'))
            .sort(),
          run.finalAnswerTruncated ? ['finalAnswer', 'finalAnswerTruncated'] : ['finalAnswer'],
        );
      // A run that ended before listings were written is listed the same way, its answer read apart.
      const ended = (await stores.runs.getById(ids[2]))!;
      await stores.runs.insert({
        ...ended,
        _id: `${ids[2]}_old`,
        listing: undefined,
        createdAt: new Date(0),
      });
      const old = (await carol.get('/api/v1/runs?limit=4')).body.runs.at(-1);
      assert.equal(old.id, `${ids[2]}_old`);
      assert.deepEqual([old.finalAnswer, old.finalAnswerTruncated], [cut.finalAnswer, true]);
      assert.deepEqual(
        (await stores.runs.getById(`${ids[2]}_old`))!.listing,
        ended.listing,
        'written back once',
      );
      const whole = await carol.get(`/api/v1/runs/${ids[0]}`);
      assert.equal(whole.body.finalAnswer, long);
      assert.equal(whole.body.finalAnswerTruncated, undefined);
    });

    it('GET /runs/:id/episodes pages newest first by cursor, across ties in recordedAt', async () => {
      const { body: run } = await alice.post('/api/v1/runs', { title: 'many episodes' });
      const base = Date.now() - 3_600_000;
      const seeded = [0, 1, 1, 1, 2, 3, 3].map((i, n) => ({
        id: `${run.id}:input:int_${n}`,
        at: new Date(base + i * 1000),
      }));
      await mongo
        .db(mongoDb)
        .collection('episodes')
        .insertMany(
          seeded.map(({ id, at }) => ({
            _id: id as never,
            runId: run.id,
            teamId: 'acme',
            kind: 'human_input_requested',
            outcome: {},
            recordedAt: at,
          })),
        );
      const expected = newestFirst(seeded);
      for (const limit of [1, 2, 3, 7]) {
        assert.deepEqual(
          await allPages(alice, `/api/v1/runs/${run.id}/episodes`, 'episodes', limit),
          expected,
          `limit ${limit}`,
        );
      }
      const page = await alice.get(`/api/v1/runs/${run.id}/episodes?limit=2`);
      assert.deepEqual(Object.keys(page.body).sort(), [
        'callbackAttemptsTruncated',
        'episodes',
        'nextBefore',
      ]);
    });

    it("a page of 200 episodes keeps a bounded number of store reads in flight (the pool every team's requests share)", async () => {
      const { body: run } = await alice.post('/api/v1/runs', { title: 'a long page' });
      const base = Date.now() - 3_600_000;
      await mongo
        .db(mongoDb)
        .collection('episodes')
        .insertMany(
          Array.from({ length: 200 }, (_, n) => ({
            _id: `${run.id}:input:int_${n}` as never,
            runId: run.id,
            teamId: 'acme',
            kind: 'human_input_requested',
            outcome: {},
            recordedAt: new Date(base + n),
          })),
        );
      const monitored = new MongoClient(testConfig().mongoUrl, { monitorCommands: true });
      try {
        let inFlight = 0;
        let most = 0;
        monitored.on('commandStarted', () => void (most = Math.max(most, ++inFlight)));
        monitored.on('commandSucceeded', () => void inFlight--);
        monitored.on('commandFailed', () => void inFlight--);
        const view = createEpisodeView(createStores(monitored.db(mongoDb), { claimGraceSeconds: 60 }));
        const page = await view.listForRun('acme', run.id, { limit: 200 });
        assert.equal(page.episodes.length, 200);
        assert.ok(most <= EPISODE_READS_IN_FLIGHT, `${most} store commands in flight at once`);
      } finally {
        await monitored.close();
      }
    });

    it('a bad limit or before is a 400 that says which', async () => {
      const { body: run } = await alice.post('/api/v1/runs', { title: 'bad pages' });
      for (const path of ['/api/v1/runs', `/api/v1/runs/${run.id}/episodes`]) {
        for (const [query, field] of [
          ['limit=0', 'limit'],
          ['limit=201', 'limit'],
          ['limit=2.5', 'limit'],
          ['limit=ten', 'limit'],
          ['limit=1&limit=2', 'limit'],
          ['before=not-a-cursor', 'before'],
          [`before=${Buffer.from('["x","y"]').toString('base64url')}`, 'before'],
          [`before=${'A'.repeat(300)}`, 'before'],
          ['after=x', 'after'],
        ]) {
          const res = await alice.get(`${path}?${query}`);
          assert.equal(res.status, 400, `${path}?${query}: ${res.text}`);
          assert.match(res.body.error, new RegExp(`^invalid request: .*${field}`), `${path}?${query}`);
        }
      }
    });
  });

  describe('auth', () => {
    it('no token, a bad signature and an expired token are each 401', async () => {
      const anonymous = new ApiClient(api.url);
      const noToken = await anonymous.get('/api/v1/runs');
      assert.equal(noToken.status, 401);
      assert.equal(noToken.body.error, 'missing bearer token');

      const forged = await signToken({ team: 'acme', sub: 'alice' }, 'not-the-secret');
      const badSig = await new ApiClient(api.url, forged).get('/api/v1/runs');
      assert.equal(badSig.status, 401);
      assert.equal(badSig.body.error, 'invalid token');

      const exp = Math.floor(Date.now() / 1000) - 60;
      const expired = await signToken({ team: 'acme', sub: 'alice', exp }, TEST_JWT_SECRET);
      const old = await new ApiClient(api.url, expired).get('/api/v1/runs');
      assert.equal(old.status, 401);
      assert.equal(old.body.error, 'token expired');

      const noTeam = await signToken({ sub: 'alice' }, TEST_JWT_SECRET);
      assert.equal((await new ApiClient(api.url, noTeam).get('/api/v1/runs')).status, 401);
    });

    it("another team's run is 404 for reads and every operation", async () => {
      const { id } = await runIn('running');
      const mallory = alice.as('mallory', 'other-team');
      assert.equal((await mallory.get(`/api/v1/runs/${id}`)).status, 404);
      assert.equal((await mallory.post(`/api/v1/runs/${id}/cancel`)).status, 404);
      assert.equal((await mallory.get(`/api/v1/runs/${id}/episodes`)).status, 404);
      assert.equal((await alice.get(`/api/v1/runs/${id}`)).body.status, 'running');
    });

    it('an unknown run is 404', async () => {
      assert.equal((await alice.get('/api/v1/runs/run_does_not_exist')).status, 404);
    });
  });
});
