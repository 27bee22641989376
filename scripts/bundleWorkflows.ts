// npm run build, second step: bundles the compiled workflows (dist/workflows) once, ahead of time, into
// dist/workflow-bundle.js and dist/workflow-bundle-traced.js (with the tracing interceptors), so a production
// worker loads one (workflowBundle) and never runs webpack at start.
//   node -r ts-node/register scripts/bundleWorkflows.ts [distDir]
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { TRACED_WORKFLOW_BUNDLE_FILE, WORKFLOW_BUNDLE_FILE, workflowInterceptorModules } from '../worker';

const logger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => console.error(message),
  error: (message: string) => console.error(message),
};

/** Two bundles of the same workflows: plain, and with the tracing interceptors (for a worker with traces on). */
async function main(): Promise<void> {
  const distDir = path.resolve(process.argv[2] ?? 'dist');
  for (const [file, traced] of [
    [WORKFLOW_BUNDLE_FILE, false],
    [TRACED_WORKFLOW_BUNDLE_FILE, true],
  ] as const) {
    const { code } = await bundleWorkflowCode({
      workflowsPath: path.join(distDir, 'workflows'),
      workflowInterceptorModules: workflowInterceptorModules(traced, distDir),
      logger,
    });
    const out = path.join(distDir, file);
    writeFileSync(out, code);
    console.log(
      `flow-notify build: ${path.relative(process.cwd(), out)} (${Math.round(code.length / 1024)} KiB)`,
    );
  }
}

main().catch((err) => {
  console.error(`flow-notify build: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
