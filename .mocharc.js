// Mocha runs the TypeScript sources through ts-node; test/support/stack.ts starts the real servers once.
// `npx mocha test/x.test.ts` runs just that file: mocha adds command-line files to the configured spec, so the
// whole-suite glob applies only when none are named.
const namedFiles = process.argv.slice(2).some((arg) => /\.test\.ts$/.test(arg));

module.exports = {
  require: ['ts-node/register', 'test/support/stack.ts'],
  spec: namedFiles ? [] : ['test/**/*.test.ts'],
  reporter: 'test/support/reporter.js',
  timeout: 60000,
  exit: true,
};
