// The shipped Grafana dashboard and Prometheus rules (deploy/) against real processes: both files parse and have
// the shape their tools read, and every metric any of their PromQL expressions names is in a scrape of the API
// or the worker (the Temporal SDK's metrics included) after real traffic: a run that ends with a push and a
// callback delivered on its second attempt, a failed run whose callback is refused (given up, operator alerted),
// a receiver that is down (its breaker opens), a run that stalls, a claim left by a dead worker and taken over,
// and a sweep pass. A renamed metric would otherwise leave a panel empty and an alert silent, and nobody would
// notice until the night it mattered.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { ChildProcess } from 'node:child_process';
import webpush from 'web-push';
import { parse as parseYaml } from 'yaml';
import { sweepScheduleId } from '../client/schedules';
import { loadConfig } from '../config';
import { freePort, PROJECT_ROOT } from '../platform/embedded';
import { createClaimStore } from '../store/claims';
import { connectMongo } from '../store/mongo';
import { CallbackReceiver } from './support/callbackReceiver';
import { ApiClient, temporalClient } from './support/harness';
import { startProcess, terminate } from './support/processes';
import { deleteSweepScheduleOf, processStackVars } from './support/processStack';
import { startPushService, type PushService } from './support/pushService';
import { childProcessEnv, WorkerProcess } from './support/workerProcess';
import { waitUntil } from './support/waitUntil';

const DASHBOARD_FILE = path.join(PROJECT_ROOT, 'deploy/grafana/flow-notify.json');
const RULES_FILE = path.join(PROJECT_ROOT, 'deploy/prometheus/alerts.yml');

// PromQL words that are not metric names: aggregation operators, keywords and the spelled-out numbers.
const PROMQL_WORDS = new Set([
  'sum',
  'min',
  'max',
  'avg',
  'group',
  'stddev',
  'stdvar',
  'count',
  'count_values',
  'bottomk',
  'topk',
  'quantile',
  'limitk',
  'limit_ratio',
  'by',
  'without',
  'on',
  'ignoring',
  'group_left',
  'group_right',
  'bool',
  'and',
  'or',
  'unless',
  'offset',
  'atan2',
  'inf',
  'nan',
]);

/** One metric selector of an expression: its name and the label names its matchers use. */
interface MetricReference {
  name: string;
  labels: string[];
}

/**
 * The metric selectors of a PromQL expression (Grafana's `$variables` allowed, read as numbers). Strings, range
 * and subquery windows and grouping label lists are removed first; then every identifier that is not a function
 * call (a name followed by `(`), an operator keyword or a number is a metric name, with the label names of the
 * `{...}` that follows it.
 */
function metricReferences(expr: string): MetricReference[] {
  const text = expr
    .replace(/\$\{[^}]*\}|\$\w+/g, '1')
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, '""')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ');
  const refs: MetricReference[] = [];
  // A selector without a name (`{__name__="x"}`) is not used in these files; refuse it rather than miss it.
  assert.doesNotMatch(text, /(^|[^\w:\s])\s*\{/, `a selector without a metric name: ${expr}`);
  const token = /[A-Za-z_:][\w:]*|\d[\w.]*|\{[^}]*\}/g;
  const tokens = [...text.matchAll(token)];
  for (let i = 0; i < tokens.length; i++) {
    const word = tokens[i][0];
    if (word.startsWith('{') || /^\d/.test(word) || PROMQL_WORDS.has(word.toLowerCase())) continue;
    const after = text.slice(tokens[i].index + word.length);
    if (/^\s*\(/.test(after)) continue; // a function
    const matchers = /^\s*(\{[^}]*\})/.exec(after)?.[1] ?? '';
    const labels = [...matchers.matchAll(/([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)/g)].map((m) => m[1]);
    refs.push({ name: word, labels });
  }
  return refs;
}

/** What a Prometheus text answer holds: sample names with their label names, and family types. */
interface Exposition {
  samples: Map<string, Set<string>>;
  types: Map<string, string>;
}

function readExposition(text: string): Exposition {
  const samples = new Map<string, Set<string>>();
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const type = /^# TYPE (\S+) (\S+)/.exec(line);
    if (type) types.set(type[1], type[2]);
    if (!line || line.startsWith('#')) continue;
    const sample = /^([A-Za-z_:][\w:]*)(\{[^}]*\})?\s/.exec(line);
    assert.ok(sample, `not a sample line: ${line}`);
    const labels = samples.get(sample[1]) ?? new Set<string>();
    for (const m of (sample[2] ?? '').matchAll(/([A-Za-z_]\w*)="/g)) labels.add(m[1]);
    samples.set(sample[1], labels);
  }
  return { samples, types };
}

/**
 * The family a sample name belongs to: `x_bucket`, `x_sum` and `x_count` of a histogram (`_sum` and `_count` of
 * a summary) are family `x`; any other name is its own family.
 */
function familyOf(name: string, types: Map<string, string>): string {
  const suffix = /^(.*)_(bucket|sum|count)$/.exec(name);
  if (!suffix) return name;
  const [, base, part] = suffix;
  const type = types.get(base);
  if (type === 'histogram' || (type === 'summary' && part !== 'bucket')) return base;
  return name;
}

interface Dashboard {
  schemaVersion: number;
  title: string;
  uid: string;
  templating: { list: { name: string; type: string; query?: string }[] };
  panels: Panel[];
}
interface Panel {
  id: number;
  type: string;
  title: string;
  datasource?: { type: string; uid: string };
  gridPos: { x: number; y: number; w: number; h: number };
  targets?: { expr: string; refId: string; datasource?: { type: string; uid: string } }[];
  panels?: Panel[];
}

function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

interface Rule {
  alert?: string;
  record?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

function readRules(): { groups: { name: string; interval?: string; rules: Rule[] }[] } {
  return parseYaml(readFileSync(RULES_FILE, 'utf8')) as { groups: { name: string; rules: Rule[] }[] };
}

/** Every panel, those inside collapsed rows included. */
function allPanels(panels: Panel[]): Panel[] {
  return panels.flatMap((panel) => [panel, ...allPanels(panel.panels ?? [])]);
}

/** Every PromQL expression of both files, named by where it is. */
function allExpressions(): { where: string; expr: string }[] {
  const fromDashboard = allPanels(readDashboard().panels).flatMap((panel) =>
    (panel.targets ?? []).map((t) => ({ where: `panel "${panel.title}" ${t.refId}`, expr: t.expr })),
  );
  const fromRules = readRules().groups.flatMap((group) =>
    group.rules.map((rule) => ({ where: `rule ${rule.alert ?? rule.record}`, expr: rule.expr })),
  );
  return [...fromDashboard, ...fromRules];
}

const DURATION = /^(\d+(ms|s|m|h|d|w|y))+$/;

describe('deploy/: the Grafana dashboard and the Prometheus alert rules', function () {
  it('finds the metric names of PromQL expressions, not functions, keywords, labels or windows', () => {
    const names = (expr: string) => metricReferences(expr).map((r) => `${r.name}[${r.labels.join(',')}]`);
    assert.deepEqual(
      names(
        'histogram_quantile(0.95, sum by (le, kind) (rate(a_seconds_bucket{kind=~"run_.*"}[$__rate_interval])))',
      ),
      ['a_seconds_bucket[kind]'],
    );
    assert.deepEqual(
      names(
        '(sum(increase(b_count[6m])) == 0) or absent(b_count) unless on (instance) c offset 1h > bool 1e3',
      ),
      ['b_count[]', 'b_count[]', 'c[]'],
    );
    assert.deepEqual(
      names('sum without (x) (rate(d_total{result="by (x) sum(e)", status_class!="2xx"}[5m:1m]))'),
      ['d_total[result,status_class]'],
    );
    assert.deepEqual(names('max_over_time(f[1h]) * on (job) group_left (kind) g / Inf'), ['f[]', 'g[]']);
  });

  it('the dashboard is a Grafana dashboard: panels with PromQL targets on the datasource variable', () => {
    const dashboard = readDashboard();
    assert.ok(dashboard.schemaVersion >= 39, `schemaVersion ${dashboard.schemaVersion}`);
    assert.ok(dashboard.title && dashboard.uid, 'a title and a uid');
    const variable = dashboard.templating.list.find((v) => v.type === 'datasource');
    assert.ok(variable, 'a datasource variable');
    assert.equal(variable.query, 'prometheus');
    const onVariable = [`\${${variable.name}}`, `$${variable.name}`];
    const panels = allPanels(dashboard.panels);
    const queried = panels.filter((p) => p.type !== 'row');
    assert.ok(queried.length >= 10, `${queried.length} panels`);
    const ids = new Set<number>();
    for (const panel of panels) {
      assert.ok(Number.isInteger(panel.id) && !ids.has(panel.id), `panel "${panel.title}": a unique id`);
      ids.add(panel.id);
      assert.ok(panel.gridPos && panel.gridPos.w > 0 && panel.gridPos.x + panel.gridPos.w <= 24, panel.title);
      if (panel.type === 'row') continue;
      assert.ok(panel.targets?.length, `panel "${panel.title}" has targets`);
      for (const source of [panel.datasource, ...panel.targets.map((t) => t.datasource)]) {
        // No datasource uid of one Grafana: the dashboard imports into any.
        assert.equal(source?.type, 'prometheus', panel.title);
        assert.ok(onVariable.includes(source.uid), `panel "${panel.title}" uses ${source.uid}`);
      }
      for (const target of panel.targets) {
        assert.ok(target.refId, panel.title);
        assert.ok(typeof target.expr === 'string' && target.expr.trim(), `panel "${panel.title}": an expr`);
      }
    }
  });

  it('the rules are Prometheus alerting rules: groups of alert, expr, for, labels and annotations', () => {
    const { groups } = readRules();
    assert.ok(Array.isArray(groups) && groups.length > 0);
    const names = new Set<string>();
    for (const group of groups) {
      assert.ok(group.name && Array.isArray(group.rules) && group.rules.length, 'a named group with rules');
      for (const rule of group.rules) {
        assert.ok(rule.alert && /^[A-Z][A-Za-z0-9]+$/.test(rule.alert), `an alert name: ${rule.alert}`);
        assert.ok(!names.has(rule.alert), `${rule.alert} once`);
        names.add(rule.alert);
        assert.ok(typeof rule.expr === 'string' && rule.expr.trim(), `${rule.alert}: an expr`);
        assert.match(String(rule.for), DURATION, `${rule.alert}: a for duration`);
        assert.ok(['critical', 'warning', 'info'].includes(rule.labels?.severity ?? ''), rule.alert);
        assert.ok(rule.annotations?.summary && rule.annotations.description, `${rule.alert}: annotations`);
        assert.ok(metricReferences(rule.expr).length > 0, `${rule.alert} names a metric`);
        const known = new Set(['alert', 'expr', 'for', 'keep_firing_for', 'labels', 'annotations']);
        for (const key of Object.keys(rule)) assert.ok(known.has(key), `${rule.alert}: unknown key ${key}`);
      }
    }
    // The alerts the deployment guide promises.
    for (const alert of [
      'FlowNotifyCallbackGiveUpsRising',
      'FlowNotifySweepStalled',
      'FlowNotifyWorkerTaskSlotsExhausted',
      'FlowNotifyCallbackBreakerOpen',
    ])
      assert.ok(names.has(alert), alert);
  });

  describe('every metric they name is in a scrape after real traffic', function () {
    this.timeout(180_000);
    let push: PushService;
    let callbacks: CallbackReceiver;
    let opsHook: CallbackReceiver;
    /** A receiver that is down: its origin's breaker opens. */
    let down: CallbackReceiver;
    let worker: WorkerProcess | undefined;
    let api: { child: ChildProcess } | undefined;
    let vars: Record<string, string>;
    let workerMetricsPort: number;

    before(async () => {
      push = await startPushService();
      callbacks = await CallbackReceiver.start();
      opsHook = await CallbackReceiver.start();
      down = await CallbackReceiver.start();
      down.answerAlways({ status: 503 });
      const vapid = webpush.generateVAPIDKeys();
      workerMetricsPort = await freePort();
      vars = processStackVars(
        { db: 't_deploy', queue: 'deploy' },
        {
          VAPID_PUBLIC_KEY: vapid.publicKey,
          VAPID_PRIVATE_KEY: vapid.privateKey,
          PUSH_ALLOW_PRIVATE: '1',
          CALLBACK_ALLOW_PRIVATE: '1',
          // One retry a second later: an attempt refused with a 503 is retried, a 400 gives up.
          CALLBACK_RETRY_SECONDS: '1',
          // Two failures in a row open a receiver origin's breaker (the other receiver never fails twice in a row).
          CALLBACK_BREAKER_FAILURES: '2',
          OPS_ALERT_WEBHOOK_URL: opsHook.url,
          SWEEP_INTERVAL_SECONDS: '3600',
          // A run left alone stalls quickly: a run-health alert.
          STALL_AFTER_SECONDS: '3',
          PORT: String(await freePort()),
          METRICS_PORT: String(await freePort()),
        },
      );
      worker = await WorkerProcess.start({
        vars: { ...vars, WORKER_METRICS_PORT: String(workerMetricsPort) },
        trustCa: push.ca,
      });
      api = await startProcess(
        PROJECT_ROOT,
        ['-r', 'ts-node/register', 'api/server.ts'],
        childProcessEnv(vars),
        'flow-notify api: listening',
      );
    });

    after(async () => {
      if (api) await terminate(api.child);
      await worker?.stop();
      if (vars) await deleteSweepScheduleOf(loadConfig(vars));
      await push?.close();
      await callbacks?.close();
      await opsHook?.close();
      await down?.close();
    });

    async function scrape(port: number): Promise<string> {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      assert.equal(res.status, 200);
      return res.text();
    }

    /** Scrapes until every sample name in `names` is there, then answers the last scrape. */
    async function scrapeUntil(port: number, names: string[]): Promise<string> {
      let missing = names;
      return waitUntil(
        `every sample name scraped from port ${port}`,
        async () => {
          const text = await scrape(port);
          const { samples } = readExposition(text);
          missing = names.filter((name) => !samples.has(name));
          return missing.length === 0 && text;
        },
        { timeoutMs: 60_000, intervalMs: 200, seen: () => ({ missing }) },
      );
    }

    it('pushes, a retried and a refused callback, an open breaker, a stall, a takeover, a sweep pass: every name is scraped', async () => {
      const alice = new ApiClient(`http://127.0.0.1:${vars.PORT}`).as('alice', 'acme');
      const sub = push.endpoint('alice-laptop');
      assert.equal((await alice.post('/api/v1/notifications/push/subscriptions', sub)).status, 201);
      const secret = `whsec_${Buffer.from('a-callback-secret-of-32-bytes!!!').toString('base64')}`;

      // A run that ends: a push, and a callback the receiver takes on the second attempt (503, then 204).
      callbacks.answer({ status: 503 });
      const finished = await alice.post('/api/v1/runs', {
        title: 'Shipped',
        callback: { url: callbacks.url, secret },
      });
      assert.equal(finished.status, 201, finished.text);
      const completed = await alice.post(`/api/v1/runs/${finished.body.id}/complete`, { finalAnswer: 'ok' });
      assert.equal(completed.status, 200, completed.text);
      await callbacks.waitFor(2, 30_000);
      await push.waitFor(1, sub, 30_000);

      // A failed run whose receiver refuses for good (400): given up; the operator hears of the failure and of
      // the callback given up.
      callbacks.answerAlways({ status: 400 });
      const failing = await alice.post('/api/v1/runs', {
        title: 'Doomed',
        callback: { url: callbacks.url, secret },
      });
      assert.equal(failing.status, 201, failing.text);
      const failed = await alice.post(`/api/v1/runs/${failing.body.id}/fail`, {
        error: { code: 'E', message: 'boom' },
      });
      assert.equal(failed.status, 200, failed.text);
      await callbacks.waitFor(3, 30_000);
      await opsHook.waitFor(2, 30_000);
      await push.waitFor(2, sub, 30_000);

      // A receiver that is down: a run's two attempts fail and open its origin's breaker; the next run's attempt
      // is held (breaker_open), nothing sent.
      const toDown = async (title: string) => {
        const created = await alice.post('/api/v1/runs', { title, callback: { url: down.url, secret } });
        assert.equal(created.status, 201, created.text);
        const ended = await alice.post(`/api/v1/runs/${created.body.id}/complete`, { finalAnswer: 'ok' });
        assert.equal(ended.status, 200, ended.text);
      };
      await toDown('Unheard');
      await down.waitFor(2, 30_000);
      await toDown('Held back');

      // A run that shows no progress: the run-health workflow alerts the operator of a stall.
      const stalling = await alice.post('/api/v1/runs', { title: 'Stuck' });
      assert.equal(stalling.status, 201, stalling.text);
      await waitUntil('a stall alert', () => opsHook.received.some((r) => r.body.includes('"stall"')), {
        timeoutMs: 30_000,
      });

      // A worker died holding a run's push claim ten minutes ago (past CLAIM_GRACE_SECONDS): the episode takes
      // the claim over.
      const orphaned = await alice.post('/api/v1/runs', { title: 'Orphaned' });
      assert.equal(orphaned.status, 201, orphaned.text);
      const mongo = await connectMongo(vars.MONGO_URL, vars.MONGO_DB);
      try {
        const tenMinutesAgo = () => new Date(Date.now() - 600_000);
        const claims = createClaimStore(mongo.db, { graceSeconds: 300, now: tenMinutesAgo });
        assert.ok(await claims.tryMark(`${orphaned.body.id}:end`, 'a-worker-that-died'));
      } finally {
        await mongo.client.close();
      }
      const ended = await alice.post(`/api/v1/runs/${orphaned.body.id}/complete`, { finalAnswer: 'ok' });
      assert.equal(ended.status, 200, ended.text);
      await push.waitFor(3, sub, 30_000);

      // A sweep pass, as the schedule would start it.
      const { client, close } = await temporalClient(loadConfig(vars));
      try {
        await client.schedule.getHandle(sweepScheduleId(vars.TEMPORAL_TASK_QUEUE)).trigger();
      } finally {
        await close();
      }

      const workerText = await scrapeUntil(workerMetricsPort, [
        'flow_notify_sweep_pass_seconds_count',
        'flow_notify_callbacks_given_up_total',
        'flow_notify_callback_attempts_total',
        'flow_notify_outcome_to_first_push_seconds_bucket',
        'flow_notify_claim_takeovers_total',
        'flow_notify_health_alerts_total',
        'flow_notify_callback_breaker_open',
        'flow_notify_callback_attempts_held_total',
      ]);
      const apiText = await scrapeUntil(Number(vars.METRICS_PORT), ['flow_notify_episodes_started_total']);
      const worker = readExposition(workerText);
      const api = readExposition(apiText);
      if (process.env.DEPLOY_DUMP) console.log(workerText);

      const expressions = allExpressions();
      assert.ok(expressions.length > 20, `${expressions.length} expressions`);
      const missing: string[] = [];
      const families = new Set<string>();
      for (const { where, expr } of expressions) {
        for (const ref of metricReferences(expr)) {
          // A histogram is queried by its series, never by its family name (that selects nothing).
          if ([worker, api].some((e) => e.types.get(ref.name) === 'histogram')) {
            missing.push(`${where}: ${ref.name} is a histogram: name its _bucket, _sum or _count`);
            continue;
          }
          const scraped = [worker, api].filter((e) => e.samples.has(ref.name));
          if (scraped.length === 0) {
            missing.push(`${where}: ${ref.name} is in no scrape`);
            continue;
          }
          families.add(familyOf(ref.name, scraped[0].types));
          // Label names the matchers use, except the target labels Prometheus adds at scrape time.
          const labels = new Set(scraped.flatMap((e) => [...e.samples.get(ref.name)!]));
          for (const label of ref.labels)
            if (!labels.has(label) && label !== 'job' && label !== 'instance')
              missing.push(`${where}: ${ref.name} has no label ${label}`);
        }
      }
      assert.deepEqual(missing, []);
      // The families the brief names, at least.
      for (const family of [
        'flow_notify_episodes_started_total',
        'flow_notify_push_sends_total',
        'flow_notify_outcome_to_first_push_seconds',
        'flow_notify_callback_attempts_total',
        'flow_notify_callbacks_given_up_total',
        'flow_notify_sweep_pass_seconds',
        'flow_notify_callback_breaker_open',
        'flow_notify_pause_to_first_shown_seconds',
        'flow_notify_pause_to_answer_seconds',
        'temporal_worker_task_slots_available',
      ])
        assert.ok(families.has(family), `${family} is on the dashboard or in a rule`);
    });
  });
});
