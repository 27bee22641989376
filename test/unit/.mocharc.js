// The fast layer: pure rules, no servers (the root .mocharc.js starts Temporal and FerretDB for every suite).
module.exports = {
  require: ['ts-node/register'],
  spec: ['test/unit/**/*.test.ts'],
  reporter: 'test/support/reporter.js',
  timeout: 10000,
};
