// Lint: strict TypeScript, floating promises are errors, and workflow code may not touch Node builtins.
import tseslint from 'typescript-eslint';
import { builtinModules } from 'node:module';

const nodeBuiltins = [...builtinModules, ...builtinModules.map((m) => `node:${m}`)];

export default tseslint.config(
  {
    ignores: [
      'node_modules/**',
      'dist/**',
      'tools/**',
      '.data/**',
      '**/.mocharc.js',
      'studio/**',
      'eslint.config.mjs',
      'test/support/reporter.js',
      'test/support/cpuByFile.js',
    ],
  },
  ...tseslint.configs.recommended,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
  {
    // The contract is bundled with the workflows.
    files: ['workflows/**/*.ts', 'contract/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: nodeBuiltins.map((name) => ({
            name,
            message: 'Workflow code is deterministic: no Node builtins.',
          })),
        },
      ],
    },
  },
);
