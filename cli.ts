// flow-notify: the command-line entry for runner pods.
//   flow-notify emit --run <runId> --team <teamId> --disposition <ack|dead_letter|cancelled|nack|retry|requeue|deferred>
// Prints one JSON line: {"emitted": true, "episodeId", "started"} or {"emitted": false, "reason"}.
//   flow-notify explain <runId> [--json]
// What we told whom about a run (operators; reads under the config's credentials). Exit 3: no such run.
// Beside a running `npm start`, both find its embedded servers without MONGO_URL / TEMPORAL_ADDRESS.
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { Client, Connection } from '@temporalio/client';
import { temporalConnectionOptions } from './client/connection';
import { createOutcomeEmitter, episodeOptions } from './client/emitter';
import { createHealthSignaler, healthBatchMs, healthOptions } from './client/health';
import { emitFromRunner, FINAL_DISPOSITIONS, isDisposition, NON_FINAL_DISPOSITIONS } from './client/runner';
import { explainRun, RUN_ID_PATTERN } from './operator/explain';
import { printableJson } from './platform/printable';
import { renderExplanation } from './operator/render';
import { childEnv, exitOnConfigError, launcherEnv, loadEmitterConfig, loadOperatorConfig } from './config';
import { findRunningStack, stackEnv } from './platform/stackState';
import { createClaimReader } from './store/claims';
import { createEpisodeStore } from './store/episodes';
import { createCallbackAttemptStore } from './store/callback/attempts';
import { createPushDeliveryStore } from './store/push/deliveries';
import { createPushSubscriptionStore } from './store/push/subscriptions';
import { createPushHoldStore } from './store/push/holds';
import { createPushReceiptStore } from './store/push/receipts';
import { createInteractionStore } from './store/interactions';
import { createRunStore } from './store/runs';
import { connectMongo } from './store/mongo';
import { inSpan, startTracing } from './platform/tracing';

const USAGE = `usage: flow-notify emit --run <runId> --team <teamId> --disposition <disposition>
  final (emits):        ${FINAL_DISPOSITIONS.join(', ')}
  not final (no emit):  ${NON_FINAL_DISPOSITIONS.join(', ')}
       flow-notify explain <runId> [--json]`;

function fail(message: string, code: number): never {
  process.stderr.write(`flow-notify: ${message}\n`);
  process.exit(code);
}

/** The command's arguments; one it does not know, or a value missing, exits 2 with the usage. */
function parseCommandArgs<T extends ParseArgsConfig>(config: T): ReturnType<typeof parseArgs<T>> {
  try {
    return parseArgs(config);
  } catch (err) {
    fail(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`, 2);
  }
}

async function main(argv: string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === 'explain') return explain(rest);
  if (command !== 'emit') fail(USAGE, 2);
  const { values } = parseCommandArgs({
    args: rest,
    options: { run: { type: 'string' }, team: { type: 'string' }, disposition: { type: 'string' } },
  });
  if (!values.run || !values.team || !values.disposition) fail(USAGE, 2);
  if (!isDisposition(values.disposition)) fail(`unknown disposition "${values.disposition}"\n${USAGE}`, 2);

  const config = loadBesideNpmStart(loadEmitterConfig);
  const tracing = await startTracing(config.tracing, 'flow-notify-runner');
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  const connection = await Connection.connect(temporalConnectionOptions(config));
  try {
    const client = new Client({
      connection,
      namespace: config.temporalNamespace,
      ...(tracing ? { interceptors: tracing.clientInterceptors } : {}),
    });
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
      batchMs: healthBatchMs(config),
      onError: (runId, err) =>
        process.stderr.write(`flow-notify: run health signal failed (${runId}): ${String(err)}\n`),
    });
    const message = { runId: values.run, teamId: values.team, disposition: values.disposition };
    // The root of the trace a run ended on a runner pod starts (tracing on): the episode's start hangs from it.
    const result = await inSpan(
      'flow-notify emit',
      { attributes: { 'flow.run_id': message.runId, 'flow.disposition': message.disposition } },
      () => emitFromRunner(emitter, message, health),
    );
    // A short-lived process: nothing it observed may stay held when it exits.
    await health.flushAll();
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await connection.close();
    await mongo.client.close();
    await tracing?.shutdown();
  }
}

/**
 * The config from the environment; MONGO_URL / TEMPORAL_ADDRESS it leaves unset come from the embedded servers of
 * an `npm start` running in this checkout, if one is. A bad config exits 78 with one line.
 */
function loadBesideNpmStart<T>(load: (env: Record<string, string | undefined>) => T): T {
  const launcher = launcherEnv();
  const stack = findRunningStack(launcher.stackStateFile);
  try {
    return load(childEnv(stack ? stackEnv(stack, launcher) : {}));
  } catch (err) {
    const advice =
      stack || launcher.mongoUrl
        ? ''
        : ' (no npm start is running in this checkout: start it, or set MONGO_URL and TEMPORAL_ADDRESS)';
    exitOnConfigError(err, advice);
    throw err;
  }
}

async function explain(args: string[]): Promise<void> {
  const { values, positionals } = parseCommandArgs({
    args,
    options: { json: { type: 'boolean', default: false } },
    allowPositionals: true,
  });
  if (positionals.length !== 1) fail(USAGE, 2);
  const runId = positionals[0];
  if (!RUN_ID_PATTERN.test(runId)) fail(`not a run id: "${runId.slice(0, 140)}"`, 2);
  const config = loadBesideNpmStart(loadOperatorConfig);
  const mongo = await connectMongo(config.mongoUrl, config.mongoDb);
  const connection = await Connection.connect(temporalConnectionOptions(config));
  let found;
  try {
    found = await explainRun(
      {
        runs: createRunStore(mongo.db),
        episodes: createEpisodeStore(mongo.db),
        claims: createClaimReader(mongo.db),
        pushDeliveries: createPushDeliveryStore(mongo.db),
        callbackAttempts: createCallbackAttemptStore(mongo.db),
        pushSubscriptions: createPushSubscriptionStore(mongo.db),
        pushHolds: createPushHoldStore(mongo.db),
        pushReceipts: createPushReceiptStore(mongo.db),
        interactions: createInteractionStore(mongo.db),
        client: new Client({ connection, namespace: config.temporalNamespace }),
        namespace: config.temporalNamespace,
        temporalUiUrl: config.temporalUiUrl,
      },
      runId,
    );
  } finally {
    await connection.close();
    await mongo.client.close();
  }
  if (!found) {
    fail(
      `no run ${runId}: not in the runs store (${config.mongoDb}) and no workflow in namespace ` +
        `${config.temporalNamespace} carries it`,
      3,
    );
  }
  process.stdout.write(values.json ? `${printableJson(found)}\n` : renderExplanation(found));
}

main(process.argv.slice(2)).catch((err) => {
  exitOnConfigError(err);
  fail(err instanceof Error ? err.message : String(err), 1);
});
