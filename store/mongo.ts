// Connection and indexes. Each store module declares the indexes its own queries need (store/index.ts
// gathers them); this file only applies them. Everything here must work on real MongoDB and on FerretDB v1 (no TTL, no transactions).
import { CreateIndexesOptions, Db, IndexSpecification, MongoClient, MongoServerError } from 'mongodb';
export interface IndexSpec {
  collection: string;
  key: IndexSpecification;
  options: CreateIndexesOptions & { name: string };
}

export interface Mongo {
  client: MongoClient;
  db: Db;
}

export async function connectMongo(url: string, dbName: string): Promise<Mongo> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5000, connectTimeoutMS: 5000 });
  await client.connect();
  return { client, db: client.db(dbName) };
}

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

export async function ensureIndexes(db: Db, specs: IndexSpec[]): Promise<IndexReport> {
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
