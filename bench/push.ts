// bench:push: one episode fanned out to 2,000 subscriptions on the loopback push service.
//
//   ours      the deliverPush activity function, called directly: what the worker runs for an episode. The
//             recipients and subscriptions queries, the production sender (createPushSender: VAPID JWT cached
//             per origin, keep-alive pinned agent), bounded-parallel fanOut of width W, and the record of every
//             accepted send (what lets a retried activity skip endpoints already reached), group-committed: the
//             sends accepted while one write is in flight go in the next, one push_deliveries row and one
//             updateMany of their subscriptions' lastSuccessAt; a lane waits only past W unrecorded sends.
//   fanOut    the same sends through fanOut alone, with no delivery records: the network path by itself.
//   plain     the baseline: W lanes, each awaiting web-push sendNotification(sub, payload, { vapidDetails, TTL,
//             agent }) in turn: a fresh VAPID signature, key parsing and TLS connection per message.
//
// The headline measures deliverPush, because that is the unit the worker executes and it includes the Mongo
// writes a delivery costs; fanOut alone shows how much of it is the network path. The loopback push service runs
// in this process and does its full work for every message (TLS, VAPID verification, aes128gcm decryption), for
// every path alike. Paths are warmed up, then run REPS times in a rotating order; medians are reported. Every run
// must deliver all 2,000 (counted on the push service). Store calls are timed on the side (summed over lanes) so
// the report can say which Mongo call dominates.
//
// DNS: the same 2,000 endpoints addressed by name (localhost), through a resolver that behaves like
// libuv's getaddrinfo pool: 4 lookups at a time, each taking 2–20 ms. fanOut (one lookup per host per fan-out)
// against the same sender called once per endpoint (a lookup per send, as before), DNS_REPS times in turns; the
// ratio is paired per rep and reported as median with its min–max spread.
import webpush from 'web-push';
import { createPushActivities, groupCommit } from '../activities/push';
import { fanOut, pushOptionsFor } from '../delivery/push/fanOut';
import { renderPush, type PushPayload } from '../domain/push';
import type { RunOutcome } from '../domain/outcome';
import { createPushSender, type PushSender } from '../delivery/push/sender';
import type { HostLookup } from '../delivery/ssrfGuard';
import { createStores, ensureAllIndexes } from '../store';
import { prefKey } from '../store/push/notificationPrefs';
import { connectMongo } from '../store/mongo';
import { subscriptionId, type PushSubscriptionRow } from '../store/push/subscriptions';
import {
  startPushService,
  startServers,
  type PushService,
  type ServerStack,
  type SubscriptionJSON,
} from '../test/support';
import { formatProfile, profiled, type ProfileSummary } from './profile';
import {
  commandLine,
  cpuMeter,
  inLanes,
  log,
  machineInfo,
  median,
  nowMs,
  round,
  runMain,
  table,
  uniqueName,
  writeResults,
  type Section,
} from './support';

const SUBSCRIPTIONS = Number(process.env.BENCH_PUSH_SUBSCRIPTIONS ?? 2000);
const WIDTH = Number(process.env.BENCH_PUSH_WIDTH ?? 16);
const REPS = Number(process.env.BENCH_PUSH_REPS ?? 3);
const WARMUP = Math.min(300, SUBSCRIPTIONS);
const USERS = 200; // the owner and 199 teammates who chose team-wide scope, SUBSCRIPTIONS / USERS endpoints each
const TARGET = 3.0;
const STUDIO = 'https://studio.flow.bench';
const DNS_REPS = Number(process.env.BENCH_PUSH_DNS_REPS ?? 5);
/** libuv's default thread pool: at most this many getaddrinfo calls run at once. */
const RESOLVER_THREADS = 4;
const LOOKUP_MS: [number, number] = [2, 20];

/** A resolver like the system's as Node reaches it: RESOLVER_THREADS at a time, each lookup 2–20 ms. */
function resolverLike(): { lookup: HostLookup; calls: () => number } {
  let calls = 0;
  let busy = 0;
  const waiting: (() => void)[] = [];
  const lookup: HostLookup = async () => {
    calls++;
    while (busy >= RESOLVER_THREADS) await new Promise<void>((resolve) => waiting.push(resolve));
    busy++;
    try {
      const ms = LOOKUP_MS[0] + Math.random() * (LOOKUP_MS[1] - LOOKUP_MS[0]);
      await new Promise((resolve) => setTimeout(resolve, ms));
      return [{ address: '127.0.0.1', family: 4 }];
    } finally {
      busy--;
      waiting.shift()?.();
    }
  };
  return { lookup, calls: () => calls };
}

type PathName = 'ours' | 'oursWarm' | 'fanOut' | 'plain';

interface PathRun {
  ms: number;
  /** ours: time inside each store method, summed over the lanes that called it concurrently. */
  storeMs: Record<string, number>;
  /** CPU ms of the bench process (sends, the push service's decryption) and of FerretDB: steadier than wall time on a loaded machine. */
  cpuMs: Record<string, number>;
}

export interface PushBenchResult {
  pushesPerSecond: Record<PathName, number>;
  ratio: number;
  ratioFanOut: number;
  met: boolean;
}

/**
 * The same store with every method timed into `into` (by "label.method"); a method that answers a function (a
 * writer) answers it timed under the same name.
 */
function timedStore<T extends object>(label: string, store: T, into: Map<string, number>): T {
  const timed =
    (key: string, fn: (...a: unknown[]) => unknown, self?: unknown) =>
    (...args: unknown[]): unknown => {
      const start = nowMs();
      const got = fn.apply(self, args);
      if (typeof got === 'function') return timed(key, got as (...a: unknown[]) => unknown);
      const done = (): void => void into.set(key, (into.get(key) ?? 0) + nowMs() - start);
      if (got instanceof Promise) return got.finally(done);
      done();
      return got;
    };
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(store)) {
    if (typeof fn !== 'function') continue;
    wrapped[name] = timed(`${label}.${name}`, fn as (...a: unknown[]) => unknown, store);
  }
  return wrapped as T;
}

export async function runPushBench(): Promise<PushBenchResult> {
  const stack: ServerStack = await startServers('bench-push', { temporal: false });
  let push: PushService | undefined;
  let closeMongo: (() => Promise<void>) | undefined;
  let closeSender: (() => void) | undefined;
  try {
    push = await startPushService();
    const service = push;
    const mongo = await connectMongo(stack.mongoUrl, uniqueName('bench_push'));
    closeMongo = () => mongo.client.close();
    await ensureAllIndexes(mongo.db);
    const stores = createStores(mongo.db, { claimGraceSeconds: 300 });
    const vapid = { ...webpush.generateVAPIDKeys(), subject: 'mailto:bench@flow.test' };

    // 200 users in one team (the owner, and 199 who chose team-wide scope), SUBSCRIPTIONS / 200 endpoints each.
    const teamId = 'team_bench';
    const users = Array.from({ length: USERS }, (_, i) => `user_${String(i).padStart(3, '0')}`);
    const subscriptions: SubscriptionJSON[] = [];
    const rows: PushSubscriptionRow[] = [];
    const at = new Date();
    for (let i = 0; i < SUBSCRIPTIONS; i++) {
      const subscription = service.endpoint(`s${i}`);
      subscriptions.push(subscription);
      rows.push({
        _id: subscriptionId(subscription.endpoint),
        endpoint: subscription.endpoint,
        keys: subscription.keys,
        userId: users[i % USERS],
        teamId,
        createdAt: at,
        updatedAt: at,
      });
    }
    await mongo.db.collection<PushSubscriptionRow>('push_subscriptions').insertMany(rows);
    await mongo.db.collection('notification_prefs').insertMany(
      users.slice(1).map(
        (userId) =>
          ({
            _id: prefKey(userId, teamId),
            userId,
            teamId,
            scope: 'team',
            off: [],
            updatedAt: at,
          }) as never,
      ),
    );

    const sender = createPushSender({ vapid, allowPrivate: true, allowlist: [], ca: service.ca });
    closeSender = () => sender.close();
    const storeMs = new Map<string, number>();
    const activities = createPushActivities({
      ...stores,
      pushSubscriptions: timedStore('pushSubscriptions', stores.pushSubscriptions, storeMs),
      pushDeliveries: timedStore('pushDeliveries', stores.pushDeliveries, storeMs),
      notificationPrefs: timedStore('notificationPrefs', stores.notificationPrefs, storeMs),
      // As the worker runs it: each recipient is checked for a hold (quiet hours, the burst count), with a bound
      // this bench never reaches, so every push is sent and measured.
      digests: {
        pushHolds: timedStore('pushHolds', stores.pushHolds, storeMs),
        rateLimits: timedStore('rateLimits', stores.rateLimits, storeMs),
        burst: { limit: 1000, windowSeconds: 600 },
        add: async () => undefined,
      },
      sender,
      studioUrl: STUDIO,
      actionTokenTtlSeconds: 86400,
      fanOutWidth: WIDTH,
      now: () => new Date(),
      log: (line) => log(`  ${line}`),
    });
    const fanOutDeps = {
      subscriptions: stores.pushSubscriptions,
      sender,
      width: WIDTH,
      log: (line: string) => log(`  ${line}`),
    };

    let episode = 0;
    const outcomeFor = (): RunOutcome => {
      const runId = `run_bench_${++episode}`;
      return {
        version: 1,
        episodeId: `${runId}:end`,
        kind: 'run_finished',
        runId,
        teamId,
        ownerId: users[0],
        title: 'Quarterly report',
        status: 'finished',
        finalAnswer: 'Revenue grew 12% quarter over quarter; the detail is in the attached workbook.',
        callbackRequested: false,
        occurredAt: new Date().toISOString(),
      };
    };
    const payloadOf = (outcome: RunOutcome): PushPayload => renderPush(outcome, 'run_finished', STUDIO);

    /** One path over `count` subscriptions (all of them, or the warm-up slice). */
    const paths: Record<PathName, (count: number) => Promise<{ ms: number; delivered: number }>> = {
      async ours(count) {
        const outcome = outcomeFor();
        if (count < SUBSCRIPTIONS) {
          // Warm-up: the same sends and delivery records over a slice (deliverPush always takes every
          // recipient's subscriptions); it primes the JIT, the keep-alive pool and the cached VAPID JWT.
          const subs = (await stores.pushSubscriptions.listForUsers(users)).slice(0, count);
          const record = groupCommit(stores.pushDeliveries.batchWriter(outcome.episodeId, 0));
          const start = nowMs();
          const r = await fanOut(fanOutDeps, subs, payloadOf(outcome), async (sub) =>
            record({ subscriptionId: sub._id, userId: sub.userId, at: new Date() }),
          );
          return { ms: nowMs() - start, delivered: r.delivered };
        }
        // Devices with no push in the last minute: every one's lastSuccessAt is written (the worst case).
        await mongo.db
          .collection<PushSubscriptionRow>('push_subscriptions')
          .updateMany({ teamId }, { $unset: { lastSuccessAt: '' } });
        const start = nowMs();
        const result = await activities.deliverPush(outcome);
        const ms = nowMs() - start;
        if (!result.addressable) throw new Error(`deliverPush found nothing to deliver: ${result.reason}`);
        return { ms, delivered: result.delivered };
      },
      async oursWarm(count) {
        if (count < SUBSCRIPTIONS) return paths.fanOut(count);
        // Devices pushed within the last minute (by the runs before): their lastSuccessAt is not written again.
        const outcome = outcomeFor();
        const start = nowMs();
        const result = await activities.deliverPush(outcome);
        const ms = nowMs() - start;
        if (!result.addressable) throw new Error(`deliverPush found nothing to deliver: ${result.reason}`);
        return { ms, delivered: result.delivered };
      },
      async fanOut(count) {
        const outcome = outcomeFor();
        const subs = (await stores.pushSubscriptions.listForUsers(users)).slice(0, count);
        const start = nowMs();
        const r = await fanOut(fanOutDeps, subs, payloadOf(outcome));
        return { ms: nowMs() - start, delivered: r.delivered };
      },
      async plain(count) {
        const outcome = outcomeFor();
        const payload = payloadOf(outcome);
        const options = pushOptionsFor(payload);
        const body = JSON.stringify(payload);
        let delivered = 0;
        const start = nowMs();
        await inLanes(count, WIDTH, async (i) => {
          await webpush.sendNotification(subscriptions[i], body, {
            vapidDetails: vapid,
            TTL: options.ttlSeconds,
            urgency: options.urgency,
            topic: options.topic,
            agent: service.agent,
          });
          delivered++;
        });
        return { ms: nowMs() - start, delivered };
      },
    };

    /** Runs a path and checks it on the push service: every push received, none rejected. */
    const runPath = async (name: PathName, count: number): Promise<PathRun> => {
      service.reset();
      storeMs.clear();
      const cpu = cpuMeter({ mongo: stack.pids.mongo });
      const { ms, delivered } = await paths[name](count);
      const cpuMs = cpu();
      const received = service.received().length;
      const rejected = service.rejections().length;
      if (delivered !== count || received !== count || rejected) {
        throw new Error(
          `${name}: asked for ${count} pushes, sender reported ${delivered}, push service received ${received} ` +
            `(${rejected} rejected${rejected ? `: ${service.rejections()[0].reason}` : ''})`,
        );
      }
      return { ms, storeMs: Object.fromEntries([...storeMs].map(([k, v]) => [k, round(v, 0)])), cpuMs };
    };
    const rate = (ms: number): number => (SUBSCRIPTIONS / ms) * 1000;

    log(
      `bench:push — ${SUBSCRIPTIONS} subscriptions (${USERS} recipients), width ${WIDTH}, ${REPS} reps after a ` +
        `${WARMUP}-push warm-up per path; mongo ${stack.origin.mongo}`,
    );
    const order: PathName[] = ['ours', 'oursWarm', 'fanOut', 'plain'];
    for (const name of order) await runPath(name, WARMUP);

    const runs: Record<PathName, PathRun[]> = { ours: [], oursWarm: [], fanOut: [], plain: [] };
    for (let rep = 0; rep < REPS; rep++) {
      const rotated = [...order.slice(rep % order.length), ...order.slice(0, rep % order.length)];
      for (const name of rotated) runs[name].push(await runPath(name, SUBSCRIPTIONS));
      const storeCalls = Object.entries(runs.ours[rep].storeMs)
        .sort((a, b) => b[1] - a[1])
        .map(([k, v]) => `${k} ${round(v / 1000, 1)} s`)
        .join(', ');
      log(
        `  rep ${rep + 1}: ${rotated.map((name) => `${name} ${round(rate(runs[name][rep].ms), 0)}/s`).join(', ')}` +
          ` (ours ${round(runs.ours[rep].ms / 1000, 1)} s; store calls summed over lanes: ${storeCalls}; CPU ms ` +
          `${rotated.map((name) => `${name} ${JSON.stringify(runs[name][rep].cpuMs)}`).join(', ')})`,
      );
    }

    const pps = {
      ours: round(median(runs.ours.map((r) => rate(r.ms))), 0),
      oursWarm: round(median(runs.oursWarm.map((r) => rate(r.ms))), 0),
      fanOut: round(median(runs.fanOut.map((r) => rate(r.ms))), 0),
      plain: round(median(runs.plain.map((r) => rate(r.ms))), 0),
    };
    // Paired per rep (the paths of one rep ran back to back): steadier than the ratio of medians on a busy machine.
    const pairedRatios = runs.ours.map((r, i) => round(runs.plain[i].ms / r.ms, 2));
    const ratio = round(pps.ours / pps.plain, 2);
    const ratioWarm = round(pps.oursWarm / pps.plain, 2);
    const ratioFanOut = round(pps.fanOut / pps.plain, 2);
    const met = ratio >= TARGET;
    const storeKeys = [...new Set(runs.ours.flatMap((r) => Object.keys(r.storeMs)))];
    const storeMedians = Object.fromEntries(
      storeKeys.map((k) => [k, round(median(runs.ours.map((r) => r.storeMs[k] ?? 0)), 0)]),
    );

    let profiles: Record<string, ProfileSummary> | undefined;
    if (process.env.BENCH_PROFILE === '1') {
      profiles = {};
      for (const name of order) {
        const { summary } = await profiled(() => runPath(name, SUBSCRIPTIONS));
        profiles[name] = summary;
        log(formatProfile(name, summary));
      }
    }

    const samples = (name: PathName): string => runs[name].map((r) => round(rate(r.ms), 0)).join(' ');
    log('');
    log(
      table([
        ['path', 'pushes/s (median)', 'runs'],
        ['ours: deliverPush (as the worker runs it)', pps.ours, samples('ours')],
        ['ours: deliverPush, devices pushed within the minute', pps.oursWarm, samples('oursWarm')],
        ['ours: fanOut alone (no delivery records)', pps.fanOut, samples('fanOut')],
        ['plain web-push sendNotification loop', pps.plain, samples('plain')],
      ]),
    );
    log(
      `ratio ours/plain = ${ratio} (per rep: ${pairedRatios.join(', ')}); target ≥ ${TARGET}: ` +
        `${met ? 'met' : 'NOT met'} (devices pushed within the minute: ${ratioWarm}; fanOut alone/plain = ` +
        `${ratioFanOut})`,
    );

    // DNS: endpoints by name, a resolver that costs what a real one does.
    const resolver = resolverLike();
    const dnsSender: PushSender = createPushSender({
      vapid,
      allowPrivate: true,
      allowlist: [],
      ca: service.ca,
      lookup: resolver.lookup,
    });
    const named: PushSubscriptionRow[] = rows.map((row) => ({
      ...row,
      endpoint: row.endpoint.replace('//127.0.0.1:', '//localhost:'),
    }));
    type DnsPath = 'oncePerFanOut' | 'perSend';
    const dnsPaths: Record<DnsPath, (subs: PushSubscriptionRow[]) => Promise<number>> = {
      async oncePerFanOut(subs) {
        const payload = payloadOf(outcomeFor());
        const r = await fanOut({ ...fanOutDeps, sender: dnsSender }, subs, payload);
        return r.delivered;
      },
      async perSend(subs) {
        const payload = payloadOf(outcomeFor());
        const options = pushOptionsFor(payload);
        let delivered = 0;
        await inLanes(subs.length, WIDTH, async (i) => {
          if ((await dnsSender.send(subs[i], payload, options)).result === 'delivered') delivered++;
        });
        return delivered;
      },
    };
    const runDns = async (name: DnsPath, subs: PushSubscriptionRow[]) => {
      service.reset();
      const calls0 = resolver.calls();
      const start = nowMs();
      const delivered = await dnsPaths[name](subs);
      const ms = nowMs() - start;
      const received = service.received().length;
      if (delivered !== subs.length || received !== subs.length) {
        throw new Error(`dns ${name}: ${subs.length} asked, ${delivered} reported, ${received} received`);
      }
      return { ms, lookups: resolver.calls() - calls0 };
    };
    const dnsOrder: DnsPath[] = ['oncePerFanOut', 'perSend'];
    for (const name of dnsOrder) await runDns(name, named.slice(0, WARMUP));
    const dnsRuns: Record<DnsPath, { ms: number; lookups: number }[]> = { oncePerFanOut: [], perSend: [] };
    for (let rep = 0; rep < DNS_REPS; rep++) {
      const rotated = rep % 2 ? [...dnsOrder].reverse() : dnsOrder;
      for (const name of rotated) dnsRuns[name].push(await runDns(name, named));
      log(
        `  dns rep ${rep + 1}: ` +
          dnsOrder
            .map((n) => `${n} ${round(rate(dnsRuns[n][rep].ms), 0)}/s (${dnsRuns[n][rep].lookups} lookups)`)
            .join(', '),
      );
    }
    dnsSender.close();
    const dnsPps = {
      oncePerFanOut: round(median(dnsRuns.oncePerFanOut.map((r) => rate(r.ms))), 0),
      perSend: round(median(dnsRuns.perSend.map((r) => rate(r.ms))), 0),
    };
    const dnsPaired = dnsRuns.oncePerFanOut.map((r, i) => round(dnsRuns.perSend[i].ms / r.ms, 2));
    const dnsRatio = round(median(dnsPaired), 2);
    const dnsSpread = [Math.min(...dnsPaired), Math.max(...dnsPaired)];
    log(
      table([
        ['DNS path (endpoints by name, lookup 2–20 ms, 4 at a time)', 'pushes/s (median)', 'lookups', 'runs'],
        [
          'fanOut: one lookup per host per fan-out',
          dnsPps.oncePerFanOut,
          dnsRuns.oncePerFanOut[0].lookups,
          dnsRuns.oncePerFanOut.map((r) => round(rate(r.ms), 0)).join(' '),
        ],
        [
          'baseline: a lookup per send',
          dnsPps.perSend,
          dnsRuns.perSend[0].lookups,
          dnsRuns.perSend.map((r) => round(rate(r.ms), 0)).join(' '),
        ],
      ]),
    );
    log(
      `DNS ratio once-per-fan-out / per-send = ${dnsRatio} (median of ${DNS_REPS} paired reps; ` +
        `spread ${dnsSpread[0]}–${dnsSpread[1]}; per rep: ${dnsPaired.join(', ')})`,
    );

    const section: Section = {
      title: `Push fan-out: ${SUBSCRIPTIONS} subscriptions, width ${WIDTH}`,
      command: commandLine('push.ts'),
      machine: machineInfo(),
      stack: stack.origin,
      headline: [
        {
          figure: 'pushes/s: deliverPush vs plain web-push loop',
          ours: String(pps.ours),
          baseline: String(pps.plain),
          ratio,
          target: `≥ ${TARGET}`,
          met,
        },
        {
          figure: 'pushes/s: deliverPush to devices pushed within the minute vs plain',
          ours: String(pps.oursWarm),
          baseline: String(pps.plain),
          ratio: ratioWarm,
          target: '(reference)',
        },
        {
          figure: 'pushes/s: fanOut alone (no delivery records) vs plain',
          ours: String(pps.fanOut),
          baseline: String(pps.plain),
          ratio: ratioFanOut,
          target: '(reference)',
        },
        {
          figure: `pushes/s by name, lookup 2–20 ms: DNS once per fan-out vs per send (spread ${dnsSpread.join('–')})`,
          ours: String(dnsPps.oncePerFanOut),
          baseline: String(dnsPps.perSend),
          ratio: dnsRatio,
          target: '(reference)',
        },
      ],
      figures: {
        subscriptions: SUBSCRIPTIONS,
        recipients: USERS,
        width: WIDTH,
        reps: REPS,
        warmup: WARMUP,
        pushesPerSecond: pps,
        oursStoreMsSummedOverLanes: storeMedians,
        runsMs: Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, v.map((r) => round(r.ms, 0))])),
        cpuMsPerRun: Object.fromEntries(Object.entries(runs).map(([k, v]) => [k, v.map((r) => r.cpuMs)])),
        ratio,
        ratioWarm,
        ratioFanOut,
        pairedRatiosOursPlain: pairedRatios,
        target: TARGET,
        dns: {
          reps: DNS_REPS,
          lookupMs: LOOKUP_MS,
          resolverThreads: RESOLVER_THREADS,
          pushesPerSecond: dnsPps,
          lookupsPerRun: {
            oncePerFanOut: dnsRuns.oncePerFanOut[0].lookups,
            perSend: dnsRuns.perSend[0].lookups,
          },
          runsMs: Object.fromEntries(
            Object.entries(dnsRuns).map(([k, v]) => [k, v.map((r) => round(r.ms, 0))]),
          ),
          pairedRatios: dnsPaired,
          ratio: dnsRatio,
          spread: dnsSpread,
        },
        ...(profiles ? { profiles } : {}),
      },
      notes: [
        'ours = the deliverPush activity function called directly (what the worker runs): recipients and subscription ' +
          'queries, the production sender (VAPID JWT cached per origin, keep-alive pinned agent), fanOut of width W, ' +
          'and the record of every accepted send (group-committed: the sends accepted during one write go in the next, ' +
          'one push_deliveries row plus one updateMany of lastSuccessAt; a lane waits only past W unrecorded sends, so ' +
          'a crash repeats at most 2W).',
        "ours runs with every device's lastSuccessAt cleared beforehand (each is written: the worst case); " +
          'ours, devices pushed within the minute, runs right after (lastSuccessAt is kept to the minute, so none ' +
          'is written again).',
        'fanOut alone = the same sender and lanes with no delivery records.',
        'plain = W lanes each awaiting web-push sendNotification with vapidDetails and an https.Agent without keep-alive.',
        'The loopback push service runs in the same process and verifies VAPID and decrypts every message, for every path.',
      ],
    };
    writeResults('push', section);
    return { pushesPerSecond: pps, ratio, ratioFanOut, met };
  } finally {
    closeSender?.();
    await closeMongo?.().catch(() => undefined);
    await push?.close().catch(() => undefined);
    await stack.stop();
  }
}

if (require.main === module) runMain(async () => void (await runPushBench()));
