// A Slack endpoint on the real servers: subscribed to the same types as a standard endpoint of the team, it gets
// every event once too, as a Slack message (the shape Slack documents, checked by a loopback stand-in that refuses
// any other with 400 invalid_blocks), unsigned, with the input request's prompt and a button to the run.
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { runDeepLink } from '../domain/push';
import type { TeamEventBody } from '../domain/teamEvents';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';
import { SlackStandIn } from './support/slackStandIn';
import { waitUntil } from './support/waitUntil';

const TYPES = [
  'run.input_requested',
  'run.finished',
  'run.failed',
  'run.budget_warning',
  'run.budget_exceeded',
];
const PROMPT = 'Ship <!channel> the release & tag it?';

describe('team endpoints: Slack format', function () {
  this.timeout(180_000);
  let stack: FamilyStack;
  let admin: ApiClient;
  let alice: ApiClient;
  let slack: SlackStandIn;
  let standard: CallbackReceiver;

  before(async () => {
    stack = await startFamilyStack({ CALLBACK_ALLOW_PRIVATE: '1', CALLBACK_RETRY_SECONDS: '1,1,1' });
    admin = adminOf(stack.anonymous, 'ada', 'acme');
    alice = stack.anonymous.as('alice', 'acme');
    slack = await SlackStandIn.start();
    standard = await CallbackReceiver.start();
  });
  after(async () => {
    await stack?.stop();
    await slack?.close();
    await standard?.close();
  });

  async function register(
    url: string,
    format: 'standard' | 'slack',
  ): Promise<{ id: string; secret: string }> {
    const res = await admin.post('/api/v1/endpoints', { url, eventTypes: TYPES, format });
    assert.equal(res.status, 201, res.text);
    assert.equal(res.body.format, format);
    return res.body;
  }

  async function runLife(i: number): Promise<string> {
    const created = await alice.post('/api/v1/runs', { title: `Release <${i}>`, budget: { limit: 10 } });
    assert.equal(created.status, 201, created.text);
    const id = created.body.id as string;
    const post = async (path: string, body: unknown = {}) => {
      const res = await alice.post(`/api/v1/runs/${id}${path}`, body);
      assert.ok(res.status < 300, `${path}: ${res.status} ${res.text}`);
      return res;
    };
    const paused = await post('/pause', { prompt: PROMPT });
    await post(`/interactions/${paused.body.interactionId}/answer`, { answer: 'yes' });
    await post('/events', { type: 'usage', spent: 9 });
    await post('/events', { type: 'usage', spent: 12 });
    if (i === 0) await post('/complete', { finalAnswer: 'done' });
    else await post('/fail', { error: { code: 'oom', message: 'out of memory' } });
    return id;
  }

  it('each endpoint gets every event once; the Slack one unsigned, in the shape Slack documents', async () => {
    const slackEndpoint = await register(slack.url, 'slack');
    const standardEndpoint = await register(standard.url, 'standard');

    const runIds = await Promise.all([0, 1].map(runLife));
    const expected = runIds.length * 4; // input requested, budget warning and exceeded, the end
    await waitUntil('the standard endpoint got every event', () => standard.received.length >= expected, {
      timeoutMs: 60_000,
      seen: () => `${standard.received.length}`,
    });
    await waitUntil('the Slack endpoint got every event', () => slack.posts.length >= expected, {
      timeoutMs: 60_000,
      seen: () => `${slack.posts.length}`,
    });
    const events = standard.received.map(
      (call) =>
        new Webhook(standardEndpoint.secret).verify(
          call.body,
          call.headers as Record<string, string>,
        ) as TeamEventBody,
    );
    // Nothing more comes: every event's workflow closed.
    for (const event of events) await stack.client.workflow.getHandle(`team-event|${event.id}`).result();

    assert.equal(new Set(events.map((e) => e.id)).size, expected, 'the standard endpoint: each event once');
    assert.deepEqual(
      slack.posts.map((p) => [p.status, p.problems]),
      slack.posts.map(() => [200, []]),
      'every Slack message in the documented shape',
    );
    assert.equal(slack.posts.length, expected, 'the Slack endpoint: each event once');
    for (const post of slack.posts) {
      for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature'])
        assert.equal(post.headers[header], undefined, `a Slack message carries no ${header}`);
      assert.equal(post.headers['content-type'], 'application/json');
    }

    // Per run: one message per event, each with a button to the run in the studio; the request's prompt escaped.
    const messages = slack.accepted;
    for (const [i, runId] of runIds.entries()) {
      const link = runDeepLink(stack.config.studioUrl, runId);
      const ofRun = messages.filter((m) => JSON.stringify(m.blocks).includes(JSON.stringify(link)));
      assert.equal(ofRun.length, 4, `run ${i}: ${JSON.stringify(messages.map((m) => m.text))}`);
      const headers = ofRun.map((m) => (m.blocks[0].text as { text: string }).text).sort();
      const end = i === 0 ? 'Finished' : 'Failed';
      assert.deepEqual(
        headers,
        [end, 'Near its budget', 'Needs your input', 'Over its budget']
          .map((h) => `${h}: Release <${i}>`)
          .sort(),
      );
      // The fallback text is mrkdwn too (Slack notifies with it): the title's `<` escaped there as well.
      for (const m of ofRun) assert.match(m.text, new RegExp(`: Release &lt;${i}&gt; \\(`), m.text);
      const input = ofRun.find((m) => m.text.startsWith('Needs your input'))!;
      assert.ok(
        JSON.stringify(input.blocks).includes('Ship &lt;!channel&gt; the release &amp; tag it?'),
        JSON.stringify(input.blocks),
      );
    }

    // Its test event is a Slack message too, unsigned.
    const tested = await admin.post(`/api/v1/endpoints/${slackEndpoint.id}/test`, {});
    assert.equal(tested.status, 200, tested.text);
    assert.equal(tested.body.delivered, true, tested.text);
    const testPost = slack.posts.at(-1)!;
    assert.deepEqual(testPost.problems, []);
    assert.equal(testPost.headers['webhook-signature'], undefined);
    assert.match(JSON.parse(testPost.body).text, /^Test event/);
  });
});
