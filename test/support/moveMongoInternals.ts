// Preloaded (node -r) by test/mongoPatch.test.ts before an entry point: the driver keeps working, but
// Connection.prototype no longer shows the writeCommand store/mongo.ts patches (a getter hands it to connections
// only), as a driver release that reorganised its internals would look to the patch.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { Connection } = require('mongodb/lib/cmap/connection') as {
  Connection: { prototype: Record<string, unknown> };
};
const proto = Connection.prototype;
const writeCommand = proto.writeCommand;
Object.defineProperty(proto, 'writeCommand', {
  get(this: unknown) {
    return this === proto ? undefined : writeCommand;
  },
  configurable: true,
});
