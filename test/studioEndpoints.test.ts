// The studio's Endpoints page in a real browser (Debian's Chromium, playwright-core) against the real API, worker,
// Temporal and FerretDB, with a loopback receiver: an admin adds an endpoint with two event types and sees its
// secret once, sends a test event the receiver gets, sees a run's event in the attempt log, rotates the secret and
// disables it; a non-admin is told plainly. Also GET /endpoints/:id/attempts itself: paged, admins only, per team.
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { freePort } from '../platform/embedded';
import { adminOf } from './support/admin';
import { CallbackReceiver } from './support/callbackReceiver';
import { launchChromium, type LaunchedChromium } from './support/chromium';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';
import { waitUntil } from './support/waitUntil';

const TWO_TYPES = ['run.finished', 'run.failed'];

describe('studio: endpoints page (Chromium)', function () {
  this.timeout(180_000);
  let stack: FamilyStack;
  let origin: string;
  let receiver: CallbackReceiver;
  let admin: ApiClient; // ada, an admin of acme
  let dave: ApiClient; // a member of acme, not an admin
  let browser: LaunchedChromium;
  let page: Page;
  const pageExceptions: string[] = [];

  before(async () => {
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    stack = await startFamilyStack({
      HOST: '127.0.0.1',
      PORT: String(port),
      CALLBACK_ALLOW_PRIVATE: '1',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    receiver = await CallbackReceiver.start();
    admin = adminOf(stack.anonymous, 'ada', 'acme');
    dave = stack.anonymous.as('dave', 'acme');
    browser = await launchChromium();
    page = browser.page;
    page.on('pageerror', (e) => pageExceptions.push(e.message));
  });

  after(async () => {
    await browser?.close();
    await stack?.stop();
    await receiver?.close();
  });

  async function signIn(client: ApiClient): Promise<void> {
    await page.evaluate(() => localStorage.clear()).catch(() => undefined);
    await page.goto(`${origin}/`);
    await page.getByLabel('Access token').fill((await client.token) ?? '');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
  }

  const card = () => page.locator('section.endpoint');

  it('an admin adds an endpoint, sees its secret once, tests it, sees an attempt, rotates and disables it', async () => {
    await signIn(admin);
    await page.getByRole('link', { name: 'Endpoints' }).click();
    await page.getByRole('heading', { level: 1, name: 'Endpoints' }).waitFor();
    await page.getByText('Your team has no endpoints yet.').waitFor();

    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel('Description (optional)').fill('Incident bot');
    for (const type of TWO_TYPES) await page.getByLabel(type, { exact: true }).check();
    await page.getByRole('button', { name: 'Add', exact: true }).click();
    const secret = (await card().locator('code.secret').textContent()) ?? '';
    assert.match(secret, /^whsec_/);
    const [created] = (await admin.get('/api/v1/endpoints')).body.endpoints;
    assert.deepEqual(created.eventTypes, TWO_TYPES);
    assert.equal(created.description, 'Incident bot');

    // Shown once: drawn again, the page has no secret.
    await page.reload();
    await card().getByText('No attempts yet.').waitFor();
    assert.equal(await card().locator('code.secret').count(), 0);

    await card().getByRole('button', { name: 'Send test event' }).click();
    await card().getByText('Test event sent: HTTP 204.').waitFor();
    const [test] = await receiver.waitFor(1);
    const event = new Webhook(secret).verify(test.body, headersOf(test.headers)) as { type: string };
    assert.equal(event.type, 'endpoint.test');

    // A run's end reaches the endpoint and shows in its attempt log.
    const run = await dave.post('/api/v1/runs', { title: 'Nightly sync' });
    await dave.post(`/api/v1/runs/${run.body.id}/complete`, { finalAnswer: 'done' });
    await receiver.waitFor(2);
    await waitUntil(
      'the attempt shows in the log',
      async () => {
        await card().getByRole('button', { name: 'Refresh' }).click();
        return (await card().locator('tbody tr').count()) === 1;
      },
      { intervalMs: 500 },
    );
    const row = card().locator('tbody tr');
    await row.getByText('HTTP 204').waitFor();
    await row.getByRole('link', { name: run.body.id }).waitFor();

    await card().getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = (await card().locator('code.secret').textContent()) ?? '';
    assert.match(rotated, /^whsec_/);
    assert.notEqual(rotated, secret);

    await card().getByRole('button', { name: 'Recover' }).click();
    await card().getByText('Recovering: every event it missed in that window is sent again.').waitFor();

    await card().getByRole('button', { name: 'Disable' }).click();
    await card().getByRole('button', { name: 'Enable' }).waitFor();
    assert.equal((await admin.get(`/api/v1/endpoints/${created.id}`)).body.disabled, true);
    assert.deepEqual(pageExceptions, []);
  });

  it('a non-admin is told that only admins manage endpoints', async () => {
    await signIn(dave);
    await page.goto(`${origin}/endpoints`);
    await page.getByRole('alert').getByText("Only your team's admins manage its endpoints.").waitFor();
    assert.equal(await page.getByRole('button', { name: 'Add', exact: true }).count(), 0);
  });

  it('GET /endpoints/:id/attempts pages newest first, for admins of the team only', async () => {
    const [endpoint] = (await admin.get('/api/v1/endpoints')).body.endpoints;
    const path = `/api/v1/endpoints/${endpoint.id}/attempts`;
    await admin.request('PATCH', `/api/v1/endpoints/${endpoint.id}`, { disabled: false });
    const run = await dave.post('/api/v1/runs', { title: 'Churn analysis' });
    await dave.post(`/api/v1/runs/${run.body.id}/fail`, { error: { code: 'x', message: 'crashed' } });
    await waitUntil('two attempts', async () => (await admin.get(path)).body.attempts.length === 2);

    const first = await admin.get(`${path}?limit=1`);
    assert.equal(first.body.attempts.length, 1);
    assert.equal(first.body.attempts[0].runId, run.body.id);
    assert.equal(first.body.attempts[0].result, 'delivered');
    assert.ok(first.body.nextBefore);
    const second = await admin.get(`${path}?limit=1&before=${encodeURIComponent(first.body.nextBefore)}`);
    assert.equal(second.body.attempts.length, 1);
    assert.notEqual(second.body.attempts[0].runId, run.body.id);
    assert.equal(second.body.nextBefore, undefined);

    assert.equal((await admin.get(`${path}?limit=201`)).status, 400);
    assert.equal((await dave.get(path)).status, 403);
    assert.equal((await adminOf(stack.anonymous, 'eve', 'globex').get(path)).status, 404);
  });

  it("a refresh still loading when the secret is rotated does not wipe the new secret; one card's failed log read hides no other", async () => {
    // Two endpoints of their own: the first one's card is where the refresh and the rotation meet.
    const made = [];
    for (const description of ['Refreshed', 'Unreadable log']) {
      const res = await admin.post('/api/v1/endpoints', {
        url: receiver.url,
        eventTypes: TWO_TYPES,
        description,
      });
      assert.equal(res.status, 201, res.text);
      made.push(res.body.id as string);
    }
    const [firstId, secondId] = made;
    const cardOf = (id: string) => page.locator(`section.endpoint[data-endpoint-id="${id}"]`);
    await signIn(admin);
    await page.goto(`${origin}/endpoints`);
    await cardOf(firstId).waitFor();

    // The refresh's read of the list held until the rotation has shown its secret.
    let releaseList!: () => void;
    const listHeld = new Promise<void>((resolve) => (releaseList = resolve));
    await page.route(`${origin}/api/v1/endpoints`, async (route) => {
      await listHeld;
      await route.continue();
    });
    await cardOf(firstId).getByRole('button', { name: 'Refresh' }).click();
    await cardOf(firstId).getByRole('button', { name: 'Rotate secret' }).click();
    await cardOf(firstId).getByText('Secret rotated').waitFor();
    const rotated = (await cardOf(firstId).locator('code.secret').textContent()) ?? '';
    assert.match(rotated, /^whsec_/);
    const listed = page.waitForResponse(`${origin}/api/v1/endpoints`);
    releaseList();
    await listed;
    await page.unroute(`${origin}/api/v1/endpoints`);
    // Whatever the refresh would draw comes after the secret was shown: it is still on screen.
    await waitUntil('the refresh done', async () => (await page.locator('button:disabled').count()) === 0);
    assert.equal(await cardOf(firstId).locator('code.secret').textContent(), rotated);

    // The second endpoint's attempt log cannot be read: its card says so, and every other card shows.
    await page.route(`${origin}/api/v1/endpoints/${secondId}/attempts*`, (route) =>
      route.fulfill({ status: 503, contentType: 'application/json', body: '{"error":"store unavailable"}' }),
    );
    await page.goto(`${origin}/endpoints`);
    await cardOf(firstId).getByRole('heading', { name: receiver.url }).waitFor();
    await cardOf(secondId).getByText('The attempts could not be loaded: store unavailable').waitFor();
    await page.unroute(`${origin}/api/v1/endpoints/${secondId}/attempts*`);
    for (const id of made)
      assert.equal((await admin.request('DELETE', `/api/v1/endpoints/${id}`)).status, 204);
    assert.deepEqual(pageExceptions, []);
  });
});

/** A received request's headers as standardwebhooks reads them. */
function headersOf(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  return Object.fromEntries(
    Object.entries(headers).flatMap(([name, value]) => (typeof value === 'string' ? [[name, value]] : [])),
  );
}
