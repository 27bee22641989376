// Connection and indexes. Each store module declares the indexes its own queries need (store/index.ts
// gathers them); this file only applies them. Everything here must work on real MongoDB and on FerretDB v1 (no TTL, no transactions).
import {
  CreateIndexesOptions,
  Db,
  IndexSpecification,
  MongoBulkWriteError,
  MongoClient,
  MongoNetworkError,
  MongoServerError,
  type MongoClientOptions,
} from 'mongodb';
export interface IndexSpec {
  collection: string;
  key: IndexSpecification;
  options: CreateIndexesOptions & { name: string };
}

/** An index a store module no longer declares (replaced by another): start-up drops it where it still exists. */
export interface RetiredIndex {
  collection: string;
  name: string;
}

export interface Mongo {
  client: MongoClient;
  db: Db;
}

/**
 * Every process's client options.
 * - heartbeatFrequencyMS: the monitor re-checks the server every 2 s (not 10 s), so a restarted server is
 *   selectable again soon after it is back;
 * - serverMonitoringMode 'poll': one hello per heartbeat, never a streaming (awaitable) hello that can sit on a
 *   connection the server dropped (FerretDB v1 sends no topologyVersion, so it polls anyway; a MongoDB replica
 *   set would stream);
 * - socketTimeoutMS: an operation on a server that hung without closing its sockets fails instead of waiting
 *   forever. Generous on purpose: it bounds silence on the socket, not work (a reaper's deleteMany of a month's
 *   rows, or a filter no index serves, can be silent for a long while at scale); a connection the server closed
 *   is caught by the write guard below, not by this.
 */
export const MONGO_CLIENT_OPTIONS: MongoClientOptions = {
  serverSelectionTimeoutMS: 5000,
  connectTimeoutMS: 5000,
  heartbeatFrequencyMS: 2000,
  serverMonitoringMode: 'poll',
  socketTimeoutMS: 300_000,
};

export async function connectMongo(
  url: string,
  dbName: string,
  extra: MongoClientOptions = {},
): Promise<Mongo> {
  failWritesOnDeadSockets();
  const client = new MongoClient(url, { ...MONGO_CLIENT_OPTIONS, ...extra });
  await client.connect();
  return { client, db: client.db(dbName) };
}

/** The driver release the patch below was written and tested against (package.json pins it exactly). */
export const PATCHED_DRIVER_VERSION = '6.22.0';

/** The driver's internals the patch needs: its Connection class and the installed version. */
export interface DriverInternals {
  version: string;
  connection: { Connection?: { prototype: { writeCommand?: unknown; [PATCHED]?: true } } };
}

function loadDriverInternals(): DriverInternals {
  /* eslint-disable @typescript-eslint/no-require-imports */
  return {
    version: (require('mongodb/package.json') as { version: string }).version,
    connection: require('mongodb/lib/cmap/connection') as DriverInternals['connection'],
  };
  /* eslint-enable @typescript-eslint/no-require-imports */
}

/**
 * A workaround for a driver bug (mongodb 6.22, still in 7.9; docs/mongodb-driver-patch.md) that wedged
 * clients for good after a FerretDB restart. When the server closes a connection, Node destroys the socket at once
 * but emits 'close' a moment later; a command written in between finds the connection open, `socket.write` returns
 * false on the destroyed socket, and the driver waits for a 'drain' that never comes (so does a large write whose
 * server dies mid-way). On the monitor's connection that hung hello stops the heartbeats for good: the server
 * stays Unknown and every later operation fails server selection. Here a write also ends when its socket closes,
 * with the network error the driver would have raised, so the monitor (or the operation's retry) drops the
 * connection and opens a new one. Applied once per process, to every client in it.
 *
 * It reaches into the driver's internals, so it refuses to run (throws, and start-up fails) on any other driver
 * release than the one it was tested with, or when the method it wraps is not where it was: a silent no-op would
 * bring the wedge back unnoticed. On a driver upgrade: run test/recovery.test.ts (the wedge) and
 * test/mongoPatch.test.ts, then move PATCHED_DRIVER_VERSION, or drop the patch once the driver fixes the bug.
 */
export function failWritesOnDeadSockets(internals: DriverInternals = loadDriverInternals()): void {
  type WriteCommand = (this: DriverConnection, command: unknown, options: unknown) => Promise<void>;
  interface DriverConnection {
    id: unknown;
    address: string;
    socket?: { closed?: boolean; destroyed?: boolean } & NodeJS.EventEmitter;
  }
  if (internals.version !== PATCHED_DRIVER_VERSION) {
    throw new Error(
      `mongodb driver ${internals.version} installed, but store/mongo.ts patches ${PATCHED_DRIVER_VERSION} ` +
        `(failWritesOnDeadSockets): install mongodb@${PATCHED_DRIVER_VERSION}, or re-test the patch on ` +
        `${internals.version} and update PATCHED_DRIVER_VERSION`,
    );
  }
  const proto = internals.connection.Connection?.prototype;
  if (!proto || typeof proto.writeCommand !== 'function') {
    throw new Error(
      `mongodb driver ${internals.version}: Connection.prototype.writeCommand is not in ` +
        'mongodb/lib/cmap/connection, where store/mongo.ts patches it (failWritesOnDeadSockets)',
    );
  }
  if (proto[PATCHED]) return;
  const write = proto.writeCommand as WriteCommand;
  proto.writeCommand = function (this: DriverConnection, command: unknown, options: unknown) {
    const written = write.call(this, command, options);
    const socket = this.socket;
    if (!socket) return written;
    // A write waiting for 'drain' (a destroyed socket, or a big message to a server that then died) would wait
    // forever: the socket's end settles it.
    return new Promise<void>((resolve, reject) => {
      const closed = () =>
        reject(new MongoNetworkError(`connection ${String(this.id)} to ${this.address} closed`));
      if (socket.closed) closed();
      else socket.once('close', closed);
      written.then(
        () => (socket.off('close', closed), resolve()),
        (err: unknown) => (socket.off('close', closed), reject(err)),
      );
    });
  } satisfies WriteCommand;
  proto[PATCHED] = true;
}

const PATCHED = Symbol.for('flow-notify.failWritesOnDeadSockets');

export async function pingMongo(db: Db): Promise<void> {
  await db.command({ ping: 1 });
}

function isNotImplemented(err: unknown): boolean {
  return err instanceof MongoServerError && (err.code === 238 || err.codeName === 'NotImplemented');
}

export interface IndexReport {
  /** False where the server refused TTL indexes (FerretDB v1): the sweep's reaper then does the expiry. */
  ttl: boolean;
}

/** NamespaceNotFound, IndexNotFound: nothing to drop (a new database, or a start-up that already dropped it). */
function isAlreadyGone(err: unknown): boolean {
  return err instanceof MongoServerError && (err.code === 26 || err.code === 27);
}

/**
 * Drops the retired indexes first (a replacement may reuse their key), then creates the declared ones: idempotent,
 * so an existing data folder moves to the new indexes at its next start-up.
 */
export async function ensureIndexes(
  db: Db,
  specs: IndexSpec[],
  retired: RetiredIndex[] = [],
): Promise<IndexReport> {
  for (const { collection, name } of retired) {
    try {
      await db.collection(collection).dropIndex(name);
    } catch (err) {
      if (!isAlreadyGone(err)) throw err;
    }
  }
  let ttl = true;
  for (const spec of specs) {
    const collection = db.collection(spec.collection);
    try {
      await collection.createIndex(spec.key, spec.options);
    } catch (err) {
      if (spec.options.expireAfterSeconds === undefined || !isNotImplemented(err)) throw err;
      // No TTL here: keep a plain index on the same key so the reaper's range delete stays cheap.
      const { expireAfterSeconds: _ignored, ...plain } = spec.options;
      await collection.createIndex(spec.key, plain);
      ttl = false;
    }
  }
  return { ttl };
}

/** E11000: an insert hit a unique key someone else already holds. */
export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

/** The positions of a bulk write's operations that lost to an existing _id (E11000); any other failure throws. */
export function duplicatePositions(err: unknown): Set<number> {
  if (!(err instanceof MongoBulkWriteError)) throw err;
  const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
  if (!errors.length || errors.some((e) => e.code !== 11000)) throw err;
  return new Set(errors.map((e) => e.index));
}
