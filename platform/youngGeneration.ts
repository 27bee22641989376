// Idle memory: while the API or the worker starts as a process of its own (node dist/api/server.js,
// node dist/worker.js), V8's young generation stays at its initial size. Loading several hundred modules otherwise
// doubles it up to 16 MiB per semi-space (32 MiB resident, both halves touched), a size no request needs, and an
// idle process gave it back only once V8's memory reducer ran, 8 to 90 s after the last request: bench:memory
// found the API at 92 or at 130 MiB. The cap, --max-semi-space-size, is read once, when the heap is set up; the
// growth factor at every growth, so setting it from here holds if this module is imported before any other.
// Imported by a test, a bench or index.ts, the heap of that process is left alone.
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';

/** While starting: a growth factor of 1 keeps the young generation at its initial size. */
export const HOLD_YOUNG_GENERATION = '--semi-space-growth-factor=1';
/** Once serving: V8's default factor. */
export const GROW_YOUNG_GENERATION = '--semi-space-growth-factor=2';

/**
 * The workflow thread's semi-space cap, MiB (V8 would grow it to 16, 32 resident, under a burst of episodes and
 * keep it while idle). The thread only runs workflow activations: small, short-lived objects.
 */
export const WORKFLOW_THREAD_SEMI_SPACE_MB = 4;

/** The entry points this applies to, from the project's root (the sources' or dist/). */
const ENTRIES = [path.join('api', 'server'), 'worker'];
const root = path.resolve(__dirname, '..');
const main = require.main?.filename.replace(/\.(ts|js)$/, '');
const entry = main !== undefined && ENTRIES.some((name) => main === path.join(root, name));
if (entry) setFlagsFromString(HOLD_YOUNG_GENERATION);

/** Once the process serves: from then on its traffic sizes the young generation, as V8 does by default. */
export function youngGenerationForTraffic(): void {
  if (entry) setFlagsFromString(GROW_YOUNG_GENERATION);
}

/**
 * Creates the Temporal worker with its workflow thread's young generation capped. The SDK starts that thread without
 * resource limits; V8 reads --max-semi-space-size when an isolate's heap is set up, so set for the creation, the
 * cap holds for the thread's isolate and leaves the main one, set up already, alone. 0 is V8's own default again.
 */
export async function withWorkflowThreadYoungGenerationCapped<T>(
  create: () => Promise<T>,
  capped = entry,
): Promise<T> {
  if (!capped) return create();
  setFlagsFromString(`--max-semi-space-size=${WORKFLOW_THREAD_SEMI_SPACE_MB}`);
  try {
    return await create();
  } finally {
    setFlagsFromString('--max-semi-space-size=0');
  }
}
