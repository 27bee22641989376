// The workflows, bundled once per state of their sources. Webpack costs seconds of CPU a bundle, and the suites run
// in several processes (mocha --parallel): the global setup builds each bundle once and writes it to the temp
// folder under a hash of everything it is built from; every process, and later runs, load that file. A changed
// source changes the hash, so a stale bundle is never used.
import { createHash } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { bundleWorkflowCode, type WorkflowBundle } from '@temporalio/worker';
import { PROJECT_ROOT } from '../../platform/embedded';
import {
  TRACED_WORKFLOW_BUNDLE_FILE,
  WORKFLOW_BUNDLE_FILE,
  WORKFLOWS_PATH,
  workflowInterceptorModules,
} from '../../worker';

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

/** The SDK's logger for the suites: errors only. */
export const quietLogger = {
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
      if (Date.now() - statSync(file).mtimeMs > KEEP_MS) rmSync(file, { recursive: true, force: true });
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
  writeWhole(file, code);
  removeOldBundles();
  return { code };
}

/** Written aside and renamed: a run starting meanwhile never reads half a bundle. */
function writeWhole(file: string, code: string): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const partial = `${file}.${process.pid}.partial`;
  writeFileSync(partial, code);
  renameSync(partial, file);
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

/**
 * A folder holding the plain and the traced bundle under the names a build gives them, for workers started as
 * processes from the sources (WORKFLOW_BUNDLE_DIR): they load it instead of bundling at every start.
 */
export async function workflowBundleDir(): Promise<string> {
  const plain = interceptorModules({});
  const traced = interceptorModules({ traced: true });
  const dir = path.join(CACHE_DIR, `dir-${sourceHash([...plain, ...traced])}`);
  const files: [string, string[]][] = [
    [WORKFLOW_BUNDLE_FILE, plain],
    [TRACED_WORKFLOW_BUNDLE_FILE, traced],
  ];
  for (const [name, modules] of files) {
    const file = path.join(dir, name);
    if (!existsSync(file)) writeWhole(file, (await loadOrBuild(modules)).code);
  }
  return dir;
}
