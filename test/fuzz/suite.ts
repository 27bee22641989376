// Bad input: property-based fuzzing of every route against a real API, Temporal and FerretDB, in FUZZ_PARTS
// test files (test/fuzz.part<N>.test.ts) that run side by side, each on every FUZZ_PARTS-th route and its own
// FerretDB. 200 cases per route here, from a fixed seed; the drill runs 2,000 (FUZZ_RUNS=2000 FUZZ_FRESH=1). A
// failure prints the route's seed and fast-check's replay path; reproduce with
//   FUZZ_SEED=<seed> FUZZ_ROUTES='<route name>' npx mocha -g 'bad input'
// FUZZ_RUNS sets the cases per route; FUZZ_ROUTES takes comma-separated route names (or parts of names);
// FUZZ_FRESH=1 gives each route its own API and database; FUZZ_VERBOSE=1 prints a line per route;
// FUZZ_REPORT=<file> keeps each part's report as JSON (<file>.part<N>); FUZZ_COUNT_MODE=documents checks "a
// refused request stored nothing" by counting, around each case, the documents of the collections the API writes
// in the request itself (spec.ts COLLECTIONS; the worker's writes land later), instead of write commands.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import http from 'node:http';
import { gzipSync } from 'node:zlib';
import type { Db } from 'mongodb';
import webpush from 'web-push';
import { FUZZED_ROUTES, fuzzRoutes, selectRoutes, type FuzzReport } from './routes';
import { mintToken } from '../../api/auth';
import type { ApiHandle } from '../../api/server';
import { pushSenderFor } from '../../delivery/push/sender';
import { CallbackReceiver } from '../support/callbackReceiver';
import { openStores, startTestApi } from '../support/harness';
import { startPushService, type PushService } from '../support/pushService';
import { startServers, type ServerStack } from '../support/servers';
import { failWhenStalled } from '../support/stallGuard';
import { TEST_JWT_SECRET, testConfig } from '../support/stack';

const DEFAULT_SEED = 20_260_509;
/**
 * 35 routes × 200 cases = 7,000 requests: 290 s in one file on a 2-core CI machine, 100 to 135 s per part in three
 * (under load 11), mostly waiting for answers; successful transitions and redeliveries (each starts a Temporal
 * workflow and needs a fresh run) cost the most.
 */
const DEFAULT_RUNS = 200;

/**
 * A part has no time limit as a whole: its cases bound it (FUZZ_RUNS per route), and a loaded machine only makes it
 * longer. What fails it is a hang: this long without a case finishing (each of a case's requests gives up at 30 s).
 */
const NO_PROGRESS_MS = 180_000;

/** How many test files share the routes: part N fuzzes the routes whose index modulo FUZZ_PARTS is N - 1. */
const FUZZ_PARTS = 3;

/** The routes of one part, in their global order (a route's seed is the run's seed plus its global index). */
const routesOfPart = (part: number): string[] =>
  FUZZED_ROUTES.filter((_, index) => index % FUZZ_PARTS === part - 1);

/** One part's suite (1 to FUZZ_PARTS); the first also holds the tests that are not per route. */
export function describeFuzz(part: number): void {
  describe(`bad input (fuzz, part ${part} of ${FUZZ_PARTS})`, function () {
    const seed = Number(process.env.FUZZ_SEED ?? DEFAULT_SEED);
    const numRuns = Number(process.env.FUZZ_RUNS ?? DEFAULT_RUNS);
    const only = process.env.FUZZ_ROUTES?.split(',').filter(Boolean);
    const fresh = process.env.FUZZ_FRESH === '1';
    let push: PushService;
    /**
     * A FerretDB of its own: "a refused request stored nothing" reads the server's write counters, which count
     * every database on the server, so a suite running beside this one on the shared server would show as writes.
     */
    let store: ServerStack;
    /** The callback routes' runs call back here (loopback): test pings reach it, nothing leaves the machine. */
    let receiver: CallbackReceiver;
    /** What the API logged (the first line of every 5xx's stack), shown when a case fails. */
    const serverLog: string[] = [];

    before(async () => {
      push = await startPushService();
      receiver = await CallbackReceiver.start();
      store = await startServers(`fuzz${part}`, { temporal: false, external: false });
    });

    after(async () => {
      await push?.close();
      await receiver?.close();
      await store?.stop();
    });

    /** An API with web push on (loopback push service) over its own database. */
    async function startFuzzApi(): Promise<{ api: ApiHandle; db: Db; close(): Promise<void> }> {
      const vapid = webpush.generateVAPIDKeys();
      const config = testConfig({
        MONGO_URL: store.mongoUrl,
        VAPID_PUBLIC_KEY: vapid.publicKey,
        VAPID_PRIVATE_KEY: vapid.privateKey,
        VAPID_SUBJECT: 'mailto:ops@flow.test',
        PUSH_ALLOW_PRIVATE: '1',
        SWEEP_INTERVAL_SECONDS: '3600',
        // Valid test pushes keep reaching the send path (a 429 past the limit is a valid answer too, but says less).
        PUSH_TEST_RATE_LIMIT: '100000',
        // The same for test pings and redeliveries; callbacks may reach the loopback receiver.
        CALLBACK_TEST_RATE_LIMIT: '100000',
        CALLBACK_REDELIVER_RATE_LIMIT: '100000',
        CALLBACK_TEST_RATE_LIMIT_PER_USER: '100000',
        CALLBACK_TEST_RATE_LIMIT_PER_TEAM: '100000',
        CALLBACK_REDELIVER_RATE_LIMIT_PER_USER: '100000',
        CALLBACK_REDELIVER_RATE_LIMIT_PER_TEAM: '100000',
        RUN_CREATE_RATE_LIMIT: '100000',
        CALLBACK_ALLOW_PRIVATE: '1',
      });
      const { mongo } = await openStores(config);
      const { api } = await startTestApi(config, {
        pushSender: pushSenderFor(config, { ca: push.ca }),
        log: (line) => serverLog.push(line.split('\n')[0]),
      });
      return {
        api,
        db: mongo.db,
        async close() {
          await api.close();
          await mongo.client.close();
        },
      };
    }

    /** One API fuzzed on the given routes. */
    async function fuzzOnce(
      routes: string[] | undefined,
      onCase: (route: string, cases: number) => void,
    ): Promise<FuzzReport> {
      const { api, db, close } = await startFuzzApi();
      let n = 0;
      try {
        return await fuzzRoutes({
          baseUrl: api.url,
          numRuns,
          db,
          seed,
          jwtSecret: TEST_JWT_SECRET,
          subscription: () => push.endpoint(`fuzz-${n++}`),
          callbackUrl: receiver.url,
          only: routes,
          onCase,
          countMode: process.env.FUZZ_COUNT_MODE === 'documents' ? 'documents' : 'commands',
          log: process.env.FUZZ_VERBOSE ? (line) => console.log(`      ${line}`) : undefined,
        });
      } finally {
        await close();
      }
    }

    // The fuzzer found this one by chance (an undecodable gzip body, then a request on the same connection); here
    // it is on purpose. The body parser stopped reading such bodies midway and left the connection paused after
    // answering with keep-alive, so the next request on it waited for the keep-alive timeout and was reset.
    const decodeTest = part === 1 ? it : () => undefined;
    decodeTest(
      'answers a body it cannot decode with a JSON 4xx, and the connection stays usable',
      async function () {
        const { api, close } = await startFuzzApi();
        // One socket, kept alive: every request below reuses the connection of the one before.
        const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
        const token = await mintToken(TEST_JWT_SECRET, 'decode-user', 'decode-team', '1h');
        const post = (headers: Record<string, string>, body: Buffer | Buffer[]) =>
          new Promise<{ status: number; body: unknown; reused: boolean }>((resolve, reject) => {
            const req = http.request(`${api.url}/api/v1/runs`, {
              method: 'POST',
              agent,
              timeout: 10_000,
              headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers },
            });
            req.on('timeout', () => req.destroy(new Error('no answer within 10 s')));
            req.on('error', reject);
            req.on('response', (res) => {
              const chunks: Buffer[] = [];
              res.on('data', (c: Buffer) => chunks.push(c));
              res.on('end', () => {
                const text = Buffer.concat(chunks).toString('utf8');
                resolve({ status: res.statusCode ?? 0, body: JSON.parse(text), reused: req.reusedSocket });
              });
            });
            // An array is sent chunked (no content-length), one write per element.
            for (const chunk of Array.isArray(body) ? body : [body]) req.write(chunk);
            req.end();
          });
        const valid = Buffer.from('{"title":"after a bad body"}');
        try {
          const cases: [string, Record<string, string>, Buffer | Buffer[], number, string][] = [
            [
              'corrupt gzip',
              { 'content-encoding': 'gzip' },
              Buffer.alloc(200_000, 'x'),
              400,
              'not valid gzip',
            ],
            [
              'corrupt deflate',
              { 'content-encoding': 'deflate' },
              Buffer.alloc(100, 'x'),
              400,
              'not valid deflate',
            ],
            [
              'unknown encoding',
              { 'content-encoding': 'zstd' },
              Buffer.alloc(200_000, 'x'),
              415,
              'content-encoding',
            ],
            [
              'gzip bomb',
              { 'content-encoding': 'gzip' },
              gzipSync(Buffer.alloc(3_000_000, ' ')),
              413,
              'too large',
            ],
            [
              'chunked, over the limit',
              {},
              Array.from({ length: 30 }, () => Buffer.alloc(64_000, ' ')),
              413,
              'too large',
            ],
            ['over the limit', {}, Buffer.alloc(1_100_000, ' '), 413, 'too large'],
          ];
          for (const [what, headers, body, status, error] of cases) {
            const refused = await post(headers, body);
            assert.equal(refused.status, status, `${what}: ${JSON.stringify(refused.body)}`);
            assert.match((refused.body as { error: string }).error, new RegExp(error), what);
            const next = await post({}, valid);
            assert.equal(next.status, 201, `${what}, then a valid request: ${JSON.stringify(next.body)}`);
            assert.ok(next.reused, `${what}: the valid request went out on the same connection`);
          }
        } finally {
          agent.destroy();
          await close();
        }
      },
    );

    // A mistyped FUZZ_ROUTES must not make a run that tests nothing pass; a part it selects nothing of has no test.
    const selectedAnywhere = selectRoutes(only);
    const selected = selectedAnywhere.filter((name) => routesOfPart(part).includes(name));
    if (part === 1 && only)
      it('FUZZ_ROUTES names a route', () =>
        assert.ok(
          selectedAnywhere.length,
          `FUZZ_ROUTES=${process.env.FUZZ_ROUTES} names no route of: ${FUZZED_ROUTES.join(', ')}`,
        ));
    if (selected.length)
      it(`${selected.length} routes: never a 5xx, always an answer, errors are {"error"}, no half-records (seed ${seed})`, async function () {
        console.log(
          `      fuzz seed ${seed}, ${numRuns} cases per route (FUZZ_SEED / FUZZ_RUNS / FUZZ_ROUTES / FUZZ_FRESH to change)`,
        );
        const started = Date.now();
        assert.ok(
          Number.isSafeInteger(seed),
          `FUZZ_SEED must be a whole number, got ${process.env.FUZZ_SEED}`,
        );
        assert.ok(
          Number.isSafeInteger(numRuns) && numRuns > 0,
          `FUZZ_RUNS must be positive, got ${process.env.FUZZ_RUNS}`,
        );
        const groups = fresh ? selected.map((name) => [name]) : [selected];
        // Bounded by its cases; a stall fails it (NO_PROGRESS_MS).
        const reports = await failWhenStalled(this, NO_PROGRESS_MS, async (stepped) => {
          let routesBegun = 0;
          let current = '';
          const onCase = (route: string, cases: number): void => {
            if (route !== current) [current, routesBegun] = [route, routesBegun + 1];
            stepped(
              `${route} (route ${routesBegun} of ${selected.length}), ${cases} cases run of ${numRuns}`,
            );
          };
          const done: FuzzReport[] = [];
          for (const routes of groups) done.push(await fuzzOnce(routes, onCase));
          return done;
        });
        const report: FuzzReport = {
          ...reports[0],
          totalCases: reports.reduce((sum, r) => sum + r.totalCases, 0),
          ms: Date.now() - started,
          routes: reports.flatMap((r) => r.routes),
          failures: reports.flatMap((r) => r.failures),
        };
        console.log(
          `      fuzz: ${report.totalCases} cases over ${report.routes.length} routes in ${report.ms} ms, ${report.failures.length} failing`,
        );
        const reportFile = process.env.FUZZ_REPORT?.replace(/(\.json)?$/, `.part${part}$1`);
        if (reportFile) writeFileSync(reportFile, JSON.stringify(report, null, 2));
        const failures = report.failures.map(
          (f) =>
            `${f.route} (route seed ${f.seed}, path ${f.path ?? '-'}, after ${f.runsBeforeFailure} runs and ${f.shrinks} shrinks;` +
            ` reproduce: FUZZ_SEED=${seed} FUZZ_ROUTES='${f.route}'):\n` +
            `  ${f.reason.replace(/\n/g, '\n  ')}\n  counterexample: ${f.counterexample}`,
        );
        for (const r of report.routes)
          if (!r.failure && r.cases < numRuns)
            failures.push(`${r.route}: only ${r.cases} of ${numRuns} cases ran`);
        // Test pings are real sends, to the loopback receiver only: only run.test events (no worker runs redeliveries).
        const pinged = report.routes.find((r) => r.route === 'POST /api/v1/runs/:id/callback/test');
        if (pinged?.statuses['200'] && !pinged.failure) {
          const types = receiver.received.map((r) => (JSON.parse(r.body) as { type?: string }).type);
          if (!types.length || types.some((type) => type !== 'run.test'))
            failures.push(`the callback receiver got ${JSON.stringify(types)}, expected run.test pings`);
        }
        if (failures.length && serverLog.length)
          failures.push(`the API's log (last 10 lines):\n${serverLog.slice(-10).join('\n')}`);
        assert.deepEqual(failures, [], failures.join('\n\n'));
      });
  });
}
