// Team endpoints' management, on the real servers: team admins only, every field bounded, the URL through the
// outbound guard at registration, the whsec_ secret shown once (at creation and rotation), at most
// ENDPOINTS_PER_TEAM per team (a burst of creates included), another team's endpoints not found, and the test
// event verified by a receiver with the standardwebhooks library.
import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';

const PER_TEAM = 3;

describe('team endpoints: management', function () {
  this.timeout(120_000);
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let admin: ApiClient;

  before(async () => {
    receiver = await CallbackReceiver.start();
    stack = await startFamilyStack({
      CALLBACK_ALLOW_PRIVATE: '1',
      ENDPOINTS_PER_TEAM: String(PER_TEAM),
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    admin = adminOf(stack.anonymous, 'ada', 'acme');
  });
  after(async () => {
    await stack?.stop();
    await receiver?.close();
  });
  afterEach(async () => {
    const listed = await admin.get('/api/v1/endpoints');
    for (const endpoint of listed.body?.endpoints ?? [])
      await admin.delete(`/api/v1/endpoints/${endpoint.id}`);
  });

  const create = (as: ApiClient, body: Record<string, unknown>) =>
    as.post('/api/v1/endpoints', { url: receiver.url, eventTypes: ['run.finished'], ...body });

  it('creates, shows the secret once, lists, reads, changes and removes; never shows the secret again', async () => {
    const created = await create(admin, {
      eventTypes: ['run.finished', 'run.stalled'],
      description: 'incident tool',
      rateLimitPerSecond: 5,
    });
    assert.equal(created.status, 201, created.text);
    const { id, secret } = created.body;
    assert.match(id, /^ep_/);
    assert.match(secret, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(created.body.format, 'standard');
    assert.equal(created.body.disabled, false);

    const listed = await admin.get('/api/v1/endpoints');
    assert.equal(listed.status, 200);
    assert.deepEqual(
      listed.body.endpoints.map((e: { id: string }) => e.id),
      [id],
    );
    const one = await admin.get(`/api/v1/endpoints/${id}`);
    assert.equal(one.status, 200);
    assert.deepEqual(one.body.eventTypes, ['run.finished', 'run.stalled']);
    for (const shown of [listed.text, one.text])
      assert.ok(!shown.includes(secret), 'the secret was shown again');

    const changed = await admin.request('PATCH', `/api/v1/endpoints/${id}`, {
      eventTypes: ['run.failed'],
      description: null,
      disabled: true,
    });
    assert.equal(changed.status, 200, changed.text);
    assert.deepEqual(changed.body.eventTypes, ['run.failed']);
    assert.equal(changed.body.description, undefined);
    assert.equal(changed.body.disabled, true);
    assert.equal(changed.body.rateLimitPerSecond, 5);

    const rotated = await admin.post(`/api/v1/endpoints/${id}/rotate-secret`);
    assert.equal(rotated.status, 200, rotated.text);
    assert.deepEqual(Object.keys(rotated.body), ['secret']);
    assert.notEqual(rotated.body.secret, secret);

    assert.equal((await admin.delete(`/api/v1/endpoints/${id}`)).status, 204);
    assert.equal((await admin.get(`/api/v1/endpoints/${id}`)).status, 404);
  });

  it('is for team admins only; another team sees none of it', async () => {
    const member = stack.anonymous.as('bob', 'acme');
    assert.equal((await create(member, {})).status, 403);
    assert.equal((await member.get('/api/v1/endpoints')).status, 403);
    const created = await create(admin, {});
    assert.equal(created.status, 201, created.text);
    const other = adminOf(stack.anonymous, 'eve', 'globex');
    const path = `/api/v1/endpoints/${created.body.id}`;
    assert.equal((await other.get(path)).status, 404);
    assert.equal((await other.request('PATCH', path, { disabled: true })).status, 404);
    assert.equal((await other.post(`${path}/rotate-secret`)).status, 404);
    assert.equal((await other.post(`${path}/test`)).status, 404);
    assert.equal((await other.delete(path)).status, 404);
    assert.deepEqual((await other.get('/api/v1/endpoints')).body.endpoints, []);
    assert.equal((await admin.get(path)).body.disabled, false);
  });

  it("rotations of one endpoint's secret at the same moment: no two replace the same secret, the last one's is kept", async () => {
    const created = await create(admin, {});
    assert.equal(created.status, 201, created.text);
    const at = new Date();
    const next = Array.from({ length: 20 }, (_, i) => `whsec_race${i}`);
    const answers = await Promise.all(
      next.map((secret) => stack.stores.endpoints.rotateSecret('acme', created.body.id, secret, at)),
    );
    const won = answers.flatMap((a) => (a && a !== 'conflict' ? [a] : []));
    const replaced = won.map((row) => row.previousSecret.secret);
    assert.equal(new Set(replaced).size, won.length, `secrets replaced twice: ${replaced.join(', ')}`);
    assert.ok(
      answers.some((a) => a === 'conflict'),
      'the rotations that lost say so',
    );
    // The winners form one chain from the first secret to the one kept.
    const stored = await stack.stores.endpoints.get('acme', created.body.id);
    const byPrevious = new Map(won.map((row) => [row.previousSecret.secret, row.secret]));
    let secret = created.body.secret as string;
    for (let n = 0; n < won.length; n++)
      secret = byPrevious.get(secret) ?? assert.fail(`no rotation of ${secret}`);
    assert.equal(stored?.secret, secret);
    const alone = await admin.post(`/api/v1/endpoints/${created.body.id}/rotate-secret`);
    assert.equal(alone.status, 200, 'a rotation alone wins');
  });

  it("an unknown or another team's endpoint is 404 before its test or recover is counted", async () => {
    const created = await create(admin, {});
    assert.equal(created.status, 201, created.text);
    const path = `/api/v1/endpoints/${created.body.id}`;
    const other = adminOf(stack.anonymous, 'eve', 'globex');
    // More than either bound allows (5 tests a minute an endpoint, 10 recovers an hour a team).
    const since = new Date(Date.now() - 60_000).toISOString();
    for (let i = 0; i < 11; i++) {
      assert.equal((await other.post(`${path}/test`)).status, 404);
      assert.equal((await admin.post('/api/v1/endpoints/ep_unknown/recover', { since })).status, 404);
    }
    assert.equal((await admin.post(`${path}/test`)).status, 200, "the owner's tests are all left");
    const recover = await admin.post(`${path}/recover`, { since });
    assert.equal(recover.status, 202, recover.text);
  });

  it('refuses what is out of bounds, an unknown event type and a URL the outbound guard refuses', async () => {
    const refusals: [Record<string, unknown>, RegExp][] = [
      [{ eventTypes: [] }, /at least one/],
      [{ eventTypes: ['run.exploded'] }, /eventTypes/],
      [{ eventTypes: ['endpoint.test'] }, /eventTypes/],
      [{ eventTypes: ['run.failed', 'run.failed'] }, /repeat/],
      [{ description: 'x'.repeat(501) }, /description/],
      [{ rateLimitPerSecond: 0 }, /rateLimitPerSecond/],
      [{ rateLimitPerSecond: 1001 }, /rateLimitPerSecond/],
      [{ rateLimitPerSecond: 1.5 }, /rateLimitPerSecond/],
      [{ url: 'ftp://example.com/x' }, /url/],
      [{ url: 'https://user:pw@example.com/x' }, /url/],
      [{ format: 'teams' }, /format/],
      [{ secret: 'whsec_AAAA' }, /secret/],
    ];
    for (const [body, message] of refusals) {
      const res = await create(admin, body);
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.match(res.body.error, message, JSON.stringify(body));
    }
    // CALLBACK_ALLOW_PRIVATE lets loopback through, never the metadata address nor an unspecified one.
    const guarded = await create(admin, { url: 'http://0.0.0.0/hook' });
    assert.equal(guarded.status, 400, guarded.text);
    assert.match(guarded.body.error, /^endpoint url refused/);
    assert.deepEqual((await admin.get('/api/v1/endpoints')).body.endpoints, []);
  });

  it('holds at most ENDPOINTS_PER_TEAM, a burst of creates included; a removal frees a place', async () => {
    const burst = await Promise.all(Array.from({ length: PER_TEAM + 4 }, () => create(admin, {})));
    const statuses = burst.map((res) => res.status).sort();
    assert.deepEqual(statuses, [...Array(PER_TEAM).fill(201), ...Array(4).fill(409)]);
    assert.equal((await admin.get('/api/v1/endpoints')).body.endpoints.length, PER_TEAM);
    const first = burst.find((res) => res.status === 201)!.body.id;
    assert.equal((await admin.delete(`/api/v1/endpoints/${first}`)).status, 204);
    assert.equal((await create(admin, {})).status, 201);
    assert.equal((await create(admin, {})).status, 409);
  });

  it("an admin's creates and removals in a loop keep one row per place, not one per create", async () => {
    const churner = adminOf(stack.anonymous, 'cy', 'churn');
    for (let i = 0; i < 10; i++) {
      const created = await create(churner, {});
      assert.equal(created.status, 201, created.text);
      assert.equal((await churner.delete(`/api/v1/endpoints/${created.body.id}`)).status, 204);
    }
    const rows = await stack.mongo.db.collection('endpoint_slots').countDocuments({ key: 'churn' });
    assert.ok(rows <= PER_TEAM, `${rows} slot rows for ${PER_TEAM} places`);
  });

  it('sends a signed endpoint.test event the endpoint’s secret verifies', async () => {
    const created = await create(admin, {});
    receiver.received.length = 0;
    const res = await admin.post(`/api/v1/endpoints/${created.body.id}/test`);
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body, { delivered: true, status: 204 });
    const [call] = await receiver.waitFor(1);
    const event = new Webhook(created.body.secret).verify(
      call.body,
      call.headers as Record<string, string>,
    ) as {
      type: string;
      teamId: string;
      data: { endpointId: string };
    };
    assert.equal(event.type, 'endpoint.test');
    assert.equal(event.teamId, 'acme');
    assert.equal(event.data.endpointId, created.body.id);
    assert.equal(call.headers['webhook-id'], (event as unknown as { id: string }).id);
  });
});
