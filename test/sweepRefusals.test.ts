// The sweep when Temporal answers and refuses one thing it asks (a start or a signal-with-start past the server's
// limits): every step of the pass goes on, and later steps still run. On the real servers, with no worker: the
// workflows the pass starts wait on a task queue nobody polls, and only the pass's own answer is looked at.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { createSweepActivities } from '../activities/sweep';
import { endpointDisabledRaiser } from '../client/operator';
import { DEFAULT_EPISODE_OPTIONS } from '../contract/workflows';
import type { Run } from '../domain/run';
import { outcomeOfRef } from '../domain/sweep';
import { teamEventFromOutcome, type TeamEvent } from '../domain/teamEvents';
import type { Stores } from '../store';
import type { EndpointRow } from '../store/endpoint/endpoints';
import type { Interaction } from '../store/interactions';
import type { Mongo } from '../store/mongo';
import { openStores, temporalClient } from './support/harness';
import { testConfig } from './support/stack';

const PREFIX = randomBytes(3).toString('hex');
const TEAM = `refusals_${PREFIX}`;
/** Past the server's 1,000-character workflow id limit: Temporal answers INVALID_ARGUMENT, every time. */
const tooLong = (name: string) => `${name}_${PREFIX}_${'r'.repeat(1000)}`;

describe('the sweep when Temporal refuses one start or signal', function () {
  this.timeout(120_000);
  let mongo: Mongo;
  let stores: Stores;
  let client: Client;
  let closeClient: () => Promise<void>;
  let taskQueue: string;

  before(async () => {
    const config = testConfig();
    ({ mongo, stores } = await openStores({ ...config, mongoDb: `${config.mongoDb}_refusals` }));
    ({ client, close: closeClient } = await temporalClient(config));
    taskQueue = `${config.temporalTaskQueue}-unpolled`;
  });
  after(async () => {
    await closeClient?.();
    await mongo?.client.close();
  });

  function paused(id: string, interactionId: string, at: Date, watched = false): Run {
    return {
      _id: id,
      teamId: TEAM,
      ownerId: 'owner',
      title: id.slice(0, 40),
      status: 'paused',
      pauseCount: 1,
      watchedIssueIds: watched ? ['ISSUE-1'] : [],
      createdAt: new Date(at.getTime() - 60_000),
      updatedAt: at,
      pause: { reason: 'human_input', seq: 1, interactionId, at },
    };
  }

  function endpoint(id: string, at: Date, disabledAt?: Date): EndpointRow {
    return {
      _id: id,
      teamId: TEAM,
      url: 'https://hooks.example.com/flow',
      eventTypes: ['run.input_requested', 'run.finished'],
      disabled: !!disabledAt,
      format: 'standard',
      secret: 'whsec_test',
      createdBy: 'admin',
      createdAt: at,
      updatedAt: at,
      subscriptionChangedAt: disabledAt ?? at,
      slotId: `slot_${id.slice(0, 40)}`,
      ...(disabledAt && {
        disabledReason: 'failing' as const,
        disabling: { disabledAt, failingSince: at, runId: 'run_failing', lastError: 'HTTP 503' },
        alertOwedAt: new Date(disabledAt.getTime() + 60_000),
      }),
    };
  }

  it('a question, an answer, a team event, a watched pause and an endpoint alert it refuses hold back nothing: the pass goes on, and counts them refused', async () => {
    const now = new Date();
    const ago = (seconds: number) => new Date(now.getTime() - seconds * 1000);
    // Each refused one is the oldest of its kind, so it comes first whichever order a step takes.
    const db = mongo.db;
    await db
      .collection<EndpointRow>('endpoints')
      .insertMany([
        endpoint(`ep_${PREFIX}`, ago(3600)),
        endpoint(tooLong('ep_disabled'), ago(3600), ago(1800)),
        endpoint(`ep_disabled_${PREFIX}`, ago(3600), ago(1700)),
      ]);
    await db
      .collection<Run>('runs')
      .insertMany([
        paused(`q_refused_${PREFIX}`, tooLong('int_q'), ago(600)),
        paused(`q_${PREFIX}`, `int_q_${PREFIX}`, ago(590)),
        paused(tooLong('watched'), `int_w_refused_${PREFIX}`, ago(580), true),
        paused(`watched_${PREFIX}`, `int_w_${PREFIX}`, ago(570), true),
      ]);
    const answered = (id: string, at: Date) => ({
      _id: id,
      runId: `gone_${PREFIX}`,
      teamId: TEAM,
      prompt: 'Ship it?',
      status: 'answered' as const,
      answer: 'yes',
      createdAt: new Date(at.getTime() - 60_000),
      answeredAt: at,
      answeredBy: 'alice',
    });
    await db
      .collection<Interaction>('interactions')
      .insertMany([answered(tooLong('int_a'), ago(500)), answered(`int_a_${PREFIX}`, ago(490))]);
    const finished = (id: string): TeamEvent & { run: NonNullable<TeamEvent['run']> } => {
      const event = teamEventFromOutcome(
        outcomeOfRef({
          _id: `finished_${PREFIX}`,
          teamId: TEAM,
          ownerId: 'owner',
          status: 'finished',
          updatedAt: ago(400),
          endedAt: ago(400),
        })!,
      )!;
      return { ...event, id, run: event.run! };
    };
    await stores.teamEvents.record(finished(tooLong('ev')), ago(400));
    await stores.teamEvents.record(finished(`ev_${PREFIX}`), ago(390));

    const sweep = createSweepActivities({
      ...stores,
      endpointDisabled: endpointDisabledRaiser(client, taskQueue),
      client,
      taskQueue,
      episodeOptions: DEFAULT_EPISODE_OPTIONS,
      families: { ops: false },
      lookbackSeconds: 3600,
      pageSize: 1,
      now: () => now,
    });
    const pass = await sweep.sweepOnce();
    const shown = JSON.stringify(pass);
    // The questions of the two watched pauses and the unrefused one are opened; the refused one is not noted.
    assert.equal(pass.interactionsStarted, 3, shown);
    assert.equal(pass.closesReplayed, 1, shown);
    // The unrefused watched pause's event and the unrefused recorded one.
    assert.equal(pass.teamEventsRaised, 2, shown);
    assert.equal(pass.disabledAlertsRaised, 1, shown);
    // The unrefused question's episode started; the refused one's too is refused (its id carries the question's).
    assert.equal(pass.started, 1, shown);
    assert.equal(pass.startsRefused, 6, shown);
    // Refused, each is still owed: the next pass asks again.
    const again = await sweep.sweepOnce();
    assert.equal(again.startsRefused, 6, JSON.stringify(again));
  });
});
