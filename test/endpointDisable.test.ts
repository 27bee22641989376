// A failing team endpoint, on the real servers: after ENDPOINT_DISABLE_AFTER_SECONDS of nothing but failures it is
// disabled, an endpoint_disabled operator alert names it once, it is sent nothing more; enabled again, its streak
// starts over and the next event reaches it; its recover sends what it missed, once. A disabling whose alert was
// never started (its write's answer lost) is alerted by the sweep.
import assert from 'node:assert/strict';
import { endpointDisabledRaiser } from '../client/operator';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, sweepActivitiesOf, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';
import { deferred } from './support/deferred';
import { waitUntil } from './support/waitUntil';

describe('team endpoints: a failing endpoint', function () {
  this.timeout(120_000);
  let stack: FamilyStack;
  let receiver: CallbackReceiver;
  let opsWebhook: CallbackReceiver;
  let admin: ApiClient;
  let alice: ApiClient;
  /** The worker's disabling writes land, and their answer is lost (a connection reset after the write). */
  let loseDisableAnswers = false;

  before(async () => {
    receiver = await CallbackReceiver.start();
    opsWebhook = await CallbackReceiver.start();
    stack = await startFamilyStack(
      {
        CALLBACK_ALLOW_PRIVATE: '1',
        CALLBACK_RETRY_SECONDS: '1,1,1,1,1,1',
        ENDPOINT_DISABLE_AFTER_SECONDS: '2',
        OPS_ALERT_WEBHOOK_URL: opsWebhook.url,
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      {
        workerStores: (stores) => ({
          ...stores,
          endpoints: {
            ...stores.endpoints,
            async disableFailing(...args) {
              const disabled = await stores.endpoints.disableFailing(...args);
              if (disabled && loseDisableAnswers) throw new Error('connection reset after the write');
              return disabled;
            },
          },
        }),
      },
    );
    admin = adminOf(stack.anonymous, 'ada', 'acme');
    alice = stack.anonymous.as('alice', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
    await opsWebhook?.close();
  });

  const finishRun = async (title: string, by = alice): Promise<string> => {
    const created = await by.post('/api/v1/runs', { title });
    assert.equal(created.status, 201, created.text);
    const done = await by.post(`/api/v1/runs/${created.body.id}/complete`, { finalAnswer: 'ok' });
    assert.equal(done.status, 200, done.text);
    return created.body.id as string;
  };
  const alerts = () =>
    opsWebhook.received
      .map((call) => JSON.parse(call.body) as { kind: string; at: string; detail: { endpointId?: string } })
      .filter((alert) => alert.kind === 'endpoint_disabled');

  it('is disabled after failing for ENDPOINT_DISABLE_AFTER_SECONDS, alerts once, and takes events again once enabled', async () => {
    const startedAt = new Date();
    receiver.answerAlways({ status: 500 });
    const created = await admin.post('/api/v1/endpoints', {
      url: receiver.url,
      eventTypes: ['run.finished'],
    });
    assert.equal(created.status, 201, created.text);
    const path = `/api/v1/endpoints/${created.body.id}`;
    const failing = await finishRun('failing');
    await waitUntil('disabled', async () => (await admin.get(path)).body.disabled === true, {
      timeoutMs: 60_000,
    });
    const disabled = (await admin.get(path)).body;
    assert.equal(disabled.disabledReason, 'failing');
    const failingFor = Date.parse(disabled.updatedAt) - Date.parse(disabled.failingSince);
    assert.ok(failingFor >= 2000, `disabled after ${failingFor} ms of failures`);
    await waitUntil('the operator alert', () => alerts().length === 1, { seen: () => `${alerts().length}` });
    assert.equal(alerts()[0].detail.endpointId, created.body.id);
    await waitUntil(
      'the alert no longer owed',
      async () => (await stack.stores.endpoints.getById(created.body.id))?.alertOwedAt === undefined,
    );

    // Disabled: nothing more is sent, a new event included.
    const sentWhileDisabled = receiver.received.length;
    const skipped = await finishRun('while disabled');
    await stack.client.workflow.getHandle(`${skipped}:end`).result();
    assert.equal(receiver.received.length, sentWhileDisabled);

    receiver.answerAlways({ status: 204 });
    const enabled = await admin.request('PATCH', path, { disabled: false });
    assert.equal(enabled.status, 200, enabled.text);
    assert.equal(enabled.body.disabledReason, undefined);
    assert.equal(enabled.body.failingSince, undefined);
    const next = await finishRun('enabled again');
    await waitUntil('delivered', () =>
      receiver.received.some((call) => JSON.parse(call.body).run?.id === next && call.status === 204),
    );
    assert.equal(alerts().length, 1, 'one alert per disabling');
    assert.equal((await admin.get(path)).body.disabled, false);

    // The recover sends what it missed: the end that failed, and the one raised while it was disabled. The failing
    // end's own schedule may still deliver it once enabled (a retry due after the enabling): settled first, and
    // then owed only if it did not.
    await stack.client.workflow.getHandle(`team-event|ev:${next}:end`).result();
    await stack.client.workflow.getHandle(`team-event|ev:${failing}:end`).result();
    const deliveredBefore = (runId: string) =>
      receiver.received.some((call) => call.status === 204 && JSON.parse(call.body).run?.id === runId);
    const owed = [failing, skipped].filter((runId) => !deliveredBefore(runId)).length;
    assert.ok(owed >= 1, 'the end raised while disabled is owed');
    const recovered = await admin.post(`${path}/recover`, { since: startedAt.toISOString() });
    assert.equal(recovered.status, 202, recovered.text);
    const result = await stack.client.workflow.getHandle(recovered.body.id).result();
    assert.deepEqual(result, { found: owed, delivered: owed, failed: 0 });
    const deliveredRuns = receiver.received
      .filter((call) => call.status === 204)
      .map((call) => JSON.parse(call.body).run.id as string)
      .sort();
    assert.deepEqual(deliveredRuns, [failing, skipped, next].sort());
    const again = await admin.post(`${path}/recover`, { since: startedAt.toISOString() });
    assert.equal(again.status, 202, again.text);
    assert.deepEqual(await stack.client.workflow.getHandle(again.body.id).result(), {
      found: 0,
      delivered: 0,
      failed: 0,
    });
  });

  it('a delivery that succeeded after a failure began the streak ends it, though its attempt read the endpoint before', async () => {
    const slowReceiver = await CallbackReceiver.start();
    try {
      const initechAdmin = adminOf(stack.anonymous, 'ivy', 'initech');
      const ian = stack.anonymous.as('ian', 'initech');
      const created = await initechAdmin.post('/api/v1/endpoints', {
        url: slowReceiver.url,
        eventTypes: ['run.finished'],
      });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id as string;
      const endpoints = stack.stores.endpoints;

      // A success a moment ago: the next delivery's attempt, reading it, has no streak to end.
      await finishRun('delivered', ian);
      await waitUntil('its success written', async () => !!(await endpoints.getById(id))?.lastSuccessAt, {
        timeoutMs: 60_000,
      });

      // That delivery is on the wire (the receiver holds its answer) when another event's attempt fails.
      const answer = deferred();
      slowReceiver.answer({ status: 204, heldUntil: answer.promise });
      slowReceiver.answerAlways({ status: 500 });
      const held = await finishRun('held, then delivered', ian);
      await waitUntil('the held delivery arrived', () => slowReceiver.open === 1, { timeoutMs: 60_000 });
      const failing = await finishRun('failing', ian);
      await waitUntil('the streak begun', async () => !!(await endpoints.getById(id))?.failingSince, {
        timeoutMs: 60_000,
      });
      const deliveredAfter = new Date();
      answer.resolve();
      await stack.client.workflow.getHandle(`team-event|ev:${held}:end`).result();

      // The failing event's schedule (six tries a second apart) outlasts the threshold twice: it is disabled, for
      // a streak that began after the delivery, not before it.
      await waitUntil('disabled', async () => (await endpoints.getById(id))?.disabled === true, {
        timeoutMs: 60_000,
      });
      const { failingSince } = (await endpoints.getById(id))!.disabling!;
      assert.ok(
        failingSince >= deliveredAfter,
        `disabled for a streak since ${failingSince.toISOString()}, which a delivery after ` +
          `${deliveredAfter.toISOString()} had ended`,
      );
      await stack.client.workflow.getHandle(`team-event|ev:${failing}:end`).result();
    } finally {
      await slowReceiver.close();
    }
  });

  it('an endpoint whose disabling write lost its answer is alerted by the sweep, once', async () => {
    const failingReceiver = await CallbackReceiver.start();
    try {
      failingReceiver.answerAlways({ status: 500 });
      loseDisableAnswers = true;
      const globexAdmin = adminOf(stack.anonymous, 'gus', 'globex');
      const created = await globexAdmin.post('/api/v1/endpoints', {
        url: failingReceiver.url,
        eventTypes: ['run.finished'],
      });
      assert.equal(created.status, 201, created.text);
      const id = created.body.id as string;
      const runId = await finishRun('failing, its disabling unanswered', stack.anonymous.as('bob', 'globex'));
      await waitUntil(
        'disabled',
        async () => (await globexAdmin.get(`/api/v1/endpoints/${id}`)).body.disabled,
      );
      // Its delivery schedule ends (the endpoint disabled): nothing more will raise the alert on its own.
      await stack.client.workflow.getHandle(`team-event|ev:${runId}:end`).result();
      const alertsOf = () => alerts().filter((alert) => alert.detail.endpointId === id);

      // The sweep's next pass, past the alert's own start's grace.
      const later = new Date(Date.now() + 5 * 60_000);
      const sweep = sweepActivitiesOf(stack, {
        now: () => later,
        endpointDisabled: endpointDisabledRaiser(stack.client, stack.config.temporalTaskQueue),
      });
      await sweep.sweepOnce();
      await waitUntil('the endpoint_disabled alert', () => alertsOf().length === 1, {
        seen: () => `${alertsOf().length}`,
      });
      assert.equal((await stack.stores.endpoints.getById(id))?.alertOwedAt, undefined, 'no longer owed');
      await sweep.sweepOnce();
      await stack.client.workflow
        .getHandle(`ops|endpoint:${id}:disabled:${Date.parse(alertsOf()[0].at)}`)
        .result();
      assert.equal(alertsOf().length, 1, 'alerted once');
    } finally {
      loseDisableAnswers = false;
      await failingReceiver.close();
    }
  });
});

describe('team endpoints: disabling a failing one against the store as it is now', function () {
  this.timeout(60_000);
  let stack: FamilyStack;
  let receiver: CallbackReceiver;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack({ CALLBACK_ALLOW_PRIVATE: '1', SWEEP_INTERVAL_SECONDS: '3600' });
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });

  /** An endpoint failing since six days ago, as an attempt that started then read it. */
  async function failingForDays(name: string) {
    const admin = adminOf(stack.anonymous, `${name}-admin`, name);
    const created = await admin.post('/api/v1/endpoints', { url: receiver.url, eventTypes: ['run.failed'] });
    assert.equal(created.status, 201, created.text);
    const now = new Date();
    const since = new Date(now.getTime() - 6 * 24 * 3600_000);
    const endpoints = stack.stores.endpoints;
    const read = await endpoints.recordFailure((await endpoints.getById(created.body.id))!, since);
    return {
      id: created.body.id as string,
      read,
      now,
      threshold: new Date(now.getTime() - 5 * 24 * 3600_000),
    };
  }

  it("two attempts that read the endpoint before either failed keep the streak's first start", async () => {
    const admin = adminOf(stack.anonymous, 'streak-admin', 'streak');
    const created = await admin.post('/api/v1/endpoints', { url: receiver.url, eventTypes: ['run.failed'] });
    assert.equal(created.status, 201, created.text);
    const endpoints = stack.stores.endpoints;
    const [first, second] = [
      await endpoints.getById(created.body.id),
      await endpoints.getById(created.body.id),
    ];
    const earlier = new Date(Date.now() - 60_000);
    await endpoints.recordFailure(first!, earlier);
    const told = await endpoints.recordFailure(second!, new Date());
    assert.deepEqual(told.failingSince, earlier, 'what the later failure is told');
    assert.deepEqual((await endpoints.getById(created.body.id))?.failingSince, earlier, 'what is stored');
  });

  it('an endpoint that succeeded since the failing attempt read it is not disabled', async () => {
    const { id, read, now, threshold } = await failingForDays('succeeded-since');
    assert.ok(read.failingSince);
    await stack.stores.endpoints.recordSuccess(id, now);
    assert.equal(await stack.stores.endpoints.disableFailing(id, threshold, now), false);
    assert.equal((await stack.stores.endpoints.getById(id))!.disabled, false);
  });

  it('two attempts at the threshold at once disable it once (one endpoint_disabled alert)', async () => {
    const { id, now, threshold } = await failingForDays('both-at-once');
    const answers = await Promise.all([
      stack.stores.endpoints.disableFailing(id, threshold, now),
      stack.stores.endpoints.disableFailing(id, threshold, now),
    ]);
    assert.deepEqual(answers.sort(), [false, true]);
  });
});
