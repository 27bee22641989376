// flow-notify explain on the real servers: a run that paused for a human (one push subscriber on the loopback push
// service), was answered, then failed with a flaky callback receiver (503, then 204) and an operator webhook. The
// CLI, run as a child process under the operator's config, must report exactly what the loopback receivers saw.
import assert from 'node:assert/strict';
import type { PushPayload } from '../domain/push';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import webpush from 'web-push';
import type { RunExplanation } from '../operator/explanation';
import type { Config } from '../config';
import type { OperatorAlert } from '../domain/ops';
import { PROJECT_ROOT } from '../platform/embedded';
import { subscriptionId } from '../store/push/subscriptions';
import type { EpisodeResult } from '../contract/workflows';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';
import { startPushService, type PushService } from './support/pushService';
import { testStack } from './support/stack';
import { waitUntil } from './support/waitUntil';

const UI = 'https://temporal-ui.ops.test';

describe('flow-notify explain', function () {
  let push: PushService;
  let receiver: CallbackReceiver;
  let webhook: CallbackReceiver;
  let stack: FamilyStack;
  let config: Config;
  let alice: ApiClient;
  let client: Client;

  before(async () => {
    push = await startPushService();
    receiver = await CallbackReceiver.start();
    webhook = await CallbackReceiver.start();
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        PUSH_ALLOW_PRIVATE: '1',
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1,1',
        OPS_ALERT_WEBHOOK_URL: webhook.url,
        // An alert whose webhook keeps refusing gives up after two POSTs: 0.0015 h = 5.4 s, and the attempt at
        // 2 s would wait 4 s more (durable timers 2 s, 4 s ...).
        OPS_ALERT_RETRY_HOURS: '0.0015',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { push },
    );
    ({ config, client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await push?.close();
    await receiver?.close();
    await webhook?.close();
  });

  const episodeResult = (id: string) => client.workflow.getHandle(id).result() as Promise<EpisodeResult>;

  function cli(...args: string[]) {
    return spawnSync(path.join(PROJECT_ROOT, 'bin/flow-notify'), ['explain', ...args], {
      env: {
        PATH: process.env.PATH,
        FLOW_NOTIFY_FROM_SOURCE: '1', // the code as it is, not an earlier build's dist/
        MONGO_URL: config.mongoUrl,
        MONGO_DB: config.mongoDb,
        TEMPORAL_ADDRESS: testStack().temporalAddress,
        TEMPORAL_UI_URL: UI,
      },
      encoding: 'utf8',
      timeout: 60_000,
    });
  }

  /** The run as `explain --json` reports it; the CLI must succeed. */
  function explanation(runId: string): RunExplanation {
    const run = cli(runId, '--json');
    assert.equal(run.status, 0, run.stderr);
    return JSON.parse(run.stdout) as RunExplanation;
  }

  it('reports the pushes, callback attempts, alert and workflows the loopback receivers saw', async () => {
    const subscription = push.endpoint('alice');
    assert.equal((await alice.post('/api/v1/notifications/push/subscriptions', subscription)).status, 201);
    const created = await alice.post('/api/v1/runs', {
      title: 'Ledger close',
      callback: { url: receiver.url },
    });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;

    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Post the adjustments?' });
    assert.equal(paused.status, 200, paused.text);
    const inputEpisode = `${runId}:input:${paused.body.interactionId}`;
    assert.equal((await episodeResult(inputEpisode)).push, 'delivered');
    // The device's service worker says it showed the pause (no session: the push's receipt token).
    const pausePush = push
      .received(subscription)
      .find((r) => (r.payload as PushPayload).episodeId === inputEpisode);
    const shown = await alice.post('/api/v1/notifications/receipts', {
      token: (pausePush?.payload as PushPayload).receipt,
      event: 'shown',
    });
    assert.equal(shown.status, 204, shown.text);
    const answered = await alice.post(
      `/api/v1/runs/${runId}/interactions/${paused.body.interactionId}/answer`,
      {
        answer: 'yes',
      },
    );
    assert.equal(answered.status, 200, answered.text);

    receiver.answer({ status: 503 });
    const failed = await alice.post(`/api/v1/runs/${runId}/fail`, {
      error: { code: 'database', message: 'connection reset' },
    });
    assert.equal(failed.status, 200, failed.text);
    const endEpisode = `${runId}:end`;
    const ended = await episodeResult(endEpisode);
    assert.equal(ended.callback, 'delivered');
    assert.equal(ended.ops, 'delivered');

    // Visibility trails the histories a little: wait until the listing shows both episodes closed.
    // Each look is a CLI process (seconds under load): the bound only guards a hang.
    let report!: RunExplanation;
    await waitUntil(
      'both episodes closed in the listing',
      () => {
        report = explanation(runId);
        return (
          report.workflows.filter((w) => w.type === 'episodeWorkflow' && w.status === 'COMPLETED').length ===
          2
        );
      },
      { timeoutMs: 60_000, intervalMs: 500, seen: () => report.workflows },
    );

    assert.equal(report.runId, runId);
    assert.equal(report.run?.status, 'failed');
    assert.equal(report.run?.callbackOrigin, new URL(receiver.url).origin);
    assert.deepEqual(
      report.episodes.map((e) => [e.episodeId, e.kind]),
      [
        [inputEpisode, 'run_paused'],
        [endEpisode, 'run_failed'],
      ],
    );

    // Push: every delivery the push service accepted, and nothing else.
    // The question's close (kind answered, sent once it was answered) is the interaction's, not an episode's.
    const isClose = (r: { payload: unknown }) => (r.payload as PushPayload).kind === 'answered';
    await waitUntil('the question closed on the device', () => push.received(subscription).some(isClose));
    const received = push.received(subscription);
    assert.equal(received.filter(isClose).length, 1);
    const seen = received.filter((r) => !isClose(r));
    const reported = report.episodes.flatMap((e) =>
      e.pushDeliveries.map((d) => ({ ...d, episodeId: e.episodeId })),
    );
    assert.equal(reported.length, seen.length);
    assert.ok(seen.length >= 1);
    for (const d of reported) {
      assert.equal(d.userId, 'alice');
      assert.equal(d.subscriptionId, subscriptionId(subscription.endpoint));
      assert.equal(d.pushService, push.origin);
    }
    assert.deepEqual(
      reported.map((d) => d.episodeId).sort(),
      seen.map((r) => (r.payload as { episodeId: string }).episodeId).sort(),
    );
    const [input, end] = report.episodes;
    // Per device: the pause was reported shown, and answered by its person; the end's push reported nothing.
    assert.equal(input.pushDeliveries[0].receipt, 'reported');
    assert.ok(input.pushDeliveries[0].shownAt && input.pushDeliveries[0].answeredAt);
    assert.equal(input.pushDeliveries[0].clickedAt, undefined);
    assert.equal(end.pushDeliveries[0].receipt, 'none');
    assert.equal(end.pushDeliveries[0].shownAt, undefined);
    const rendered = cli(runId);
    assert.equal(rendered.status, 0, rendered.stderr);
    assert.match(rendered.stdout, /shown \S+, clicked -; answered \S+/);
    assert.match(rendered.stdout, /no receipt/);
    assert.equal(input.families.push.state, 'delivered');
    assert.equal(input.families.push.result, 'delivered');
    assert.equal(input.families.callback.state, 'absent');
    assert.deepEqual(input.branches, { push: 'delivered', callback: 'not_owed', ops: 'not_owed' });
    assert.deepEqual(input.callbackAttempts, []);

    // Callback: one reported attempt per request the receiver got, with the status it answered.
    assert.equal(receiver.received.length, 2);
    assert.deepEqual(
      end.callbackAttempts.map((a) => [a.attempt, a.result, a.status]),
      [
        [1, 'retry', 503],
        [2, 'delivered', 204],
      ],
    );
    // The failed one says when the next was due (its end plus the schedule's 1 s); the delivered one, nothing.
    const [retried, delivered] = end.callbackAttempts;
    assert.equal(retried.nextWaitSeconds, 1);
    assert.equal(
      retried.nextAttemptAt,
      new Date(Date.parse(retried.at) + retried.durationMs + 1000).toISOString(),
    );
    assert.equal(delivered.nextAttemptAt, undefined);
    assert.equal(end.families.callback.state, 'delivered');
    assert.equal(end.families.callback.result, 'delivered');
    assert.equal(end.branches?.callback, 'delivered');

    // Operator alert: the one the webhook got.
    const alerts = webhook.received.map((r) => JSON.parse(r.body) as OperatorAlert);
    assert.equal(alerts.length, 1);
    assert.equal(report.operatorAlerts.length, 1);
    const [alert] = report.operatorAlerts;
    assert.equal(alert.episodeKey, alerts[0].episodeKey);
    assert.equal(alert.kind, 'run_failed');
    assert.equal(alert.severity, 'critical');
    assert.equal(alert.claim.key, `ops|${endEpisode}`);
    assert.equal(alert.claim.state, 'delivered');
    // Each alert is its own workflow (ops|<episode>), started by the episode.
    assert.deepEqual(
      alert.sends.map((s) => [s.result, s.workflowId]),
      [['sent', `ops|${endEpisode}`]],
    );
    assert.equal(end.families.ops.state, 'delivered');

    // Workflows: both episodes, closed, with their activities and a link into the Temporal UI.
    for (const id of [inputEpisode, endEpisode]) {
      const w = report.workflows.find((x) => x.workflowId === id);
      assert.ok(w, `workflow ${id} listed`);
      assert.equal(w.status, 'COMPLETED');
      assert.ok(w.closeTime);
      assert.equal(
        w.uiUrl,
        `${UI}/namespaces/default/workflows/${encodeURIComponent(id)}/${w.runId}/history`,
      );
    }
    const endWorkflow = report.workflows.find((x) => x.workflowId === endEpisode)!;
    assert.deepEqual(
      endWorkflow.activities.filter((a) => a.type === 'sendCallback').map((a) => [a.outcome, a.attempts]),
      [
        ['completed', 1],
        ['completed', 1],
      ],
    );
    // What the end's episode cost in Temporal Cloud actions, from its history: its start, the activities listed
    // (the push, the callback's two attempts), the timer of the callback's wait, the alert's own workflow, and a
    // workflow task's local activities as one; its patches' version upserts are not actions.
    const { total, localActivityTasks, ...rest } = endWorkflow.temporalActions;
    assert.deepEqual(rest, { started: 1, activities: 3, timers: 1, children: 1 });
    assert.ok(localActivityTasks >= 2, JSON.stringify(endWorkflow.temporalActions));
    assert.equal(total, 6 + localActivityTasks);
    assert.deepEqual(report.truncated, { episodes: false, workflows: false, callbackAttempts: false });

    // The human form carries the same facts.
    const text = cli(runId);
    assert.equal(text.status, 0, text.stderr);
    assert.match(text.stdout, new RegExp(`run ${runId} "Ledger close": failed`));
    assert.match(
      text.stdout,
      /callback attempts \(2\):\n {6}#1 \S+ retry HTTP 503 \(http 503\); next attempt \S+ \(in 1 s\)\n {6}#2 \S+ delivered HTTP 204\n/,
    );
    assert.ok(text.stdout.includes(`next attempt ${retried.nextAttemptAt} (in 1 s)`));
    assert.match(text.stdout, new RegExp(`via ${push.origin.replace(/[.]/g, '\\.')}`));
    assert.ok(text.stdout.includes(endWorkflow.uiUrl));
    assert.ok(text.stdout.includes(`${endWorkflow.historyEvents} events, ${total} actions`), text.stdout);
    assert.match(
      text.stdout,
      /\nworkflows \(\d+\)\n {2}\d+ Temporal Cloud actions in their histories \(heartbeats not counted\)\n/,
    );
  });

  it('reports a callback that gave up and an alert whose webhook refused until its retry window ended', async () => {
    receiver.answerAlways({ status: 503 });
    webhook.answerAlways({ status: 503 });
    try {
      const created = await alice.post('/api/v1/runs', {
        title: 'Feed import',
        callback: { url: receiver.url },
      });
      const runId = created.body.id as string;
      const before = { callbacks: receiver.received.length, alerts: webhook.received.length };
      await alice.post(`/api/v1/runs/${runId}/fail`, { error: { code: 'oom', message: 'killed' } });
      const ended = await episodeResult(`${runId}:end`);
      assert.deepEqual([ended.callback, ended.ops], ['gave_up', 'gave_up']);

      const alertWorkflowId = `ops|${runId}:end`;
      // The episode and the run's failure alert closed; the callback's exhausted alert (started once the callback
      // gave up) sent at least once.
      const closed = (r: RunExplanation) =>
        [`${runId}:end`, alertWorkflowId].every(
          (id) => r.workflows.find((w) => w.workflowId === id)?.status === 'COMPLETED',
        ) && r.operatorAlerts.some((a) => a.kind === 'callback_exhausted' && a.sends.length > 0);
      let report!: RunExplanation;
      // Each look is a CLI process (seconds under load): allow several.
      await waitUntil(
        'the episode and both alerts closed, the exhausted alert sent',
        () => closed((report = explanation(runId))),
        { timeoutMs: 60_000, intervalMs: 1000, seen: () => [report.workflows, report.operatorAlerts] },
      );

      const [end] = report.episodes;
      const callbacks = receiver.received.length - before.callbacks;
      assert.equal(callbacks, 3); // CALLBACK_RETRY_SECONDS=1,1: three attempts
      assert.deepEqual(
        end.callbackAttempts.map((a) => [a.result, a.status]),
        Array.from({ length: callbacks }, () => ['retry', 503]),
      );
      // The owner sees a category; the detail is in the worker's log.
      assert.equal(end.families.callback.result, 'gave_up: http 503');

      // Every POST the webhook refused is a failed send of the alert's own workflow; then the claim gave up.
      const posts = webhook.received.length - before.alerts;
      assert.ok(posts >= 2, `${posts} alert POSTs`);
      // The run's failure, and the callback that gave up (callback_exhausted, its own ops|callback:… alert).
      assert.deepEqual(
        report.operatorAlerts.map((a) => [a.episodeKey, a.kind, a.claim.key]).sort(),
        [
          [`${runId}:end`, 'run_failed', `ops|${runId}:end`],
          [`callback:${runId}:end`, 'callback_exhausted', `ops|callback:${runId}:end`],
        ].sort(),
      );
      const exhausted = report.operatorAlerts.find((a) => a.kind === 'callback_exhausted')!;
      assert.notEqual(exhausted.claim.state, 'absent', 'its claim is found by the run');
      const alert = report.operatorAlerts.find((a) => a.kind === 'run_failed')!;
      assert.match(alert.claim.result ?? '', /^gave_up/);
      assert.ok(alert.sends.length >= 1);
      for (const send of alert.sends) {
        assert.equal(send.result, 'failed');
        assert.match(send.failure ?? '', /503/);
        assert.equal(send.workflowId, alertWorkflowId);
      }
      assert.match(cli(runId).stdout, /operator webhook answered 503/);
    } finally {
      receiver.answerAlways({ status: 204 });
      webhook.answerAlways({ status: 204 });
    }
  });

  it('finds a router decision alert of a running run by its workflow id (it carries no FlowRunId)', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Routing' });
    const runId = created.body.id as string;
    const raised = await alice.post(`/api/v1/runs/${runId}/route-decision-errors`, {
      decisionId: 'dec_7',
      error: { code: 'no_route', message: 'no branch matched' },
    });
    assert.equal(raised.status, 202, raised.text);
    const workflowId = `ops|route:${runId}:dec_7`;
    await client.workflow.getHandle(workflowId).result();
    const sent = webhook.received
      .map((r) => JSON.parse(r.body) as OperatorAlert)
      .filter((a) => a.runId === runId);
    assert.equal(sent.length, 1);

    // Each look is a CLI process (seconds under load): the bound only guards a hang.
    let report!: RunExplanation;
    await waitUntil(
      'the alert workflow closed in the listing',
      () =>
        (report = explanation(runId)).workflows.find((w) => w.workflowId === workflowId)?.status ===
        'COMPLETED',
      { timeoutMs: 60_000, intervalMs: 0, seen: () => report.workflows },
    );
    assert.deepEqual(report.episodes, []);
    assert.deepEqual(
      report.operatorAlerts.map((a) => [a.episodeKey, a.kind, a.claim.state, a.sends.map((x) => x.result)]),
      [[sent[0].episodeKey, 'route_decision_error', 'delivered', ['sent']]],
    );
    const w = report.workflows.find((x) => x.workflowId === workflowId);
    assert.equal(w?.type, 'operatorAlertWorkflow');
  });

  it("prints a tenant's control characters escaped, never raw: no terminal escape reaches the operator's screen", async () => {
    // A window title, a clear screen and a C1 control sequence introducer, in a title a tenant chose.
    const title = 'Nightly \u001b]0;pwned\u0007\u001b[2J\u009b31m fake line\r\nok';
    const created = await alice.post('/api/v1/runs', { title });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    for (const args of [[id], [id, '--json']]) {
      const shown = cli(...args);
      assert.equal(shown.status, 0, shown.stderr);
      assert.doesNotMatch(shown.stdout, /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/, args.join(' '));
    }
    assert.match(cli(id).stdout, /Nightly \\x1b\]0;pwned\\x07\\x1b\[2J\\x9b31m fake line\\r\\nok/);
  });

  it('an unknown run is a clear message and exit code 3; a malformed id is a usage error', () => {
    const unknown = cli('run_0000000000000000000000000000dead', '--json');
    assert.equal(unknown.status, 3, unknown.stdout);
    assert.match(unknown.stderr, /^flow-notify: no run run_0+dead: not in the runs store/);
    assert.equal(unknown.stdout, '');
    const bad = cli("x' OR WorkflowId != '");
    assert.equal(bad.status, 2);
    assert.match(bad.stderr, /not a run id/);
  });
});
