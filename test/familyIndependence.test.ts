// The families of one episode apart, on the real servers: every branch's exit settles or releases its own claim
// (the workflow's result, the claim and the episodes view agree).
import assert from 'node:assert/strict';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { ApiHandle } from '../api/server';
import type { Config } from '../config';
import type { Stores } from '../store';
import type { ClaimState } from '../store/claims';
import type { Mongo } from '../store/mongo';
import type { BranchResult, EpisodeResult } from '../workflows/episode';
import { CallbackReceiver } from './support/callbackReceiver';
import {
  openStores,
  saveHistory,
  startTestApi,
  startTestWorker,
  temporalClient,
  type ApiClient,
  type RunningWorker,
} from './support/harness';
import { testConfig } from './support/stack';

/** The claim state each branch result leaves behind: released means absent (the sweep may replay it). */
const CLAIM_AFTER: Partial<Record<BranchResult, ClaimState>> = {
  delivered: 'delivered',
  not_addressable: 'delivered',
  gave_up: 'delivered',
  released: 'absent',
};

/** RECORD_FIXTURES=1 saves the histories these tests produce (from the code as it is) as replay fixtures. */
const record = (config: Config, workflowId: string, name: string): void => {
  if (process.env.RECORD_FIXTURES === '1')
    saveHistory(config, workflowId, path.resolve(__dirname, 'fixtures', name));
};

describe('family independence', function () {
  this.timeout(120_000);
  let receiver: CallbackReceiver;
  let config: Config;
  let mongo: Mongo;
  let stores: Stores;
  let worker: RunningWorker;
  let api: ApiHandle;
  let alice: ApiClient;
  let client: Client;
  let closeClient: () => Promise<void>;

  before(async () => {
    receiver = await CallbackReceiver.start();
    config = testConfig({
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_TIMEOUT_SECONDS: '2',
      CALLBACK_RETRY_SECONDS: '1,1,1,1',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ mongo, stores } = await openStores(config));
    worker = await startTestWorker(config, stores);
    let anonymous: ApiClient;
    ({ api, client: anonymous } = await startTestApi(config));
    alice = anonymous.as('alice', 'acme');
    ({ client, close: closeClient } = await temporalClient(config));
  });
  after(async () => {
    await api?.close();
    await worker?.stop();
    await closeClient?.();
    await mongo?.client.close();
    await receiver?.close();
  });

  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  it('a callback branch that throws releases its own cb| claim: result, claim and episodes view agree', async () => {
    const launched = await alice.post('/api/v1/runs', {
      title: 'Broken secret',
      callback: { url: receiver.url },
    });
    assert.equal(launched.status, 201, launched.text);
    const id: string = launched.body.id;
    // A run document the callback activity cannot render (a createdAt that is not a date): every attempt throws,
    // so the branch itself throws once Temporal's retries are spent.
    await mongo.db.collection('runs').updateOne({ _id: id as never }, { $set: { createdAt: 'not a date' } });
    await alice.post(`/api/v1/runs/${id}/cancel`);
    const episodeId = `${id}:end`;
    const result = await episodeResult(episodeId);
    record(config, episodeId, 'episode-history-callback-threw.json');
    assert.equal(
      result.callback,
      'released',
      JSON.stringify(await stores.claims.describe(`cb|${episodeId}`)),
    );
    assert.equal(receiver.received.length, 0);
    const claim = await stores.claims.describe(`cb|${episodeId}`);
    assert.equal(
      claim.state,
      CLAIM_AFTER[result.callback],
      `the cb| claim after a ${result.callback} branch`,
    );
    const view = await alice.get(`/api/v1/runs/${id}/episodes`);
    assert.equal(view.status, 200, view.text);
    const [episode] = view.body.episodes as {
      episodeId: string;
      families: Record<string, { state: string }>;
    }[];
    assert.equal(episode.episodeId, episodeId);
    assert.equal(episode.families.callback.state, CLAIM_AFTER[result.callback]);
    assert.equal(episode.families.push.state, CLAIM_AFTER[result.push] ?? 'absent');
  });
});
