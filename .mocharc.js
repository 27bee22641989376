// Mocha runs the TypeScript sources through ts-node; test/support/stack.ts starts the real servers once.
module.exports = {
  require: ['ts-node/register', 'test/support/stack.ts'],
  // The drill suites restart the shared servers: they run last, so no other suite sees a restart it did not ask for.
  spec: ['test/!(drill|drillFixes).test.ts', 'test/drillFixes.test.ts', 'test/drill.test.ts'],
  reporter: 'test/support/reporter.js',
  timeout: 60000,
  exit: true,
};
