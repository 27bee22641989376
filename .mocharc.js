// Mocha runs the TypeScript sources through ts-node; test/support/stack.ts starts the real servers once.
module.exports = {
  require: ['ts-node/register', 'test/support/stack.ts'],
  // The fault drill restarts the shared servers: it runs last, so no other suite sees a restart it did not ask for.
  spec: ['test/!(drill).test.ts', 'test/drill.test.ts'],
  reporter: 'test/support/reporter.js',
  timeout: 60000,
  exit: true,
};
