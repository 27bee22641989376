// flow-notify: the command-line entry for runner pods.
//   flow-notify emit --run <runId> --team <teamId> --disposition <ack|dead_letter|cancelled|nack|retry|requeue|deferred>
// Prints one JSON line: {"emitted": true, "episodeId", "started"} or {"emitted": false, "reason"}.
import { parseArgs } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { temporalConnectionOptions } from './client/connection';
import { createOutcomeEmitter, episodeOptions } from './client/emitter';
import { createHealthSignaler, healthOptions } from './client/health';
import { emitFromRunner, FINAL_DISPOSITIONS, isDisposition, NON_FINAL_DISPOSITIONS } from './client/runner';
import { ConfigError, loadEmitterConfig } from './config';
import { createRunStore } from './store/runs';
import { connectMongo } from './store/mongo';

const USAGE = `usage: flow-notify emit --run <runId> --team <teamId> --disposition <disposition>
  final (emits):        ${FINAL_DISPOSITIONS.join(', ')}
  not final (no emit):  ${NON_FINAL_DISPOSITIONS.join(', ')}`;

function fail(message: string, code: number): never {
  process.stderr.write(`flow-notify: ${message}\n`);
  process.exit(code);
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command !== 'emit') fail(USAGE, 2);
  const { values } = parseArgs({
    args: rest,
    options: { run: { type: 'string' }, team: { type: 'string' }, disposition: { type: 'string' } },
  });
  if (!values.run || !values.team || !values.disposition) fail(USAGE, 2);
  if (!isDisposition(values.disposition)) fail(`unknown disposition "${values.disposition}"\n${USAGE}`, 2);

  let config;
  try {
    config = loadEmitterConfig();
  } catch (err) {
    if (err instanceof ConfigError) fail(`configuration error: ${err.message}`, 78);
    throw err;
  }
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  const connection = await Connection.connect(temporalConnectionOptions(config));
  try {
    const client = new Client({ connection, namespace: config.temporalNamespace });
    const emitter = createOutcomeEmitter({
      client,
      taskQueue: config.temporalTaskQueue,
      runs: createRunStore(mongo.db),
      options: episodeOptions(config),
    });
    const health = createHealthSignaler({
      client,
      taskQueue: config.temporalTaskQueue,
      options: healthOptions(config),
    });
    const message = { runId: values.run, teamId: values.team, disposition: values.disposition };
    const result = await emitFromRunner(emitter, message, health);
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await connection.close();
    await mongo.client.close();
  }
}

main(process.argv.slice(2)).catch((err) => fail(err instanceof Error ? err.message : String(err), 1));
