// The workflows, bundled once per state of their sources. Webpack costs seconds of CPU a bundle, and the suites run
// in several processes (mocha --parallel): the global setup builds each bundle once and writes it to the temp
// folder under a hash of everything it is built from; every process, and later runs, load that file. A changed
// source changes the hash, so a stale bundle is never used.
import { createHash } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { PROJECT_ROOT } from '../../platform/embedded';
import { WORKFLOWS_PATH, workflowInterceptorModules } from '../../worker';

export interface BundleKind {
  /** Temporal's activity retry backoff a tenth as long (support/fastRetries.ts). */
  fastRetries?: boolean;
  /** With the tracing workflow interceptors, as a worker with traces on runs. */
  traced?: boolean;
}

/** What workflow code may import (test/unit/layering.test.ts); the SDK's version is in the lock file. */
const SOURCE_FOLDERS = ['workflows', 'contract', 'domain'];
const LOCK_FILE = path.join(PROJECT_ROOT, 'package-lock.json');
const CACHE_DIR = path.join(tmpdir(), 'flow-notify-workflow-bundles');
/** Bundles of sources nobody has built from for this long are removed when a new one is written. */
const KEEP_MS = 24 * 3600_000;

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: (message: string) => console.error(message),
};

const inProcess = new Map<string, Promise<WorkflowBundle>>();

function interceptorModules(kind: BundleKind): string[] {
  return [
    ...workflowInterceptorModules(kind.traced ?? false),
    ...(kind.fastRetries ? [require.resolve('./fastRetries')] : []),
  ];
}

function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const file = path.join(dir, entry.name);
      return entry.isDirectory() ? filesUnder(file) : [file];
    })
    .sort();
}

/** A hash of the sources, the interceptor modules and the lock file: the bundle's identity. */
function sourceHash(modules: string[]): string {
  const hash = createHash('sha256');
  const files = [
    ...SOURCE_FOLDERS.flatMap((folder) => filesUnder(path.join(PROJECT_ROOT, folder))),
    ...modules,
    LOCK_FILE,
  ];
  for (const file of files) hash.update(`${path.relative(PROJECT_ROOT, file)}\0`).update(readFileSync(file));
  return hash.digest('hex').slice(0, 16);
}

function removeOldBundles(): void {
  for (const name of readdirSync(CACHE_DIR)) {
    const file = path.join(CACHE_DIR, name);
    try {
      if (Date.now() - statSync(file).mtimeMs > KEEP_MS) rmSync(file, { force: true });
    } catch {
      // another run removed it first
    }
  }
}

async function loadOrBuild(modules: string[]): Promise<WorkflowBundle> {
  const file = path.join(CACHE_DIR, `${sourceHash(modules)}.js`);
  try {
    return { code: readFileSync(file, 'utf8') };
  } catch {
    // not built yet for these sources
  }
  const { code } = await bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: modules,
    logger: quietLogger,
  });
  mkdirSync(CACHE_DIR, { recursive: true });
  // Written aside and renamed: a run starting meanwhile never reads half a bundle.
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, code);
  renameSync(partial, file);
  removeOldBundles();
  return { code };
}

/** The workflows of `kind`, bundled once for their current sources (and loaded once per process). */
export function workflowBundle(kind: BundleKind = {}): Promise<WorkflowBundle> {
  const modules = interceptorModules(kind);
  const key = modules.join('\n');
  let bundle = inProcess.get(key);
  if (!bundle) {
    bundle = loadOrBuild(modules);
    inProcess.set(key, bundle);
  }
  return bundle;
}
