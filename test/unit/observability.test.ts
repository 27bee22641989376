// The logger's and the metrics' pure parts: formats, redaction, the fields a workflow id tells, bounded labels.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { Registry } from 'prom-client';
import { ConfigError, loadConfig } from '../../config';
import type { Client } from '@temporalio/client';
import { createActivities } from '../../activities';
import {
  ACTIVITY_FAMILIES,
  createLogger,
  prettyLine,
  temporalLogger,
  workflowFields,
} from '../../platform/log';
import type { Stores } from '../../store';
import {
  callbackRedeliverWorkflowId,
  episodeWorkflowId,
  healthWorkflowId,
  operatorAlertWorkflowId,
  workflowTypes,
} from '../../contract/workflows';
import { claimFamily } from '../../domain/outcome';
import { createMetrics, statusClass, takeoverFamily } from '../../platform/metrics';

/** A destination that keeps what was written; `isTTY` as a terminal (or not) would say. */
function capture(isTTY: boolean): Writable & { isTTY: boolean; text(): string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      text += chunk.toString();
      done();
    },
  }) as Writable & { isTTY: boolean; text(): string };
  stream.isTTY = isTTY;
  stream.text = () => text;
  return stream;
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

describe('observability', () => {
  it('JSON when not a terminal, a readable line on one, whichever LOG_FORMAT forces', async () => {
    const piped = capture(false);
    createLogger({ level: 'info', name: 'worker', destination: piped }).warn(
      { runId: 'run_1', family: 'push' },
      'push: pruned',
    );
    const tty = capture(true);
    createLogger({ level: 'info', name: 'worker', destination: tty }).warn(
      { runId: 'run_1' },
      'push: pruned',
    );
    const forced = capture(true);
    createLogger({ level: 'info', name: 'api', format: 'json', destination: forced }).info('listening');
    await flush();
    const entry = JSON.parse(piped.text()) as Record<string, unknown>;
    assert.deepEqual(
      { level: entry.level, name: entry.name, msg: entry.msg, runId: entry.runId, family: entry.family },
      { level: 'warn', name: 'worker', msg: 'push: pruned', runId: 'run_1', family: 'push' },
    );
    assert.match(entry.time as string, /^\d{4}-\d\d-\d\dT/);
    assert.match(tty.text(), /^\d\d:\d\d:\d\d\.\d{3} WARN {2}\[worker\] push: pruned runId=run_1\n$/);
    assert.equal((JSON.parse(forced.text()) as { msg: string }).msg, 'listening');
  });

  it('LOG_LEVEL filters; fields named like secrets are redacted wherever they sit', async () => {
    const out = capture(false);
    const logger = createLogger({ level: 'warn', name: 'api', destination: out });
    logger.info('not shown');
    logger.warn(
      {
        callback: { url: 'https://hooks.example', secret: 'whsec_SECRET1' },
        headers: { authorization: 'Bearer JWT2' },
        sub: { keys: { p256dh: 'KEY3', auth: 'KEY4' } },
        vapid: { privateKey: 'PRIV5' },
      },
      'something',
    );
    await flush();
    const text = out.text();
    assert.equal(text.trim().split('\n').length, 1);
    for (const secret of ['SECRET1', 'JWT2', 'KEY3', 'KEY4', 'PRIV5'])
      assert.ok(!text.includes(secret), secret);
    assert.ok(text.includes('https://hooks.example'), 'the rest of the object is kept');
  });

  it('a secret nested deeper than one level, in an array or a child logger, is redacted too', async () => {
    const out = capture(false);
    const logger = createLogger({ level: 'info', name: 'worker', destination: out });
    logger.child({ request: { headers: { Authorization: 'Bearer CHILD6' } } }).warn(
      {
        episode: { launcher: { callback: { url: 'https://hooks.example', secret: 'whsec_DEEP7' } } },
        attempts: [{ request: { headers: { authorization: 'Bearer ARRAY8' } } }],
        deep: { a: { b: { c: { d: { e: { f: { g: { token: 'TOO_DEEP9' } } } } } } } },
      },
      'nested',
    );
    await flush();
    const text = out.text();
    for (const secret of ['CHILD6', 'DEEP7', 'ARRAY8', 'TOO_DEEP9'])
      assert.ok(!text.includes(secret), secret);
    assert.ok(text.includes('https://hooks.example'), 'the rest of the object is kept');
  });

  it('errors and class instances are walked, secret-like names matched by pattern, URLs lose credentials and query', async () => {
    const out = capture(false);
    const logger = createLogger({ level: 'info', name: 'worker', destination: out });
    class Upstream {
      constructor(
        readonly apiKey: string,
        readonly host: string,
      ) {}
    }
    const err = Object.assign(
      new Error('fetch failed for https://user:ERRPASS1@idp.example/keys?token=ERRQUERY2'),
      {
        request: { headers: { 'x-api-key': 'ERRAPIKEY3', Cookie: 'session=ERRCOOKIE4' } },
        password: 'ERRPASS5',
      },
    );
    err.cause = Object.assign(new Error('inner'), { clientSecret: 'CAUSESECRET6' });
    logger.warn(
      {
        err,
        error: err,
        upstream: new Upstream('CLASSKEY7', 'upstream.example'),
        headers: { 'X-Api-Key': 'APIKEY8', cookie: 'sid=COOKIE9', 'set-cookie': ['sid=SETCOOKIE10'] },
        clientSecret: 'CLIENTSECRET11',
        accessToken: 'ACCESS12',
        db: { password: 'DBPASS13' },
        target: 'https://hooks.example/in?token=QUERY14&x=1',
        mongo: 'mongodb://admin:MONGOPASS15@db.internal:27017/flow?authSource=admin',
        url: new URL('https://u:URLPASS16@x.example/p?sig=URLSIG17'),
        episodeKey: 'run_1:end',
        claimKey: 'cb|run_1:end',
      },
      'calling https://ops.example/hook?token=MSGQUERY18 as https://bob:MSGPASS19@ops.example/',
    );
    logger.error(new Error('plain https://carol:ERRMSGPASS20@h.example/?code=ERRMSGQUERY21'));
    await flush();
    const text = out.text();
    for (let n = 1; n <= 21; n++) {
      const leaked = text.match(new RegExp(`[A-Z]{4,}${n}\\b`));
      assert.equal(leaked, null, `${leaked?.[0]} is in the log:\n${text}`);
    }
    for (const kept of [
      'upstream.example',
      'https://hooks.example/in',
      'db.internal:27017/flow',
      'https://ops.example/hook',
      'fetch failed for https://',
      'run_1:end',
      'cb|run_1:end',
      'inner',
    ])
      assert.ok(text.includes(kept), `${kept} is kept:\n${text}`);
  });

  it("the SDK's lines: its run id becomes temporalRunId, runId is the Flow run from the workflow id", async () => {
    const out = capture(false);
    temporalLogger(createLogger({ level: 'debug', name: 'worker', destination: out })).debug(
      'Activity started',
      {
        workflowId: 'run_9:end',
        runId: 'b5c0-temporal',
        workflowType: 'episodeWorkflow',
        activityType: 'sendCallback',
      },
    );
    await flush();
    const entry = JSON.parse(out.text()) as Record<string, unknown>;
    assert.deepEqual(
      [entry.runId, entry.temporalRunId, entry.episodeId, entry.family, entry.component],
      ['run_9', 'b5c0-temporal', 'run_9:end', 'callback', 'temporal'],
    );
    assert.deepEqual(workflowFields({ workflowId: 'health:run_4', workflowType: 'runHealthWorkflow' }), {
      workflowId: 'health:run_4',
      runId: 'run_4',
      family: 'health',
    });
  });

  it('every workflow id scheme tells what it can: run, episode, family', () => {
    const episodeId = 'run_7:end';
    const of = (workflowId: string, workflowType: string, activityType?: string) =>
      workflowFields({ workflowId, workflowType, activityType });
    assert.deepEqual(of(episodeWorkflowId(episodeId), workflowTypes.episode), {
      workflowId: episodeId,
      episodeId,
      runId: 'run_7',
    });
    assert.deepEqual(of(healthWorkflowId('run_7'), workflowTypes.health), {
      workflowId: 'health:run_7',
      runId: 'run_7',
      family: 'health',
    });
    assert.deepEqual(
      of(callbackRedeliverWorkflowId(episodeId), workflowTypes.callbackRedeliver, 'wasDelivered'),
      {
        workflowId: `cb-redeliver|${episodeId}`,
        episodeId,
        runId: 'run_7',
        family: 'callback',
      },
    );
    assert.deepEqual(
      of(operatorAlertWorkflowId(episodeId), workflowTypes.operatorAlert, 'callbackExhaustedAlert'),
      {
        workflowId: `ops|${episodeId}`,
        family: 'ops',
      },
    );
    assert.deepEqual(of('sweep-schedule-workflow', workflowTypes.sweep), {
      workflowId: 'sweep-schedule-workflow',
      family: 'sweep',
    });
  });

  it('every activity the worker registers has a family, or says it has none of its own', () => {
    const config = loadConfig({ MONGO_URL: 'mongodb://127.0.0.1:1/', AUTH_JWT_SECRET: 'x'.repeat(32) });
    const registered = Object.keys(
      createActivities({ config, stores: {} as Stores, client: {} as Client, log: () => undefined }),
    );
    assert.deepEqual([...registered].sort(), Object.keys(ACTIVITY_FAMILIES).sort());
  });

  it('prettyLine leaves a line that is not JSON as it is', () => {
    assert.equal(prettyLine('plain text'), 'plain text');
  });

  it('label values are bounded: status classes, claim families, unknown kinds as "other"', async () => {
    assert.deepEqual(
      [statusClass(204), statusClass(429), statusClass(undefined), statusClass(999)],
      ['2xx', '4xx', 'none', 'none'],
    );
    assert.deepEqual(['run_1:end', 'cb|run_1:end', 'ops|health:run_1:stall:1'].map(claimFamily), [
      'push',
      'callback',
      'ops',
    ]);
    assert.deepEqual(
      [
        'run_1:end',
        'digest|digest|acme|bob|a1b2c3d4.0',
        'rung|int_1|0',
        'answered|int_1',
        'snooze|int_1|s1',
        'ep|ev:run_1:run.finished|ep_1',
        'cb|run_1:end',
      ].map(takeoverFamily),
      ['push', 'push', 'interaction', 'interaction', 'interaction', 'endpoint', 'callback'],
    );
    const metrics = createMetrics(new Registry(), { processMetrics: false });
    metrics.pushSent('delivered');
    metrics.pushSent('run_1 something unbounded');
    metrics.operatorAlert('stall', 'sent');
    const text = await metrics.registry.metrics();
    assert.match(text, /^flow_notify_push_sends_total\{result="delivered"\} 1$/m);
    assert.match(text, /^flow_notify_push_sends_total\{result="other"\} 1$/m);
    assert.match(text, /^flow_notify_health_alerts_total\{kind="stall"\} 1$/m);
    assert.ok(!text.includes('run_1'));
  });

  it('LOG_LEVEL, LOG_FORMAT and WORKER_METRICS_PORT are read once, and a bad value is one line naming it', () => {
    const base = { MONGO_URL: 'mongodb://127.0.0.1:1/', AUTH_JWT_SECRET: 'x'.repeat(32) };
    const config = loadConfig({
      ...base,
      LOG_LEVEL: 'DEBUG',
      LOG_FORMAT: 'pretty',
      WORKER_METRICS_PORT: '9464',
    });
    assert.deepEqual(
      [config.logLevel, config.logFormat, config.workerMetricsPort],
      ['debug', 'pretty', 9464],
    );
    const defaults = loadConfig(base);
    assert.deepEqual(
      [defaults.logLevel, defaults.logFormat, defaults.workerMetricsPort],
      ['info', undefined, undefined],
    );
    assert.throws(
      () => loadConfig({ ...base, LOG_LEVEL: 'verbose' }),
      (err: Error) => {
        assert.ok(err instanceof ConfigError);
        assert.match(err.message, /^LOG_LEVEL must be one of trace, debug, info, warn, error, fatal, silent/);
        return true;
      },
    );
    assert.throws(() => loadConfig({ ...base, LOG_FORMAT: 'xml' }), /LOG_FORMAT must be one of json, pretty/);
    assert.throws(
      () => loadConfig({ ...base, WORKER_METRICS_PORT: 'x' }),
      /WORKER_METRICS_PORT must be a TCP port/,
    );
  });
});
