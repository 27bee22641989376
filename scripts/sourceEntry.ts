// How this project's TypeScript entries run from sources (npm start's worker and API, the tests' worker
// processes): under ts-node's own launcher, which registers it in the main thread only. `node -r ts-node/register`
// passes the flag on to every worker thread, so each workflow thread (it runs the prebuilt bundle, plain
// JavaScript) loaded ts-node and TypeScript for nothing: about 65 MB and 0.13 s of CPU a thread.
import path from 'node:path';
import { PROJECT_ROOT } from '../platform/embedded';

const TS_NODE_LAUNCHER = require.resolve('ts-node/dist/bin');

/** `node` arguments that run `entry` (a .ts file) as the main module, with `args`, under the project's tsconfig. */
export const sourceEntryArgs = (entry: string, ...args: string[]): string[] => [
  TS_NODE_LAUNCHER,
  '--project',
  path.join(PROJECT_ROOT, 'tsconfig.json'),
  entry,
  ...args,
];
