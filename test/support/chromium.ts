// Debian's Chromium driven by playwright-core, for the studio's browser tests and bench:answer. The browser has no
// reachable push service here: pushes reach the studio's service worker through CDP
// ServiceWorker.deliverPushMessage, and a page asks the worker to run its notification-click path (sw.js).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type CDPSession, type Page } from 'playwright-core';

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// playwright-core adds --headless and --user-data-dir itself; the rest keeps Chromium off this machine's
// closed network (every background connection would be refused) and out of first-run UI.
export const CHROMIUM_FLAGS = [
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

export interface LaunchedChromium {
  context: BrowserContext;
  page: Page;
  /** Closes the browser and removes its profile folder. */
  close(): Promise<void>;
}

/** A fresh Chromium profile (a persistent context: a real profile, not an incognito one). */
export async function launchChromium(): Promise<LaunchedChromium> {
  const dir = mkdtempSync(path.join(tmpdir(), 'flow-studio-chromium-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(dir, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_FLAGS,
      viewport: { width: 1280, height: 860 },
    });
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  const close = async (): Promise<void> => {
    await context.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  };
  return { context, page: context.pages()[0] ?? (await context.newPage()), close };
}

/** The registration id of the service worker at `scopeURL`, from the ServiceWorker domain's events. */
function registrationIdFor(
  cdp: CDPSession,
  scopeURL: string,
  onWorkerError: (message: string) => void,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`no service worker registration for ${scopeURL}`)),
      10_000,
    );
    cdp.on('ServiceWorker.workerRegistrationUpdated', ({ registrations: list }) => {
      const found = list.find((r) => r.scopeURL === scopeURL && !r.isDeleted);
      if (!found) return;
      clearTimeout(timer);
      resolve(found.registrationId);
    });
    cdp.on('ServiceWorker.workerErrorReported', ({ errorMessage: e }) =>
      onWorkerError(`worker exception: ${e.errorMessage} (${e.sourceURL}:${e.lineNumber})`),
    );
    cdp.send('ServiceWorker.enable').catch(reject);
  });
}

/**
 * Delivers `data` as a push to the service worker of the page's origin (CDP ServiceWorker.deliverPushMessage) and
 * resolves once the worker has shown it: sw.js messages the open studio tabs after showNotification() resolves.
 * Reading getNotifications() earlier races Chromium, which drops a notification it has stored but not yet
 * displayed when getNotifications() reconciles the two (seen as a notification that never appears).
 */
export async function deliverPush(
  target: Page,
  data: string,
  onWorkerError: (message: string) => void = () => undefined,
): Promise<void> {
  type Counted = { __flowPushes?: number };
  const before = await target.evaluate(() => {
    const w = window as unknown as Counted;
    if (w.__flowPushes === undefined) {
      w.__flowPushes = 0;
      navigator.serviceWorker.addEventListener('message', (event) => {
        if ((event.data as { type?: string } | null)?.type === 'flow:push') w.__flowPushes! += 1;
      });
    }
    return w.__flowPushes;
  });
  const origin = new URL(target.url()).origin;
  const cdp = await target.context().newCDPSession(target);
  try {
    const registrationId = await registrationIdFor(cdp, `${origin}/`, onWorkerError);
    await cdp.send('ServiceWorker.deliverPushMessage', { origin, registrationId, data });
    await target.waitForFunction((n) => (window as unknown as Counted).__flowPushes! > n, before, {
      timeout: 10_000,
    });
  } finally {
    await cdp.detach();
  }
}

/**
 * Runs the service worker's notification-click path on the notification with this tag, on one of its actions
 * when named (see sw.js). Resolves with the browser's clock when the click was dispatched to the worker.
 */
export const clickNotification = (target: Page, tag: string, action?: string): Promise<number> =>
  target.evaluate(
    ([t, a]) =>
      navigator.serviceWorker.ready.then((r) => {
        const dispatchedAt = Date.now();
        r.active?.postMessage({ type: 'flow:notification-click', tag: t, action: a });
        return dispatchedAt;
      }),
    [tag, action] as const,
  );
