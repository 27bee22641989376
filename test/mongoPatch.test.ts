// The MongoDB driver patch (store/mongo.ts failWritesOnDeadSockets) reaches into the driver's internals: it runs
// only on the driver release it was tested with, pinned exactly, and start-up fails loudly when the method it
// wraps is not where it was. (The wedge it fixes is proved gone in test/recovery.test.ts.)
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../platform/embedded';
import { failWritesOnDeadSockets, PATCHED_DRIVER_VERSION } from '../store/mongo';
import { TEST_JWT_SECRET, testStack } from './support/stack';

describe('the MongoDB driver patch', function () {
  this.timeout(60_000);

  it('mongodb is pinned to exactly the release the patch was written for, and that release is installed', () => {
    const pkg = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8'));
    assert.equal(pkg.dependencies.mongodb, PATCHED_DRIVER_VERSION);
    const lock = JSON.parse(readFileSync(path.join(PROJECT_ROOT, 'package-lock.json'), 'utf8'));
    assert.equal(lock.packages['node_modules/mongodb'].version, PATCHED_DRIVER_VERSION);
    assert.equal(require('mongodb/package.json').version, PATCHED_DRIVER_VERSION); // eslint-disable-line @typescript-eslint/no-require-imports
  });

  it('refuses another driver release, naming both versions', () => {
    const connection = { Connection: { prototype: { writeCommand: async () => undefined } } };
    assert.throws(
      () => failWritesOnDeadSockets({ version: '6.23.0', connection }),
      /mongodb driver 6\.23\.0 installed, but store\/mongo\.ts patches 6\.22\.0/,
    );
  });

  it('refuses a driver whose Connection.prototype.writeCommand is missing', () => {
    for (const connection of [{}, { Connection: { prototype: {} } }]) {
      assert.throws(
        () => failWritesOnDeadSockets({ version: PATCHED_DRIVER_VERSION, connection }),
        /Connection\.prototype\.writeCommand is not in mongodb\/lib\/cmap\/connection/,
      );
    }
  });

  for (const entry of ['api/server.ts', 'worker.ts']) {
    it(`${entry} does not start when the patched method has moved, and says why`, () => {
      const result = spawnSync(
        process.execPath,
        ['-r', 'ts-node/register', '-r', './test/support/moveMongoInternals.ts', entry],
        {
          cwd: PROJECT_ROOT,
          env: {
            PATH: process.env.PATH ?? '',
            MONGO_URL: testStack().mongoUrl,
            TEMPORAL_ADDRESS: testStack().temporalAddress,
            AUTH_JWT_SECRET: TEST_JWT_SECRET,
            PORT: '0',
          },
          encoding: 'utf8',
          timeout: 30_000,
        },
      );
      assert.notEqual(result.status, 0, `${entry} started (status ${result.status}): ${result.stderr}`);
      assert.ok(result.status !== null, `${entry} was still running after 30 s: ${result.stderr}`);
      assert.match(
        result.stderr,
        /Connection\.prototype\.writeCommand is not in mongodb\/lib\/cmap\/connection/,
      );
    });
  }
});
