// The studio's run page and callbacks, in a real browser (Debian's Chromium driven by playwright-core) against the
// real API, worker, Temporal and FerretDB, with a loopback callback receiver: the attempt log per episode, and
// the "Redeliver" button on a callback that gave up, and the runs page's "Recover failed callbacks" form.
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import type { Page } from 'playwright-core';
import { freePort } from '../platform/embedded';
import { CallbackReceiver } from './support/callbackReceiver';
import { launchChromium, type LaunchedChromium } from './support/chromium';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import type { ApiClient } from './support/harness';

describe('studio run page: callback attempts and redeliver (Chromium)', function () {
  let receiver: CallbackReceiver;
  let stack: FamilyStack;
  let origin: string;
  let alice: ApiClient;
  let client: Client;
  let browser: LaunchedChromium;
  let page: Page;

  before(async () => {
    receiver = await CallbackReceiver.start();
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    stack = await startFamilyStack({
      HOST: '127.0.0.1',
      PORT: String(port),
      CALLBACK_ALLOW_PRIVATE: '1',
      CALLBACK_RETRY_SECONDS: '1',
      SWEEP_INTERVAL_SECONDS: '3600',
    });
    ({ client } = stack);
    alice = stack.anonymous.as('alice', 'acme');
    browser = await launchChromium();
    ({ page } = browser);
    await page.goto(`${origin}/`);
    await page.getByLabel('Access token').fill((await alice.token) ?? '');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
  });
  after(async () => {
    await browser?.close();
    await stack?.stop();
    await receiver?.close();
  });

  it('shows each attempt of a callback that gave up, and "Redeliver" sends it again with the same webhook-id', async () => {
    receiver.answerAlways({ status: 503 });
    const created = await alice.post('/api/v1/runs', {
      title: 'Ledger close',
      callback: { url: receiver.url },
    });
    const runId = created.body.id as string;
    await alice.post(`/api/v1/runs/${runId}/cancel`);
    assert.equal(
      ((await client.workflow.getHandle(`${runId}:end`).result()) as { callback: string }).callback,
      'gave_up',
    );
    receiver.answerAlways({ status: 204 });

    await page.goto(`${origin}/runs/${runId}`);
    const attempts = page.getByRole('table', { name: 'Callback attempts of end' });
    await attempts.waitFor();
    const rows = attempts.locator('tbody tr');
    assert.equal(await rows.count(), 2);
    assert.match(await rows.nth(0).innerText(), /#1[\s\S]*HTTP 503[\s\S]*Retry/);
    assert.match(await rows.nth(1).innerText(), /#2[\s\S]*HTTP 503/);
    // "Next try": the time the log says the next attempt was due (relative, the exact time on hover); none after
    // the last.
    const logged = (await alice.get(`/api/v1/runs/${runId}/episodes`)).body.episodes[0].callbackAttempts;
    const nextTry = (row: number) => rows.nth(row).locator('td').nth(5);
    assert.equal(await nextTry(0).locator('time').getAttribute('datetime'), logged[0].nextAttemptAt);
    assert.equal(await nextTry(1).innerText(), '—');
    const cell = page.locator(`tr[data-episode-id="${runId}:end"] td`).nth(4);
    assert.equal(await cell.innerText(), 'Gave up: http 503');

    await page.getByRole('button', { name: 'Redeliver' }).click();
    // The page follows the redelivery until its attempt is in the log, then shows it and drops the button.
    await page.getByRole('cell', { name: 'Delivered', exact: true }).waitFor({ timeout: 15_000 });
    assert.equal(await rows.count(), 3);
    assert.match(await rows.nth(2).innerText(), /#3 \(Redelivery\)[\s\S]*HTTP 204[\s\S]*Delivered/);
    assert.equal(await page.getByRole('button', { name: 'Redeliver' }).count(), 0);
    assert.equal(await cell.innerText(), 'Redelivered');
    assert.equal(receiver.received.length, 3);
    assert.equal(receiver.received[2].headers['webhook-id'], `${runId}:end`);
  });

  it('a delivered callback lists its attempt and offers no "Redeliver"', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Digest', callback: { url: receiver.url } });
    const runId = created.body.id as string;
    await alice.post(`/api/v1/runs/${runId}/complete`, { finalAnswer: 'sent' });
    await client.workflow.getHandle(`${runId}:end`).result();
    await page.goto(`${origin}/runs/${runId}`);
    const attempts = page.getByRole('table', { name: 'Callback attempts of end' });
    await attempts.waitFor();
    assert.equal(await attempts.locator('tbody tr').count(), 1);
    assert.equal(await page.getByRole('button', { name: 'Redeliver' }).count(), 0);
  });

  it('a failed run without a callback shows its episodes and no stray text after them', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Quarterly report' });
    const runId = created.body.id as string;
    await alice.post(`/api/v1/runs/${runId}/fail`, {
      error: { code: 'tool_crashed', message: 'The SQL tool crashed.' },
    });
    await client.workflow.getHandle(`${runId}:end`).result();
    await page.goto(`${origin}/runs/${runId}`);
    await page.locator(`tr[data-episode-id="${runId}:end"]`).waitFor();
    assert.equal(await page.getByRole('heading', { name: 'Callback attempts' }).count(), 0);
    // Every text node of the page's main area outside the cards: nothing may be printed between or after them.
    const stray = await page.evaluate(() =>
      Array.from(document.getElementById('main')?.childNodes ?? [])
        .filter((node) => node.nodeType === Node.TEXT_NODE && (node.textContent ?? '').trim() !== '')
        .map((node) => node.textContent),
    );
    assert.deepEqual(stray, []);
    assert.doesNotMatch(await page.locator('#main').innerText(), /\bnull\b/);
  });

  it('"Recover failed callbacks" on the runs page sends again what gave up, and shows its progress', async () => {
    receiver.answerAlways({ status: 503 });
    const created = await alice.post('/api/v1/runs', { title: 'Outage', callback: { url: receiver.url } });
    const runId = created.body.id as string;
    await alice.post(`/api/v1/runs/${runId}/cancel`);
    assert.equal(
      ((await client.workflow.getHandle(`${runId}:end`).result()) as { callback: string }).callback,
      'gave_up',
    );
    receiver.answerAlways({ status: 204 });
    const before = receiver.received.length;

    await page.goto(`${origin}/`);
    const form = page.getByRole('form', { name: 'Recover failed callbacks' });
    await form.waitFor();
    // The window starts a day ago by default: the callback that gave up above (the earlier ones were delivered).
    await form.getByRole('button', { name: 'Recover' }).click();
    await form
      .getByRole('status')
      .getByText('Done: 1 found, 1 sent, 1 delivered, 0 failed.')
      .waitFor({ timeout: 20_000 });
    assert.equal(receiver.received.length, before + 1);
    assert.equal(receiver.received.at(-1)?.headers['webhook-id'], `${runId}:end`);
  });
});
