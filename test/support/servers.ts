// The servers a drill or a benchmark runs on: FerretDB and (when asked) the Temporal dev server on free ports,
// with throwaway data under a mkdtemp folder, or the servers MONGO_URL / TEMPORAL_ADDRESS name.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { launcherEnv } from '../../config';
import {
  launchMongo,
  launchTemporal,
  readStackSpec,
  type ServerProcess,
  type StackSpec,
} from '../../platform/embedded';

export interface ServerStack {
  mongoUrl: string;
  /** Undefined when only Mongo was asked for. */
  temporalAddress?: string;
  /** Where the servers came from: "embedded" (started here) or "external" (MONGO_URL / TEMPORAL_ADDRESS). */
  origin: { mongo: 'embedded' | 'external'; temporal?: 'embedded' | 'external' };
  /** The embedded servers' process ids (none for external servers), for CPU accounting. */
  pids: { mongo?: number; temporal?: number };
  /** The embedded servers, for the drill's restarts (undefined for external ones). */
  mongoServer?: ServerProcess;
  temporalServer?: ServerProcess;
  /** Stops what was started and removes the data folder. */
  stop(): Promise<void>;
}

export interface StackWants {
  temporal: boolean;
  /**
   * Use the servers MONGO_URL / TEMPORAL_ADDRESS name when set (default). The drill restarts its servers, so it
   * always starts its own.
   */
  external?: boolean;
  /** Extra Temporal dev-server arguments (a bench may try dev-server pragmas without editing temporal-dev.yml). */
  temporalArgs?: string[];
  /** Extra FerretDB arguments (e.g. -pprof=127.0.0.1:6060 to profile it). */
  mongoArgs?: string[];
}

/**
 * Starts FerretDB (and the Temporal dev server when asked) on free ports under a mkdtemp folder named for `name`,
 * unless the environment names external servers. A server that dies on its own says so on stderr.
 */
export async function startServers(
  name: string,
  wants: StackWants & { temporal: true },
): Promise<ServerStack & { temporalAddress: string }>;
export async function startServers(name: string, wants: StackWants): Promise<ServerStack>;
export async function startServers(name: string, wants: StackWants): Promise<ServerStack> {
  const env: { mongoUrl?: string; temporalAddress?: string } = wants.external === false ? {} : launcherEnv();
  const dataRoot = mkdtempSync(path.join(os.tmpdir(), `flow-notify-${name}-`));
  // Ctrl-C or a kill skips stop(): the exit hooks of platform/embedded kill the servers, this removes their data.
  const removeData = (): void => rmSync(dataRoot, { recursive: true, force: true });
  process.once('exit', removeData);
  const spec: StackSpec = readStackSpec();
  if (wants.temporalArgs?.length) spec.temporal.args = [...spec.temporal.args, ...wants.temporalArgs];
  if (wants.mongoArgs?.length) spec.mongo.args = [...spec.mongo.args, ...wants.mongoArgs];
  const started: ServerProcess[] = [];
  const stop = async (): Promise<void> => {
    await Promise.allSettled(started.map((server) => server.stop()));
    removeData();
    process.removeListener('exit', removeData);
  };
  try {
    // A server that dies mid-run says so (with its exit code or signal) instead of leaving only ECONNREFUSED.
    const serverLog = (line: string): void => console.error(`[${name} stack] ${line}`);
    const options = { dataRoot, freePorts: true, test: true, log: serverLog };
    const [mongo, temporal] = await Promise.all([
      env.mongoUrl ? undefined : launchMongo(spec, options),
      !wants.temporal || env.temporalAddress ? undefined : launchTemporal(spec, options),
    ]);
    if (mongo) started.push(mongo.server);
    if (temporal) started.push(temporal.server);
    return {
      mongoUrl: env.mongoUrl ?? mongo!.url,
      temporalAddress: wants.temporal ? (env.temporalAddress ?? temporal!.address) : undefined,
      origin: {
        mongo: env.mongoUrl ? 'external' : 'embedded',
        ...(wants.temporal ? { temporal: env.temporalAddress ? 'external' : 'embedded' } : {}),
      },
      pids: { mongo: mongo?.server.pid, temporal: temporal?.server.pid },
      mongoServer: mongo?.server,
      temporalServer: temporal?.server,
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}
