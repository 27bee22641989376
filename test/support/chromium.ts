// Debian's Chromium driven by playwright-core, for the studio's browser tests.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';

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
