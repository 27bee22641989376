// Mocha runs the TypeScript sources through ts-node; test/support/stack.ts starts the real servers once.
module.exports = {
  require: ['ts-node/register', 'test/support/stack.ts'],
  spec: ['test/**/*.test.ts'],
  reporter: 'test/support/reporter.js',
  timeout: 60000,
  exit: true,
};
