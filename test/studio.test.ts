// The studio in a real browser: Debian's Chromium driven by playwright-core, against the real API (serving the
// studio), a real worker, Temporal, FerretDB and the loopback push service. The browser has no reachable push
// service here, so the page's PushManager hands out a subscription the loopback service holds the keys of, and
// pushes reach the service worker through CDP ServiceWorker.deliverPushMessage (support/chromium.ts), carrying
// exactly what the server sent (as the loopback service decrypted it).
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { BrowserContext, Page, Worker as ServiceWorkerHandle } from 'playwright-core';
import webpush from 'web-push';
import type { PushDeviceView } from '../api/episodesView';
import type { Config } from '../config';
import { renderDigest, type PushPayload } from '../domain/push';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import type { Stores } from '../store';
import {
  clickNotification,
  deliverPush as deliverPushTo,
  launchChromium,
  type LaunchedChromium,
} from './support/chromium';
import { startFamilyStack, type FamilyStack } from './support/familyStack';
import { ApiClient, startTestApi } from './support/harness';
import { startPushService, type PushService, type SubscriptionJSON } from './support/pushService';
import { testConfig } from './support/stack';
import { waitUntil } from './support/waitUntil';

const RESULTS = path.join(PROJECT_ROOT, 'test-results');
const TOKEN_KEY = 'flow.studio.token';
const FAKE_SUBSCRIPTION_KEY = '__flowTestSubscription';
const DEPLOY_CHOICES = [
  { id: 'approve', label: 'Approve' },
  { id: 'reject', label: 'Reject' },
];

interface ShownNotification {
  title: string;
  body: string;
  tag: string;
  url: string;
  timestamp: number;
  renotify: boolean;
  silent: boolean;
}

describe('studio (Chromium)', function () {
  let push: PushService;
  let stack: FamilyStack;
  let config: Config;
  let stores: Stores;
  let origin: string; // the API serves the studio; 127.0.0.1 is a secure context for service workers
  let alice: ApiClient; // the studio user, team acme
  let dave: ApiClient; // a teammate who owns some runs and never enables push
  let bob: ApiClient; // a teammate with a browser of his own, notified of the team's runs
  let studioSub: SubscriptionJSON; // what the page's PushManager hands out
  const browsers: LaunchedChromium[] = [];
  const browserLog: string[] = []; // console errors of the page and the worker, shown when a wait fails

  // Shared by the tests that follow one another in alice's browser.
  let context: BrowserContext;
  let page: Page;
  let runId: string;
  let episodeId: string;
  let rawPayload: string;

  before(async function () {
    push = await startPushService();
    const port = await freePort();
    origin = `http://127.0.0.1:${port}`;
    const vapid = webpush.generateVAPIDKeys();
    stack = await startFamilyStack(
      {
        HOST: '127.0.0.1',
        PORT: String(port),
        STUDIO_URL: origin, // deep links point back at this very studio
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
      },
      { push },
    );
    ({ config, stores } = stack);
    assert.equal(stack.api.url, origin);
    alice = stack.anonymous.as('alice', 'acme');
    dave = stack.anonymous.as('dave', 'acme');
    bob = stack.anonymous.as('bob', 'acme');
    studioSub = push.endpoint('studio', { applicationServerKey: vapid.publicKey });

    // A few team runs for the list (dave's: alice keeps the default scope, so none of them pushes to her).
    const finished = await dave.post('/api/v1/runs', { title: 'Nightly data sync' });
    await dave.post(`/api/v1/runs/${finished.body.id}/complete`, { finalAnswer: '1,204 rows synced.' });
    const failed = await dave.post('/api/v1/runs', { title: 'Churn analysis' });
    await dave.post(`/api/v1/runs/${failed.body.id}/fail`, {
      error: { code: 'tool_crashed', message: 'The SQL tool crashed.' },
    });
    await dave.post('/api/v1/runs', { title: 'Weekly digest' });

    ({ context, page } = await launchBrowser());
    context.on('serviceworker', (w) =>
      w.on('console', (m) => browserLog.push(`worker ${m.type()}: ${m.text()}`)),
    );
    page.on('console', (m) => {
      if (m.type() === 'error') browserLog.push(`page error: ${m.text()}`);
    });
    page.on('pageerror', (e) => browserLog.push(`page exception: ${e.message}`));
    await installPushManagerStandIn(context, studioSub);
    await context.grantPermissions(['notifications'], { origin });
  });

  after(async () => {
    for (const browser of browsers) await browser.close();
    await stack?.stop();
    await push?.close();
  });

  /** A fresh Chromium profile (a persistent context: a real profile, not an incognito one). */
  async function launchBrowser(): Promise<LaunchedChromium> {
    const launched = await launchChromium();
    browsers.push(launched);
    return launched;
  }

  /**
   * Stands in PushManager.subscribe/getSubscription in every page of the context: subscribe() records its
   * options and returns a subscription whose toJSON() is `fake` (an endpoint of the loopback push service, whose
   * keys it holds); getSubscription() returns it until unsubscribe().
   */
  async function installPushManagerStandIn(target: BrowserContext, fake: SubscriptionJSON): Promise<void> {
    await target.addInitScript(
      ({ json, storageKey }) => {
        const make = (key: number[]) => ({
          endpoint: json.endpoint,
          expirationTime: null,
          options: { userVisibleOnly: true, applicationServerKey: new Uint8Array(key).buffer },
          toJSON: () => json,
          getKey: () => null,
          unsubscribe: async () => {
            localStorage.removeItem(storageKey);
            return true;
          },
        });
        const proto = PushManager.prototype as unknown as Record<string, unknown>;
        proto.subscribe = async function (options: PushSubscriptionOptionsInit) {
          const key = Array.from(new Uint8Array(options.applicationServerKey as ArrayBuffer));
          localStorage.setItem(
            storageKey,
            JSON.stringify({ userVisibleOnly: options.userVisibleOnly, key, calls: 1 }),
          );
          return make(key);
        };
        proto.getSubscription = async function () {
          const saved = localStorage.getItem(storageKey);
          return saved ? make((JSON.parse(saved) as { key: number[] }).key) : null;
        };
      },
      { json: fake, storageKey: FAKE_SUBSCRIPTION_KEY },
    );
  }

  /** The first push the loopback service accepted for this subscription (the studio's) that matches. */
  /** A run of alice's (title, launch fields) paused on `prompt` with DEPLOY_CHOICES: its id and the question's. */
  async function pausedOnChoices(title: string, prompt: string, launch: Record<string, unknown> = {}) {
    const created = await alice.post('/api/v1/runs', { title, ...launch });
    assert.equal(created.status, 201, created.text);
    const runId = created.body.id as string;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt, choices: DEPLOY_CHOICES });
    assert.equal(paused.status, 200, paused.text);
    const interactionId = paused.body.interactionId as string;
    return { runId, interactionId, tag: `${runId}:input:${interactionId}` };
  }

  /**
   * The service worker's next `times` action POSTs fail as a network error does, before they reach the API
   * (Infinity: every one until `restore`); `failed()` counts them.
   */
  async function failActionPosts(worker: ServiceWorkerHandle, times: number, afterMs = 0) {
    await worker.evaluate(
      ([limit, wait]) => {
        const scope = self as unknown as {
          fetch: typeof fetch;
          __flowFailedActions: number;
          __flowRealFetch?: typeof fetch;
        };
        const realFetch = scope.__flowRealFetch ?? scope.fetch.bind(scope);
        scope.__flowRealFetch = realFetch;
        scope.__flowFailedActions = 0;
        scope.fetch = (input, init) => {
          if (String(input).endsWith('/interactions/actions') && scope.__flowFailedActions < limit) {
            scope.__flowFailedActions++;
            return new Promise((_resolve, reject) =>
              setTimeout(() => reject(new TypeError('Failed to fetch')), wait),
            );
          }
          return realFetch(input, init);
        };
      },
      [times, afterMs] as const,
    );
    return {
      failed: () =>
        worker.evaluate(() => (self as unknown as { __flowFailedActions: number }).__flowFailedActions),
      restore: () =>
        worker.evaluate(() => {
          const scope = self as unknown as { fetch: typeof fetch; __flowRealFetch?: typeof fetch };
          if (scope.__flowRealFetch) scope.fetch = scope.__flowRealFetch;
        }),
    };
  }

  async function pushReceived(match: (payload: PushPayload) => boolean, device = studioSub) {
    return waitUntil(
      `a matching push at ${device.endpoint}`,
      () => push.received(device).find((r) => match(r.payload as PushPayload)),
      { timeoutMs: 60_000, intervalMs: 50, seen: () => push.received(device).map((r) => r.rawText) },
    );
  }

  /** Every POST/DELETE the page sends to the subscriptions route, with its body. */
  function recordSubscriptionCalls(target: Page): { method: string; body: unknown }[] {
    const calls: { method: string; body: unknown }[] = [];
    target.on('request', (request) => {
      if (!request.url().endsWith('/api/v1/notifications/push/subscriptions')) return;
      if (request.method() === 'GET') return;
      calls.push({ method: request.method(), body: request.postDataJSON() as unknown });
    });
    return calls;
  }

  async function signIn(target: Page, client: ApiClient): Promise<void> {
    await target.goto(`${origin}/`);
    await target.getByLabel('Access token').fill((await client.token) ?? '');
    await target.getByRole('button', { name: 'Sign in' }).click();
    await target.getByRole('heading', { level: 1, name: 'Runs' }).waitFor();
  }

  const registrations = (target: Page) =>
    target.evaluate(() =>
      navigator.serviceWorker.getRegistrations().then((list) => list.map((r) => r.scope)),
    );

  const notifications = (target: Page): Promise<ShownNotification[]> =>
    target.evaluate(() =>
      navigator.serviceWorker.ready
        .then((r) => r.getNotifications())
        .then((list) =>
          list.map((n) => ({
            title: n.title,
            body: n.body,
            tag: n.tag,
            url: (n.data as { url: string }).url,
            timestamp: (n as Notification & { timestamp: number }).timestamp, // not in TS's DOM lib
            renotify: (n as Notification & { renotify: boolean }).renotify, // not in TS's DOM lib
            silent: Boolean(n.silent),
          })),
        ),
    );

  async function waitForNotifications(
    target: Page,
    done: (list: ShownNotification[]) => boolean,
    what: string,
  ): Promise<ShownNotification[]> {
    let list: ShownNotification[] = [];
    return waitUntil(
      what,
      async () => {
        list = await notifications(target);
        return done(list) && list;
      },
      { timeoutMs: 60_000, seen: () => ({ notifications: list, browserLog: browserLog.slice(-10) }) },
    );
  }

  const deliverPush = (target: Page, data: string) =>
    deliverPushTo(target, data, (message) => browserLog.push(message));

  /** The actions of the shown notification with this tag. */
  const notificationActions = (target: Page, tag: string) =>
    target.evaluate(
      (t) =>
        navigator.serviceWorker.ready
          .then((r) => r.getNotifications({ tag: t }))
          .then((list) =>
            (list[0] as Notification & { actions: { action: string; title: string }[] }).actions.map(
              ({ action, title }) => ({ action, title }),
            ),
          ),
      tag,
    );

  /** As many of the pause's choices as this browser shows as notification actions. */
  const shownChoices = async (target: Page, choices: { id: string; label: string }[]) => {
    const max = await target.evaluate(() => (Notification as unknown as { maxActions: number }).maxActions);
    return choices.slice(0, max).map(({ id, label }) => ({ action: id, title: label }));
  };

  it('loading the page registers no service worker; "Enable notifications" registers it and POSTs the subscription', async () => {
    const calls = recordSubscriptionCalls(page);
    await signIn(page, alice);
    const enable = page.getByRole('button', { name: 'Enable notifications' });
    await enable.waitFor();
    assert.deepEqual(await registrations(page), [], 'signed in, the page registered nothing');
    await page.reload();
    await enable.waitFor();
    assert.deepEqual(await registrations(page), [], 'nor after a reload');
    assert.deepEqual(calls, []);

    await enable.click();
    await page.getByText('Notifications are on.').waitFor();
    assert.deepEqual(await registrations(page), [`${origin}/`]);
    assert.deepEqual(calls, [{ method: 'POST', body: studioSub }]);

    const subscribed = await page.evaluate((k) => localStorage.getItem(k), FAKE_SUBSCRIPTION_KEY);
    const options = JSON.parse(subscribed ?? '{}') as { userVisibleOnly: boolean; key: number[] };
    assert.equal(options.userVisibleOnly, true);
    assert.equal(Buffer.from(options.key).toString('base64url'), config.vapid?.publicKey);

    const rows = await stores.pushSubscriptions.listForUsers(['alice']);
    assert.equal(rows.length, 1);
    assert.equal(rows[0].endpoint, studioSub.endpoint);
    assert.deepEqual(rows[0].keys, studioSub.keys);
    assert.equal(rows[0].teamId, 'acme');
    assert.ok(await page.getByRole('button', { name: 'Send a test notification' }).isVisible());
  });

  it('the scope choice is saved, and "Send a test notification" reaches the subscription', async () => {
    await page.getByLabel(/All of my team/).check();
    await page.getByText('You will be notified about every run in your team.').waitFor();
    assert.equal((await alice.get('/api/v1/notifications/prefs')).body.scope, 'team');
    await page.getByLabel(/My runs/).check();
    await page.getByText('You will be notified about your own runs.').waitFor();
    assert.equal((await alice.get('/api/v1/notifications/prefs')).body.scope, 'own');

    await page.getByRole('button', { name: 'Send a test notification' }).click();
    await page.getByText('Test notification sent to 1 device.').waitFor();
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: path.join(RESULTS, 'studio-enabled.png'), fullPage: true });
    await pushReceived((p) => p.kind === 'test');
  });

  it('one switch per push kind is saved; the device list marks this browser and removes another device', async () => {
    const finished = page.getByRole('switch', { name: 'Finished' });
    await finished.waitFor();
    for (const name of ['Needs my input', 'Parked at a usage limit', 'Finished', 'Failed', 'Cancelled'])
      assert.equal(await page.getByRole('switch', { name }).isChecked(), true, name);
    await finished.uncheck();
    await page.getByText('Saved: no push when a run finishes.').waitFor();
    const prefs = (await alice.get('/api/v1/notifications/prefs')).body;
    assert.equal(prefs.kinds.run_finished, false);
    assert.equal(prefs.kinds.run_failed, true);
    await finished.check();
    await page.getByText('Saved: a push when a run finishes.').waitFor();
    assert.equal((await alice.get('/api/v1/notifications/prefs')).body.kinds.run_finished, true);

    // Another device of alice's (her phone), then the list as the page shows it.
    const phone = push.endpoint('alice-phone');
    const added = await alice.request('POST', '/api/v1/notifications/push/subscriptions', phone, {
      'user-agent':
        'Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36',
    });
    assert.equal(added.status, 201, added.text);
    await page.reload();
    const devices = page.locator('#devices li');
    await devices.filter({ hasText: 'Chrome on Android' }).waitFor();
    assert.equal(await devices.count(), 2);
    const mine = devices.filter({ hasText: 'This browser' });
    assert.equal(await mine.count(), 1);
    assert.equal(await mine.filter({ hasText: 'Chrome on Android' }).count(), 0);
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: path.join(RESULTS, 'studio-devices.png'), fullPage: true });

    await page.getByRole('button', { name: 'Remove Chrome on Android' }).click();
    await page.getByText('Chrome on Android will get no more notifications.').waitFor();
    await devices.filter({ hasText: 'Chrome on Android' }).waitFor({ state: 'detached' });
    assert.equal(await devices.count(), 1);
    const rows = await stores.pushSubscriptions.listForUsers(['alice']);
    assert.deepEqual(
      rows.map((r) => r.endpoint),
      [studioSub.endpoint],
    );
  });

  it('quiet hours, do not disturb in one click, and the kinds that break through are saved', async () => {
    const prefs = async () => (await alice.get('/api/v1/notifications/prefs')).body;
    await page.getByRole('button', { name: 'Turn on quiet hours' }).click();
    await page.getByText(/^Saved: quiet from 22:00 to 07:00 \(.+\)\.$/).waitFor();
    const quiet = (await prefs()).quietHours;
    assert.equal(quiet.start, '22:00');
    assert.equal(quiet.end, '07:00');
    assert.ok(quiet.timeZone, 'the browser’s zone');
    assert.equal(quiet.days, undefined, 'every day');

    await page.getByRole('button', { name: 'For 1 hour' }).click();
    await page.getByText('Do not disturb for an hour.').waitFor();
    const hour = Date.parse((await prefs()).doNotDisturbUntil) - Date.now();
    assert.ok(hour > 55 * 60_000 && hour <= 60 * 60_000, `${hour} ms`);
    await page.getByRole('button', { name: 'Until tomorrow 08:00' }).click();
    await page.getByText('Do not disturb until tomorrow 08:00.').waitFor();
    const morning = Date.parse((await prefs()).doNotDisturbUntil) - Date.now();
    assert.ok(morning > 0 && morning < 34 * 3600_000, `${morning} ms`);
    await page.getByRole('button', { name: 'Resume now' }).click();
    await page.getByText('Do not disturb is off.').waitFor();
    assert.equal((await prefs()).doNotDisturbUntil, undefined);

    const needsInput = page.getByRole('checkbox', { name: 'Needs my input' });
    assert.equal(await needsInput.isChecked(), true, 'breaks through by default');
    await needsInput.uncheck();
    await page.getByText(/it waits for the summary\.$/).waitFor();
    assert.deepEqual((await prefs()).breakThrough, []);
    await needsInput.check();
    await page.getByText(/even during quiet hours\.$/).waitFor();
    assert.deepEqual((await prefs()).breakThrough, ['human_input_requested']);

    await page.getByRole('button', { name: 'Turn off', exact: true }).click();
    await page.getByText('Quiet hours are off.').waitFor();
    assert.equal((await prefs()).quietHours, undefined);
  });

  it('a push the server sent for a real episode, delivered through CDP, shows a notification; a repeat replaces it', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Quarterly report' });
    assert.equal(created.status, 201, created.text);
    runId = created.body.id as string;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Approve the budget of $1,200?',
    });
    assert.equal(paused.status, 200, paused.text);
    episodeId = `${runId}:input:${paused.body.interactionId}`;

    const received = await pushReceived((p) => p.runId === runId);
    rawPayload = received.rawText;
    const payload = JSON.parse(rawPayload) as PushPayload;
    assert.equal(payload.tag, episodeId);
    assert.equal(payload.url, `${origin}/runs/${runId}`);

    await deliverPush(page, rawPayload);
    const [shown] = await waitForNotifications(
      page,
      (l) => l.length === 1,
      'the push shows one notification',
    );
    assert.deepEqual(
      { ...shown, timestamp: undefined },
      {
        title: 'Quarterly report needs your input',
        body: 'Approve the budget of $1,200?',
        tag: episodeId,
        url: `${origin}/runs/${runId}`,
        timestamp: undefined,
        renotify: false,
        silent: false,
      },
    );

    // The same episode again (a repeated delivery): the newer notification replaces the first.
    await new Promise((resolve) => setTimeout(resolve, 20));
    await deliverPush(page, rawPayload);
    const after = await waitForNotifications(
      page,
      (l) => l.some((n) => n.timestamp > shown.timestamp),
      'the repeat is shown',
    );
    assert.equal(after.length, 1, 'replaced, not stacked');
    assert.equal(after[0].tag, episodeId);

    // A push without a link (none of ours, but the worker's own fallbacks make one) opens its run's page.
    const linkless = JSON.stringify({
      v: 1,
      kind: 'run_finished',
      title: 'Linkless',
      runId,
      tag: 'linkless',
    });
    await deliverPush(page, linkless);
    const [noLink] = (
      await waitForNotifications(
        page,
        (l) => l.some((n) => n.tag === 'linkless'),
        'the linkless push is shown',
      )
    ).filter((n) => n.tag === 'linkless');
    assert.equal(noLink.url, `${origin}/runs/${runId}`);
    await page.evaluate(() =>
      navigator.serviceWorker.ready
        .then((r) => r.getNotifications({ tag: 'linkless' }))
        .then((list) => list.forEach((n) => n.close())),
    );
  });

  it('a digest that comes while an earlier one is still on screen shows the updates of both; a repeat counts once', async () => {
    const tag = 'digest:acme:alice';
    const digest = (n: number, counts: Record<string, number>, titles: string[], kind: string) =>
      JSON.stringify(
        renderDigest({
          digestId: `digest|person-digest|acme|alice|${n}`,
          tag,
          counts,
          newest: titles.map((title) => ({ title, kind })),
          studioUrl: origin,
        }),
      );
    const shownDigest = async () => (await notifications(page)).filter((n) => n.tag === tag);
    try {
      await deliverPush(page, digest(1, { run_finished: 2 }, ['Alpha', 'Beta'], 'run_finished'));
      await deliverPush(page, digest(2, { run_failed: 1 }, ['Gamma'], 'run_failed'));
      const [both] = await shownDigest();
      assert.equal(both.title, '3 run updates while you were away');
      for (const title of ['Alpha', 'Beta', 'Gamma']) assert.match(both.body, new RegExp(title));
      assert.equal(both.silent, false);
      // The second again (a repeated delivery): its updates are on screen already.
      await deliverPush(page, digest(2, { run_failed: 1 }, ['Gamma'], 'run_failed'));
      const [again] = await shownDigest();
      assert.equal(again.title, '3 run updates while you were away');
      assert.equal(again.body, both.body);
      // Two more at once (a device back online): each folded in, one after the other.
      await Promise.all([
        deliverPush(page, digest(3, { run_finished: 1 }, ['Delta'], 'run_finished')),
        deliverPush(page, digest(4, { run_finished: 1 }, ['Epsilon'], 'run_finished')),
      ]);
      const [all] = await waitForNotifications(
        page,
        (l) => l.some((n) => n.tag === tag && n.title.startsWith('5 ')),
        'both folded in',
      );
      for (const title of ['Alpha', 'Gamma', 'Delta', 'Epsilon']) assert.match(all.body, new RegExp(title));
    } finally {
      await page.evaluate(
        (t) =>
          navigator.serviceWorker.ready
            .then((r) => r.getNotifications({ tag: t }))
            .then((list) => list.forEach((n) => n.close())),
        tag,
      );
    }
  });

  it('clicking the notification navigates the open studio tab to the run, or focuses it when already there', async () => {
    assert.equal(page.url(), `${origin}/`);
    // The push reached the push service before its claim settled: the run page shows the claim as it is when it
    // loads, so it opens once the claim says delivered (on a loaded machine that can come seconds later).
    let pushState: string | undefined;
    await waitUntil(
      "the episode's push claim delivered",
      async () => {
        const view = await alice.get(`/api/v1/runs/${runId}/episodes`);
        const shown = (
          view.body.episodes as { episodeId: string; families: { push: { state: string } } }[]
        ).find((e) => e.episodeId === episodeId);
        pushState = shown?.families.push.state;
        return pushState === 'delivered';
      },
      { timeoutMs: 60_000, seen: () => pushState },
    );
    await clickNotification(page, episodeId);
    await page.waitForURL(`${origin}/runs/${runId}`);
    await page.getByRole('heading', { level: 1, name: 'Quarterly report' }).waitFor();
    await page.locator(`tr[data-episode-id="${episodeId}"]`).getByText('Delivered').first().waitFor();
    assert.equal(await page.locator('.run-head .badge').textContent(), 'Paused');
    assert.deepEqual(await notifications(page), [], 'the click closed it');
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: path.join(RESULTS, 'studio-run.png'), fullPage: true });

    // The tab is already at the run: a click on a new delivery focuses it and does not navigate.
    await deliverPush(page, rawPayload);
    await waitForNotifications(page, (l) => l.length === 1, 'shown again');
    let navigations = 0;
    page.on('framenavigated', (frame) => {
      if (frame === page.mainFrame()) navigations++;
    });
    await clickNotification(page, episodeId);
    await waitForNotifications(page, (l) => l.length === 0, 'closed by the click');
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(navigations, 0);
    assert.equal(page.url(), `${origin}/runs/${runId}`);
  });

  it("a pause's choices are the notification's actions; an action answers the run without opening it, once", async () => {
    const { runId: actionRunId, tag } = await pausedOnChoices('Deploy', 'Deploy v2?');
    const received = await pushReceived((p) => p.runId === actionRunId);
    await deliverPush(page, received.rawText);
    await waitForNotifications(page, (l) => l.some((n) => n.tag === tag), 'the pause is shown');
    assert.deepEqual(await notificationActions(page, tag), await shownChoices(page, DEPLOY_CHOICES));
    const urlBefore = page.url();
    await clickNotification(page, tag, 'approve');
    await waitUntil('the action answered the run', async () => {
      const run = await alice.get(`/api/v1/runs/${actionRunId}`);
      return run.body.status === 'running';
    });
    await waitForNotifications(page, (l) => !l.some((n) => n.tag === tag), 'closed by the click');
    assert.equal(page.url(), urlBefore, 'an answered action opens nothing');

    // The same notification again (a repeated delivery): its token was used, so the click opens the run instead.
    await deliverPush(page, received.rawText);
    await waitForNotifications(page, (l) => l.some((n) => n.tag === tag), 'shown again');
    await clickNotification(page, tag, 'approve');
    await page.waitForURL(`${origin}/runs/${actionRunId}`);
  });

  it('an action whose first POST fails on the way (offline, a 5xx) is sent again, and answers the run', async () => {
    const { runId: actionRunId, tag } = await pausedOnChoices('Deploy', 'Deploy v3?');
    await deliverPush(page, (await pushReceived((p) => p.runId === actionRunId)).rawText);
    await waitForNotifications(page, (l) => l.some((n) => n.tag === tag), 'the pause is shown');
    // The worker's next action POST fails as a network error does, before it reaches the API.
    const [worker] = context.serviceWorkers();
    const failing = await failActionPosts(worker, 1);
    const urlBefore = page.url();
    await clickNotification(page, tag, 'approve');
    await waitUntil(
      'the action answered the run',
      async () => {
        const run = await alice.get(`/api/v1/runs/${actionRunId}`);
        return run.body.status === 'running';
      },
      { timeoutMs: 30_000 },
    );
    assert.equal(await failing.failed(), 1);
    assert.equal(page.url(), urlBefore, 'an answered action opens nothing');
  });

  it('an action whose every POST fails (offline) leaves the question on screen to try again; a tab is told of the push without its tokens', async () => {
    const { runId: actionRunId, tag } = await pausedOnChoices('Deploy', 'Deploy v5?');
    // What the open tab hears of the push.
    await page.evaluate(() => {
      const seen: unknown[] = [];
      (window as unknown as { __flowMessages: unknown[] }).__flowMessages = seen;
      navigator.serviceWorker.addEventListener('message', (event) => seen.push(event.data));
    });
    await deliverPush(page, (await pushReceived((p) => p.runId === actionRunId)).rawText);
    await waitForNotifications(page, (l) => l.some((n) => n.tag === tag), 'the pause is shown');
    const told = await page.evaluate(() =>
      JSON.stringify((window as unknown as { __flowMessages: unknown[] }).__flowMessages),
    );
    assert.ok(told.includes(actionRunId), told);
    assert.doesNotMatch(told, /token|receipt/, 'a tab was handed the push tokens');
    const [worker] = context.serviceWorkers();
    const failing = await failActionPosts(worker, Infinity);
    await clickNotification(page, tag, 'approve');
    await waitUntil('every try failed', async () => (await failing.failed()) >= 3);
    await waitForNotifications(page, (l) => l.some((n) => n.tag === tag), 'the question shown again');
    const run = await alice.get(`/api/v1/runs/${actionRunId}`);
    assert.equal(run.body.status, 'paused');
    await failing.restore();
  });

  it('an answer that never got through does not bring the question back over a newer notification (someone answered)', async () => {
    const { runId: raceRunId, tag } = await pausedOnChoices('Deploy', 'Deploy v6?');
    await deliverPush(page, (await pushReceived((p) => p.runId === raceRunId)).rawText);
    await waitForNotifications(page, (l) => l.some((n) => n.tag === tag), 'the pause is shown');
    const [worker] = context.serviceWorkers();
    // Each try fails a second after it starts: the close comes in while they go on.
    const failing = await failActionPosts(worker, Infinity, 1000);
    try {
      const clicked = page.evaluate(
        (t) =>
          new Promise<string>((resolve) =>
            navigator.serviceWorker.addEventListener('message', (event) => {
              if (event.data?.type === 'flow:notification-clicked' && event.data.tag === t)
                resolve(event.data.done);
            }),
          ),
        tag,
      );
      await clickNotification(page, tag, 'approve');
      await waitUntil('the first try failed', async () => (await failing.failed()) >= 1);
      const close = {
        v: 1,
        kind: 'answered',
        title: 'Deploy was answered',
        body: 'bob answered: Reject',
        tag,
      };
      await deliverPush(
        page,
        JSON.stringify({ ...close, runId: raceRunId, episodeId: tag, url: `${origin}/runs/${raceRunId}` }),
      );
      assert.equal(await clicked, 'replaced meanwhile');
      const shown = (await notifications(page)).filter((n) => n.tag === tag);
      assert.deepEqual(
        shown.map((n) => n.title),
        ['Deploy was answered'],
      );
    } finally {
      await failing.restore();
    }
    await alice.post(`/api/v1/runs/${raceRunId}/interactions/${tag.split(':input:')[1]}/answer`, {
      answer: 'reject',
    });
  });

  it('an escalation rung that pushes the question again alerts again (renotify); the question itself replaces silently', async function () {
    this.timeout(120_000);
    const ladder = { escalation: { rungs: [{ afterSeconds: 1, to: 'owner', via: 'push' }] } };
    const { runId: rungRunId, interactionId, tag } = await pausedOnChoices('Deploy', 'Deploy v4?', ladder);
    const ofRun = () =>
      push.received(studioSub).filter((r) => (r.payload as PushPayload).runId === rungRunId);
    await waitUntil('the question and its rung pushed', () => ofRun().length >= 2, { timeoutMs: 60_000 });
    const [question, rung] = ofRun();
    await deliverPush(page, question.rawText);
    const [shown] = await waitForNotifications(
      page,
      (l) => l.some((n) => n.tag === tag),
      'the question shown',
    );
    assert.equal(shown.renotify, false);
    await deliverPush(page, rung.rawText);
    await waitForNotifications(
      page,
      (l) => l.some((n) => n.tag === tag && n.renotify),
      'the rung shown, alerting again',
    );
    await alice.post(`/api/v1/runs/${rungRunId}/interactions/${interactionId}/answer`, {
      answer: 'approve',
    });
  });

  it("the run page answers the question it waits on: a choice's button, or a written answer", async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Deploy' });
    const runId = created.body.id as string;
    const paused = await alice.post(`/api/v1/runs/${runId}/pause`, {
      prompt: 'Deploy v3?',
      choices: DEPLOY_CHOICES,
    });
    assert.equal(paused.status, 200, paused.text);
    await page.goto(`${origin}/runs/${runId}`);
    const question = page.getByRole('region', { name: 'Waiting for your answer' });
    await question.getByText('Deploy v3?').waitFor();
    await question.getByRole('button', { name: 'Approve' }).click();
    await waitUntil(
      'the run answered',
      async () => (await alice.get(`/api/v1/runs/${runId}`)).body.status === 'running',
    );
    const timeline = await alice.get(`/api/v1/runs/${runId}/timeline`);
    const answered = (timeline.body.entries as { kind: string; detail?: string; userId?: string }[]).find(
      (e) => e.kind === 'answered',
    );
    assert.deepEqual([answered?.detail, answered?.userId], ['approve', 'alice']);

    // A question without choices takes a written answer.
    const open = await alice.post(`/api/v1/runs/${runId}/pause`, { prompt: 'Which region?' });
    assert.equal(open.status, 200, open.text);
    await page.goto(`${origin}/runs/${runId}`);
    const written = page.getByRole('region', { name: 'Waiting for your answer' });
    const textbox = written.getByRole('textbox', { name: 'Your answer' });
    await textbox.fill('eu-west');
    // The tab shown again (or a push for the run) redraws the page: what the person was writing stays, in focus.
    const redrawn = page.waitForResponse((res) => res.url().endsWith(`/runs/${runId}/timeline`));
    await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
    await redrawn;
    await page.waitForFunction(
      () => !document.querySelector('main')?.textContent?.includes('Loading the run'),
    );
    assert.equal(await textbox.inputValue(), 'eu-west');
    assert.equal(await page.evaluate(() => document.activeElement?.id), 'question-answer');
    await textbox.pressSequentially('-1');
    await written.getByRole('button', { name: 'Answer', exact: true }).click();
    await waitUntil(
      'the run answered again',
      async () => (await alice.get(`/api/v1/runs/${runId}`)).body.status === 'running',
    );
    const again = await alice.get(`/api/v1/runs/${runId}/timeline`);
    const last = (again.body.entries as { kind: string; detail?: string }[]).filter(
      (e) => e.kind === 'answered',
    );
    assert.equal(last.at(-1)?.detail, 'eu-west-1');
  });

  it("an action answered on one device replaces the question on a teammate's device, saying who answered", async () => {
    // Bob's browser: a second Chromium profile, with its own service worker and subscription.
    const bobSub = push.endpoint('bob-studio', { applicationServerKey: config.vapid?.publicKey });
    const bobs = await launchBrowser();
    bobs.context.on('serviceworker', (w) =>
      w.on('console', (m) => browserLog.push(`bob's worker ${m.type()}: ${m.text()}`)),
    );
    await installPushManagerStandIn(bobs.context, bobSub);
    await bobs.context.grantPermissions(['notifications'], { origin });
    await signIn(bobs.page, bob);
    await bobs.page.getByRole('button', { name: 'Enable notifications' }).click();
    await bobs.page.getByText('Notifications are on.').waitFor();
    await bobs.page.getByLabel(/All of my team/).check();
    await bobs.page.getByText('You will be notified about every run in your team.').waitFor();

    const { runId: releaseRunId, tag } = await pausedOnChoices('Release', 'Release v3?');
    const pushOf = (kind: string, device: SubscriptionJSON) =>
      pushReceived((p) => p.runId === releaseRunId && p.kind === kind, device);
    for (const [target, device] of [
      [page, studioSub],
      [bobs.page, bobSub],
    ] as const) {
      await deliverPush(target, (await pushOf('human_input_requested', device)).rawText);
      await waitForNotifications(target, (l) => l.some((n) => n.tag === tag), 'the question is shown');
    }
    assert.deepEqual(
      await notificationActions(bobs.page, tag),
      await shownChoices(bobs.page, DEPLOY_CHOICES),
    );

    await clickNotification(page, tag, 'approve');
    await waitUntil('the action answered the run', async () => {
      const run = await alice.get(`/api/v1/runs/${releaseRunId}`);
      return run.body.status === 'running';
    });
    await deliverPush(bobs.page, (await pushOf('answered', bobSub)).rawText);
    const shown = await waitForNotifications(
      bobs.page,
      (l) => l.some((n) => n.title === 'Release was answered'),
      "the close shown on bob's device",
    );
    assert.deepEqual(
      shown.map(({ title, body, tag: t, url }) => ({ title, body, tag: t, url })),
      [
        {
          title: 'Release was answered',
          body: 'alice answered: Approve',
          tag,
          url: `${origin}/runs/${releaseRunId}`,
        },
      ],
      'replaced, not stacked',
    );
    // The close is news, not a call to act: it makes no sound, here or where the question was answered or dismissed.
    assert.equal(shown[0].silent, true, 'the close is silent');
    await deliverPush(page, (await pushOf('answered', studioSub)).rawText);
    const onAnswerer = await waitForNotifications(
      page,
      (l) => l.some((n) => n.title === 'Release was answered'),
      "the close shown on alice's device, which answered",
    );
    assert.equal(onAnswerer.find((n) => n.tag === tag)?.silent, true, 'silent where it was answered');
    assert.deepEqual(await notificationActions(bobs.page, tag), [], 'nothing left to answer');
  });

  it('the service worker reports the push shown and the notification clicked: both receipts arrive', async () => {
    const created = await alice.post('/api/v1/runs', { title: 'Receipts' });
    const receiptRunId = created.body.id as string;
    const paused = await alice.post(`/api/v1/runs/${receiptRunId}/pause`, { prompt: 'Seen?' });
    assert.equal(paused.status, 200, paused.text);
    const tag = `${receiptRunId}:input:${paused.body.interactionId}`;
    const received = await pushReceived((p) => p.runId === receiptRunId);
    const device = async () => {
      const view = await alice.get(`/api/v1/runs/${receiptRunId}/episodes`);
      const episode = (view.body.episodes as { episodeId: string; pushDevices: PushDeviceView[] }[]).find(
        (e) => e.episodeId === tag,
      );
      return episode?.pushDevices.find((d) => d.receipt === 'reported');
    };
    assert.equal(await device(), undefined, 'nothing reported before the browser had the push');

    await deliverPush(page, received.rawText);
    const reported = (field: 'shownAt' | 'clickedAt') => async () => {
      const found = await device();
      return found?.[field] ? found : undefined;
    };
    const shown = await waitUntil('the shown receipt', reported('shownAt'), { timeoutMs: 30_000 });
    assert.equal(shown.clickedAt, undefined);

    await clickNotification(page, tag);
    await page.waitForURL(`${origin}/runs/${receiptRunId}`);
    const clicked = await waitUntil('the clicked receipt', reported('clickedAt'), { timeoutMs: 30_000 });
    assert.equal(clicked.shownAt, shown.shownAt, 'the first shown stays');
    assert.ok(Date.parse(clicked.clickedAt!) >= Date.parse(clicked.shownAt!));

    // The run page: its timeline and the device table say what came back (loaded again: the click's receipt may
    // land after the page the click opened had read the run).
    await page.reload();
    const timeline = page.locator('ol.timeline');
    for (const kind of ['paused', 'notified', 'shown', 'clicked'])
      await timeline.locator(`li[data-kind="${kind}"]`).first().waitFor();
    const row = page.locator(`tr[data-device="${clicked.subscriptionId}"][data-episode-id="${tag}"]`);
    await row.waitFor();
    assert.doesNotMatch((await row.textContent()) ?? '', /no receipt/);
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: path.join(RESULTS, 'studio-run-timeline.png'), fullPage: true });
  });

  it('"Disable" deletes the subscription and unregisters the worker', async () => {
    const calls = recordSubscriptionCalls(page);
    await page.getByRole('link', { name: '← All runs' }).click();
    await page.getByRole('button', { name: 'Disable' }).click();
    await page.getByText('Notifications are off for this browser.').waitFor();
    // (Loading the page re-POSTs the existing subscription, an idempotent upsert; then the one DELETE.)
    assert.deepEqual(
      calls.filter((c) => c.method === 'DELETE'),
      [{ method: 'DELETE', body: { endpoint: studioSub.endpoint } }],
    );
    assert.equal(calls.at(-1)?.method, 'DELETE');
    assert.deepEqual(await stores.pushSubscriptions.listForUsers(['alice']), []);
    assert.deepEqual(await registrations(page), []);
    assert.ok(await page.getByRole('button', { name: 'Enable notifications' }).isVisible());
  });

  it('denied permission shows the message and POSTs nothing (and the page is screenshotted)', async () => {
    const denied = await launchBrowser();
    await installPushManagerStandIn(denied.context, push.endpoint('denied'));
    const cdp = await denied.context.newCDPSession(denied.page);
    await cdp.send('Browser.setPermission', {
      permission: { name: 'notifications' },
      setting: 'denied',
      origin,
    });
    const calls = recordSubscriptionCalls(denied.page);
    await signIn(denied.page, dave);
    await denied.page.getByRole('button', { name: 'Enable notifications' }).click();
    const alert = denied.page.getByRole('alert');
    await alert.waitFor();
    assert.match((await alert.textContent()) ?? '', /Notifications are blocked for this site/);

    assert.deepEqual(calls, []);
    assert.deepEqual(await registrations(denied.page), [], 'no worker registered without permission');
    assert.equal(
      await denied.page.evaluate((k) => localStorage.getItem(k), FAKE_SUBSCRIPTION_KEY),
      null,
      'never subscribed',
    );
    assert.deepEqual(await stores.pushSubscriptions.listForUsers(['dave']), []);
    assert.ok(await denied.page.evaluate((k) => localStorage.getItem(k), TOKEN_KEY));

    mkdirSync(RESULTS, { recursive: true });
    await denied.page.screenshot({ path: path.join(RESULTS, 'studio.png'), fullPage: true });
    await denied.page.setViewportSize({ width: 390, height: 844 });
    await denied.page.screenshot({ path: path.join(RESULTS, 'studio-narrow.png'), fullPage: true });
  });

  /** Waits for `text` on the page; a timeout names what the page showed instead. */
  async function waitForText(target: Page, text: string): Promise<void> {
    try {
      await target.getByText(text).waitFor({ timeout: 20_000 });
    } catch (err) {
      const shown = await target
        .locator('body')
        .innerText()
        .catch(() => '(unreadable)');
      throw new Error(
        `"${text}" never appeared on ${target.url()}; the page showed:\n${shown}\n(${String(err)})`,
      );
    }
  }

  it('a server with web push off says so and offers no "Enable"', async () => {
    // The same database and Temporal, but no VAPID keys: the notification routes do not exist.
    const off = await startTestApi(testConfig({ HOST: '127.0.0.1', MONGO_DB: config.mongoDb }));
    const fresh = await launchBrowser();
    try {
      await fresh.page.goto(`${off.api.url}/`);
      await fresh.page.getByLabel('Access token').fill((await alice.token) ?? '');
      await fresh.page.getByRole('button', { name: 'Sign in' }).click();
      await waitForText(fresh.page, 'Web push is turned off on this Flow server.');
      assert.equal(await fresh.page.getByRole('button', { name: 'Enable notifications' }).count(), 0);
    } finally {
      await off.api.close();
    }
  });

  it('a browser without PushManager says it cannot receive push and offers no "Enable"', async () => {
    const fresh = await launchBrowser();
    await fresh.context.addInitScript(() => {
      delete (window as unknown as { PushManager?: unknown }).PushManager;
    });
    await signIn(fresh.page, alice);
    await waitForText(fresh.page, 'This browser cannot receive push notifications');
    assert.equal(await fresh.page.getByRole('button', { name: 'Enable notifications' }).count(), 0);
  });

  it('a refused token ends the session and says why; an unknown address says so; "Sign out" forgets the token', async () => {
    const fresh = await launchBrowser();
    const exceptions: string[] = [];
    fresh.page.on('pageerror', (e) => exceptions.push(e.message));
    await fresh.page.goto(`${origin}/`);
    await fresh.page.getByLabel('Access token').fill('not.a.token');
    await fresh.page.getByRole('button', { name: 'Sign in' }).click();
    await waitForText(fresh.page, 'That token was refused');

    // The token goes bad while the page calls nothing (the not-found page makes no API call): swapped under the
    // home page, one of its calls still in flight could meet the bad token, end the session there and forget it
    // before the reload, which would then find no token at all.
    await signIn(fresh.page, alice);
    await fresh.page.goto(`${origin}/no/such/page`);
    await fresh.page.getByRole('heading', { name: 'Page not found' }).waitFor();
    await fresh.page.evaluate((k) => localStorage.setItem(k, 'not.a.token'), TOKEN_KEY);
    await fresh.page.goto(`${origin}/`);
    await waitForText(fresh.page, 'Your session ended');
    assert.equal(await fresh.page.evaluate((k) => localStorage.getItem(k), TOKEN_KEY), null);

    await signIn(fresh.page, alice);
    await fresh.page.goto(`${origin}/no/such/page`);
    await fresh.page.getByRole('heading', { name: 'Page not found' }).waitFor();
    await fresh.page.getByRole('button', { name: 'Sign out' }).click();
    await fresh.page.getByLabel('Access token').waitFor();
    assert.equal(await fresh.page.evaluate((k) => localStorage.getItem(k), TOKEN_KEY), null);
    assert.deepEqual(exceptions, []);
  });

  it('the runs list shows the newest page and "Show older runs" loads the rest, each run once', async () => {
    // A team of its own with more runs than one page (50), three of them in one millisecond at a page's edge.
    const base = Date.now() - 3_600_000;
    const ids: string[] = [];
    for (let i = 0; i < 53; i++) {
      const at = new Date(base + Math.min(i, 50) * 1000);
      const id = `run_studio_page_${String(i).padStart(2, '0')}`;
      ids.push(id);
      await stores.runs.insert({
        _id: id,
        teamId: 'paged',
        ownerId: 'pat',
        title: `Paged run ${i}`,
        status: 'finished',
        revision: 0,
        pauseCount: 0,
        createdAt: at,
        updatedAt: at,
      } as never);
    }
    const fresh = await launchBrowser();
    await signIn(fresh.page, alice.as('pat', 'paged'));
    const rows = fresh.page.locator('tr[data-run-id]');
    const count = fresh.page.locator('#runs-title .count');
    await fresh.page.locator('#runs-title .count', { hasText: '50+' }).waitFor();
    assert.equal(await rows.count(), 50);
    await fresh.page.getByRole('button', { name: 'Show older runs' }).click();
    await fresh.page.locator('#runs-title .count', { hasText: /^53$/ }).waitFor();
    assert.equal(await count.getAttribute('aria-label'), '53 runs');
    const shown = await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-run-id')));
    assert.deepEqual([...shown].sort(), [...ids].sort(), 'each run once');
    assert.equal(await fresh.page.getByRole('button', { name: 'Show older runs' }).count(), 0);
  });
});
