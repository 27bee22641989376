// Operators find every workflow of a run by its search attributes: episodes, the run's health and its operator
// alerts carry FlowRunId and FlowTeamId; FlowOutcomeKind tells the three pause kinds apart; and the API and the
// worker refuse to start (exit 78, one line naming the missing attributes) on a namespace without them.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import type { Config } from '../config';
import { PROJECT_ROOT } from '../platform/embedded';
import type { Stores } from '../store';
import { searchAttributes } from '../contract/searchAttributes';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { ApiClient } from './support/harness';
import { TEST_JWT_SECRET, testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';
import { childProcessEnv } from './support/workerProcess';

describe('search attributes', function () {
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let stores: Stores;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    webhook = await CallbackReceiver.start();
    stack = await startFamilyStack({ OPS_ALERT_WEBHOOK_URL: webhook.url, SWEEP_INTERVAL_SECONDS: '3600' });
    ({ config, stores, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await webhook?.close();
  });

  /** Workflow types listed by a visibility query, once it shows at least `least` of them. */
  async function listed(query: string, least: number): Promise<string[]> {
    let types: string[] = [];
    await waitUntil(
      `at least ${least} workflows listed by ${query}`,
      async () => {
        types = [];
        for await (const wf of client.workflow.list({ query })) types.push(wf.type);
        return types.length >= least;
      },
      { timeoutMs: 60_000, intervalMs: 300, seen: () => types },
    );
    return types.sort();
  }

  it('every workflow of a run carries FlowRunId and FlowTeamId: its episode, its health, its operator alerts', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Findable', budget: { limit: 10 } });
    const id = created.body.id as string;
    await alice.post(`/api/v1/runs/${id}/events`, { type: 'usage', spent: 12 });
    await alice.post(`/api/v1/runs/${id}/route-decision-errors`, {
      decisionId: 'd1',
      error: { code: 'no_route', message: 'x' },
    });
    await alice.post(`/api/v1/runs/${id}/fail`, { error: { code: 'oom', message: 'killed' } });
    await client.workflow.getHandle(`${id}:end`).result();
    // episode, health, run_failed + route + budget_warning + budget_exceeded alerts
    const expected = [
      'episodeWorkflow',
      'operatorAlertWorkflow',
      'operatorAlertWorkflow',
      'operatorAlertWorkflow',
      'operatorAlertWorkflow',
      'runHealthWorkflow',
    ];
    assert.deepEqual(await listed(`FlowRunId = '${id}'`, expected.length), expected);
    assert.deepEqual(await listed(`FlowRunId = '${id}' AND FlowTeamId = 'acme'`, expected.length), expected);
  });

  it('FlowOutcomeKind says which pause it was', async () => {
    const kinds: Record<string, string> = {};
    for (const [op, body] of [
      ['pause', { prompt: 'ok?' }],
      ['park', { wall: 'daily_tokens' }],
      ['soft-pause', {}],
    ] as const) {
      const created = await alice.post('/api/v1/runs', { title: op });
      const id = created.body.id as string;
      assert.ok((await alice.post(`/api/v1/runs/${id}/${op}`, body)).status < 300);
      const run = (await stores.runs.getById(id))!;
      const episodeId =
        op === 'pause'
          ? `${id}:input:${run.pause!.interactionId}`
          : op === 'park'
            ? `${id}:park:daily_tokens:1`
            : `${id}:soft-pause:1`;
      const described = await client.workflow.getHandle(episodeId).describe();
      kinds[op] = described.typedSearchAttributes.get(searchAttributes.outcomeKind) ?? '';
    }
    assert.deepEqual(kinds, {
      pause: 'human_input_requested',
      park: 'usage_parked',
      'soft-pause': 'soft_paused',
    });
  });

  it('the API and the worker refuse a namespace without the attributes: one line naming them, exit 78', async () => {
    const namespace = `flow-bare-${randomBytes(3).toString('hex')}`;
    await client.connection.workflowService.registerNamespace({
      namespace,
      workflowExecutionRetentionPeriod: msToTs('1 day'),
    });
    const env = childProcessEnv({
      MONGO_URL: testStack().mongoUrl,
      MONGO_DB: config.mongoDb,
      TEMPORAL_ADDRESS: testStack().temporalAddress,
      TEMPORAL_NAMESPACE: namespace,
      TEMPORAL_TASK_QUEUE: 'bare',
      AUTH_JWT_SECRET: TEST_JWT_SECRET,
      PORT: '0',
    });
    for (const entry of ['worker.ts', 'api/server.ts']) {
      const start = () =>
        spawnSync('node', ['-r', 'ts-node/register', path.join(PROJECT_ROOT, entry)], {
          cwd: PROJECT_ROOT,
          env,
          encoding: 'utf8',
          timeout: 60_000,
        });
      // A namespace just registered may take the server a few seconds to serve.
      let tried: ReturnType<typeof start> | undefined;
      const result = await waitUntil(
        `${entry} to find the namespace`,
        () => {
          tried = start();
          return !/not found|NotFound/i.test(tried.stderr) && tried;
        },
        { timeoutMs: 120_000, intervalMs: 1000, seen: () => tried?.stderr },
      );
      const lines = result.stderr.trim().split('\n');
      assert.equal(result.status, 78, `${entry}: ${result.stderr}`);
      assert.equal(lines.length, 1, `${entry}: one line: ${result.stderr}`);
      assert.match(lines[0], /FlowRunId, FlowTeamId, FlowOutcomeKind/);
      assert.match(lines[0], new RegExp(namespace));
    }
  }).timeout(180_000);
});
