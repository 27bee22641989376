// The type-check and the lint on one TypeScript program: `tsc --noEmit -p .` and `eslint --max-warnings=0 .` each
// build the whole program and its types, and npm test ran both beside the suites on two cores. Here the program is
// built once, its diagnostics are the type-check, and ESLint's typed rules read the same program
// (parserOptions.programs) instead of a second one. Prints what tsc and eslint would; exits 1 when either finds
// something. `npm run typecheck` and `npm run lint` still run each alone.
import path from 'node:path';
import ts from 'typescript';
import { ESLint } from 'eslint';

const ROOT = path.resolve(__dirname, '..');

function projectProgram(): ts.Program {
  const parsed = ts.getParsedCommandLineOfConfigFile(
    path.join(ROOT, 'tsconfig.json'),
    { noEmit: true },
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  if (!parsed) throw new Error('tsconfig.json could not be read');
  return ts.createProgram({ rootNames: parsed.fileNames, options: parsed.options });
}

/** The type-check: tsc's diagnostics, printed as tsc prints them. */
function typecheck(program: ts.Program): boolean {
  const diagnostics = ts.getPreEmitDiagnostics(program);
  if (!diagnostics.length) return true;
  process.stdout.write(
    ts.formatDiagnostics(diagnostics, {
      getCanonicalFileName: (file) => file,
      getCurrentDirectory: () => ROOT,
      getNewLine: () => '\n',
    }),
  );
  console.log('flow-notify checks: the type-check failed');
  return false;
}

/** The lint, as `eslint --max-warnings=0 .`, its typed rules on the program already built. */
async function lint(program: ts.Program): Promise<boolean> {
  const eslint = new ESLint({
    cwd: ROOT,
    overrideConfig: { languageOptions: { parserOptions: { projectService: false, programs: [program] } } },
  });
  const results = await eslint.lintFiles(['.']);
  const problems = results.reduce((sum, result) => sum + result.errorCount + result.warningCount, 0);
  if (!problems) return true;
  process.stdout.write(await (await eslint.loadFormatter('stylish')).format(results));
  console.log('flow-notify checks: the lint failed');
  return false;
}

async function main(): Promise<void> {
  const program = projectProgram();
  const typed = typecheck(program);
  const linted = await lint(program);
  process.exitCode = typed && linted ? 0 : 1;
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
