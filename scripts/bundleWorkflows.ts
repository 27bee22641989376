// npm run build, second step: bundles the compiled workflows (dist/workflows) once, ahead of time, into
// dist/workflow-bundle.js and dist/workflow-bundle-traced.js (with the tracing interceptors), so a production
// worker loads one (workflowBundle) and never runs webpack at start.
//   node -r ts-node/register scripts/bundleWorkflows.ts [distDir]
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import { TRACED_WORKFLOW_BUNDLE_FILE, WORKFLOW_BUNDLE_FILE, workflowInterceptorModules } from '../worker';

const SOURCE_MAP_TAG = '//# sourceMappingURL=data:application/json;charset=utf-8;base64,';

/**
 * The bundle with its inline source map kept for stack traces (sources and mappings) but without the sources'
 * text (sourcesContent, about 70 % of the map): the worker holds the map in its main thread and in the workflow
 * thread, and the SDK reads that text only with showStackTraceSources, which this worker never sets.
 */
function withoutSourcesContent(code: string): string {
  const at = code.lastIndexOf(SOURCE_MAP_TAG);
  if (at < 0) throw new Error('the workflow bundle has no inline source map');
  const map = JSON.parse(
    Buffer.from(code.slice(at + SOURCE_MAP_TAG.length).trim(), 'base64').toString('utf8'),
  );
  delete map.sourcesContent;
  return `${code.slice(0, at)}${SOURCE_MAP_TAG}${Buffer.from(JSON.stringify(map)).toString('base64')}\n`;
}

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
    const { code: bundled } = await bundleWorkflowCode({
      workflowsPath: path.join(distDir, 'workflows'),
      workflowInterceptorModules: workflowInterceptorModules(traced, distDir),
      logger,
    });
    const code = withoutSourcesContent(bundled);
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
