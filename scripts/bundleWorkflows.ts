// npm run build, second step: bundles the compiled workflows (dist/workflows) once, ahead of time, into
// dist/workflow-bundle.js, so a production worker loads it (workflowBundle) and never runs webpack at start.
//   node -r ts-node/register scripts/bundleWorkflows.ts [distDir]
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { WORKFLOW_BUNDLE_FILE } from '../worker';

async function main(): Promise<void> {
  const distDir = path.resolve(process.argv[2] ?? 'dist');
  const { code } = await bundleWorkflowCode({
    workflowsPath: path.join(distDir, 'workflows'),
    logger: {
      log: () => undefined,
      trace: () => undefined,
      debug: () => undefined,
      info: () => undefined,
      warn: (message: string) => console.error(message),
      error: (message: string) => console.error(message),
    },
  });
  const out = path.join(distDir, WORKFLOW_BUNDLE_FILE);
  writeFileSync(out, code);
  console.log(
    `flow-notify build: ${path.relative(process.cwd(), out)} (${Math.round(code.length / 1024)} KiB)`,
  );
}

main().catch((err) => {
  console.error(`flow-notify build: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
