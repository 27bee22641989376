// While the API starts as a process of its own (node dist/api/server.js), V8's young generation stays at its
// initial size: loading the ~850 modules would grow it to 16 MiB per semi-space (32 MiB resident), which an idle
// API kept until V8's memory reducer got to it, 12–80 s after the last request (bench:memory: 130 MiB, not 92).
// --max-semi-space-size is read only when the heap is set up, the growth factor at every growth: so this module
// sets the factor, imported first. A test, a bench or index.ts importing the API leaves its process's heap alone.
import { setFlagsFromString } from 'node:v8';

/** While starting: a growth factor of 1 keeps the young generation at its initial size. */
export const HOLD_YOUNG_GENERATION = '--semi-space-growth-factor=1';
/** Once listening: V8's default factor. */
export const GROW_YOUNG_GENERATION = '--semi-space-growth-factor=2';

const entry = require.main !== undefined && require.main.filename === require.resolve('./server');
if (entry) setFlagsFromString(HOLD_YOUNG_GENERATION);

/** Once the API listens: from then on its traffic sizes the young generation, as V8 does by default. */
export function youngGenerationForTraffic(): void {
  if (entry) setFlagsFromString(GROW_YOUNG_GENERATION);
}
