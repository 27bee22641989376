// What every benchmark shares: timing and percentile helpers, CPU and round-trip meters, and the results files
// (bench/results/latest.json, latest.md, latency.svg). The servers and the loopback stand-ins come from
// test/support, which the drill and the fuzzer use too.
//
// Benchmarks are scripts, not tests (design habit 10): they print figures and a ratio against a baseline measured
// in the same run, and never assert on time. They exit non-zero only when something broke (an error, or a path
// that did not deliver everything it was asked to).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Runtime } from '@temporalio/worker';
import type { CommandFailedEvent, CommandStartedEvent, CommandSucceededEvent, MongoClient } from 'mongodb';
import { mapBounded } from '../platform/concurrency';
import { processCpuMs, startServers, type ServerStack } from '../test/support';
import { renderLatencySvg, type CdfSeries } from './chart';

export const BENCH_DIR = __dirname;
export const RESULTS_DIR = path.join(BENCH_DIR, 'results');

// ---------------------------------------------------------------------------------------------------------------
// Processes and the Temporal runtime

/** Resident memory of a process now and at its peak (MiB), from /proc; undefined off Linux or once it exited. */
export function processMemory(pid: number): { rssMiB: number; peakRssMiB: number } | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]);
    return { rssMiB: round(kib('VmRSS') / 1024, 0), peakRssMiB: round(kib('VmHWM') / 1024, 0) };
  } catch {
    return undefined;
  }
}

/** CPU ms used by this process and the named others since the returned function's creation. */
export function cpuMeter(pids: Record<string, number | undefined>): () => Record<string, number> {
  const self0 = process.cpuUsage();
  const others0 = Object.fromEntries(
    Object.entries(pids).map(([name, pid]) => [name, pid && processCpuMs(pid)]),
  );
  return () => {
    const self = process.cpuUsage(self0);
    const used: Record<string, number> = { benchProcess: Math.round((self.user + self.system) / 1000) };
    for (const [name, pid] of Object.entries(pids)) {
      const before = others0[name];
      const now = pid ? processCpuMs(pid) : undefined;
      if (typeof before === 'number' && now !== undefined) used[name] = Math.round(now - before);
    }
    return used;
  };
}

/**
 * Counts a client's commandStarted events (it must be connected with monitorCommands) while count() runs, by
 * "command collection", and the time they took.
 */
export class RoundTrips {
  private on = false;
  total = 0;
  readonly byCommand = new Map<string, number>();
  readonly msByCommand = new Map<string, number>();
  private readonly keys = new Map<number, string>();

  constructor(client: MongoClient) {
    client.on('commandStarted', (event: CommandStartedEvent) => {
      if (!this.on) return;
      this.total++;
      const target =
        event.commandName === 'getMore' ? event.command.collection : event.command[event.commandName];
      // A find by _id alone (the sweep's load of the unsettled runs, the per-run lookups) is told apart.
      const filter = event.commandName === 'find' ? (event.command.filter as object | undefined) : undefined;
      const keys = filter ? Object.keys(filter).join() : '';
      // The sweep's read of its owed finished runs' answers (its listing leaves answers out) is told apart too.
      const byId = keys === '_id' ? ' by _id' : keys === '_id,finalAnswer' ? ' answers' : '';
      const key = `${event.commandName} ${typeof target === 'string' ? target : ''}${byId}`.trim();
      this.byCommand.set(key, (this.byCommand.get(key) ?? 0) + 1);
      this.keys.set(event.requestId, key);
    });
    const done = (event: CommandSucceededEvent | CommandFailedEvent): void => {
      const key = this.keys.get(event.requestId);
      if (key === undefined) return;
      this.keys.delete(event.requestId);
      this.msByCommand.set(key, (this.msByCommand.get(key) ?? 0) + event.duration);
    };
    client.on('commandSucceeded', done);
    client.on('commandFailed', done);
  }

  async count<T>(fn: () => Promise<T>): Promise<Counted<T>> {
    this.total = 0;
    this.byCommand.clear();
    this.msByCommand.clear();
    this.on = true;
    const start = nowMs();
    try {
      const value = await fn();
      return {
        value,
        ms: nowMs() - start,
        total: this.total,
        byCommand: Object.fromEntries([...this.byCommand].sort((a, b) => b[1] - a[1])),
        msByCommand: Object.fromEntries(
          [...this.msByCommand].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, round(v, 0)]),
        ),
      };
    } finally {
      this.on = false;
    }
  }
}

export interface Counted<T> {
  value: T;
  ms: number;
  total: number;
  byCommand: Record<string, number>;
  /** Time spent waiting on each kind of command (ms, summed over its round trips). */
  msByCommand: Record<string, number>;
}

let runtimeInstalled = false;

/** Temporal's Rust core logs warnings to stderr by default; a benchmark wants its own output only. */
export function installQuietRuntime(sdkMetricsAddress?: string): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  // Core's own (Rust) logs: errors only, forwarded to the same logger (a dying server otherwise floods stderr
  // with connection-retry warnings). With an address, the SDK's Prometheus exporter too (BENCH_METRICS).
  Runtime.install({
    logger: quietLogger,
    telemetryOptions: {
      logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} },
      ...(sdkMetricsAddress ? { metrics: { prometheus: { bindAddress: sdkMetricsAddress } } } : {}),
    },
  });
}

/**
 * SDK warnings, counted instead of printed: "Activity failed" per activity type and error (a failed attempt that
 * Temporal will retry is invisible in the figures otherwise, except as a slow tail).
 */
export const sdkWarnings = new Map<string, number>();

function countWarning(message: string, meta?: Record<string, unknown>): void {
  const error = meta?.error;
  const detail = error instanceof Error ? error.message : error === undefined ? '' : String(error);
  const what = [message, meta?.activityType, detail.replace(/\s+/g, ' ').slice(-80)]
    .filter(Boolean)
    .join(' · ');
  sdkWarnings.set(what, (sdkWarnings.get(what) ?? 0) + 1);
}

export const quietLogger = {
  log: (level: string, message: string, meta?: Record<string, unknown>) => {
    if (level === 'WARN') countWarning(message, meta);
  },
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: countWarning,
  error: (message: string) => console.error(message),
};

/** A database name no earlier benchmark on an external server used. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
}

// ---------------------------------------------------------------------------------------------------------------
// Timing and statistics

export const nowMs = (): number => performance.now();

export async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const start = nowMs();
  const value = await fn();
  return { ms: nowMs() - start, value };
}

/** The p-th percentile (0..100) by nearest rank. */
export function percentile(values: number[], p: number): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))];
}

export function median(values: number[]): number {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** 101 points (p0..p100) of a latency distribution: enough to draw its CDF without keeping every sample. */
export function cdfPoints(values: number[]): number[] {
  return Array.from({ length: 101 }, (_, p) => round(percentile(values, Math.max(p, 0.0001)), 2));
}

export function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}

/** Runs `count` jobs with at most `width` in flight, in order of index (lib's mapBounded, over indexes). */
export async function inLanes(
  count: number,
  width: number,
  job: (index: number) => Promise<void>,
): Promise<void> {
  await mapBounded(
    Array.from({ length: count }, (_, index) => index),
    width,
    job,
  );
}

export function log(line: string): void {
  process.stdout.write(`${line}\n`);
}

/** A fixed-width table for the console. */
export function table(rows: (string | number)[][]): string {
  const cells = rows.map((row) => row.map(String));
  const widths = cells[0].map((_, i) => Math.max(...cells.map((row) => (row[i] ?? '').length)));
  return cells
    .map((row) =>
      row.map((cell, i) => (i === 0 ? cell.padEnd(widths[i]) : cell.padStart(widths[i]))).join('  '),
    )
    .join('\n');
}

// ---------------------------------------------------------------------------------------------------------------
// Results

export interface MachineInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  platform: string;
  node: string;
  date: string;
  /** 1/5/15-minute load averages when the section finished: other work on the machine skews the figures. */
  loadAverage: number[];
  commit?: string;
}

export function machineInfo(): MachineInfo {
  let commit: string | undefined;
  try {
    commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], {
      cwd: BENCH_DIR,
      encoding: 'utf8',
    }).trim();
  } catch {
    commit = undefined;
  }
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryGiB: round(os.totalmem() / 2 ** 30, 1),
    platform: `${os.platform()} ${os.release()} ${os.arch()}`,
    node: process.version,
    date: new Date().toISOString(),
    loadAverage: os.loadavg().map((l) => round(l, 2)),
    ...(commit ? { commit } : {}),
  };
}

/** The command that produced a section: the npm script when run through npm, else the script itself. */
export function commandLine(script: string): string {
  const event = process.env.npm_lifecycle_event;
  return event ? `npm run ${event}` : `node -r ts-node/register bench/${script}`;
}

/** One benchmark's section of latest.json. */
export interface Section {
  title: string;
  command: string;
  machine: MachineInfo;
  stack: ServerStack['origin'];
  /** Headline rows for the markdown table: what was measured, ours, baseline, ratio, target, met. */
  headline: HeadlineRow[];
  /** Everything else the benchmark measured. */
  figures: Record<string, unknown>;
  /** Latency distributions to draw (episodes). */
  cdf?: CdfSeries[];
  notes: string[];
}

export interface HeadlineRow {
  figure: string;
  ours: string;
  baseline: string;
  ratio: number;
  target: string;
  /** Undefined for reference and diagnostic rows, which have no target. */
  met?: boolean;
}

const SECTION_ORDER = ['push', 'episodes', 'sweep'];

/** Merges one section into latest.json and rewrites latest.md (and latency.svg when a section has CDFs). */
export function writeResults(key: string, section: Section): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  const jsonFile = path.join(RESULTS_DIR, 'latest.json');
  let all: { machine?: MachineInfo; sections: Record<string, Section> } = { sections: {} };
  if (existsSync(jsonFile)) {
    try {
      all = JSON.parse(readFileSync(jsonFile, 'utf8')) as typeof all;
      all.sections ??= {};
    } catch {
      all = { sections: {} };
    }
  }
  all.machine = section.machine;
  all.sections[key] = section;
  const ordered = Object.fromEntries(
    Object.entries(all.sections).sort(
      ([a], [b]) => (SECTION_ORDER.indexOf(a) + 1 || 99) - (SECTION_ORDER.indexOf(b) + 1 || 99),
    ),
  );
  all.sections = ordered;
  writeFileSync(jsonFile, `${JSON.stringify(all, null, 2)}\n`);

  const withCdf = Object.values(ordered).find((s) => s.cdf?.length);
  if (withCdf?.cdf) {
    writeFileSync(path.join(RESULTS_DIR, 'latency.svg'), renderLatencySvg(withCdf.cdf));
  }
  writeFileSync(path.join(RESULTS_DIR, 'latest.md'), renderMarkdown(all.machine, ordered));
}

function renderMarkdown(machine: MachineInfo, sections: Record<string, Section>): string {
  const lines: string[] = [
    '# Benchmark results',
    '',
    `Machine: ${machine.cpus} × ${machine.cpuModel}, ${machine.memoryGiB} GiB, ${machine.platform}, Node ${machine.node}` +
      `${machine.commit ? `, commit ${machine.commit}` : ''}.`,
    '',
    'Every ratio is against a baseline measured in the same run, on the same servers (embedded Temporal dev server ' +
      'and FerretDB unless MONGO_URL / TEMPORAL_ADDRESS were set). Figures are medians of the repetitions noted.',
    '',
  ];
  for (const section of Object.values(sections)) {
    lines.push(`## ${section.title}`, '');
    const load = section.machine.loadAverage?.join(' / ') ?? 'n/a';
    lines.push(
      `\`${section.command}\` — ${section.machine.date}; load average (1/5/15 min) at the end: ${load} ` +
        `on ${section.machine.cpus} CPUs`,
      '',
    );
    lines.push('| figure | ours | baseline | ratio | target | met |', '|---|---:|---:|---:|---|---|');
    for (const row of section.headline) {
      lines.push(
        `| ${row.figure} | ${row.ours} | ${row.baseline} | ${row.ratio} | ${row.target} | ` +
          `${row.met === undefined ? '–' : row.met ? 'yes' : '**no**'} |`,
      );
    }
    lines.push('');
    if (section.cdf?.length) {
      lines.push('![latency distributions](latency.svg)', '');
    }
    for (const note of section.notes) lines.push(`- ${note}`);
    if (section.notes.length) lines.push('');
  }
  return lines.join('\n');
}

/** Runs a benchmark script's main: prints the error and exits non-zero on failure; always exits when done. */
/** Runs a bench's clean-ups, the last added first, each whatever the others did; then stops its servers. */
export async function tearDownBench(bench: {
  cleanups: (() => Promise<unknown> | unknown)[];
  stack?: { stop(): Promise<void> };
}): Promise<void> {
  for (const cleanup of bench.cleanups.reverse()) {
    try {
      await cleanup();
    } catch {
      // keep stopping the rest
    }
  }
  await bench.stack?.stop();
}

export function runMain(main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
      process.exit(1);
    },
  );
}

/**
 * Servers of its own for a bench that builds family stacks (startFamilyStack builds on the test servers);
 * `temporalArgs` go to the Temporal dev server besides temporal-dev.yml's.
 */
export async function serversForFamilyStacks(
  name: string,
  temporalArgs: string[] = [],
): Promise<ServerStack & { temporalAddress: string }> {
  const servers = await startServers(name, { temporal: true, temporalArgs });
  process.env.FLOW_NOTIFY_TEST_STACK = JSON.stringify({
    mongoUrl: servers.mongoUrl,
    temporalAddress: servers.temporalAddress,
    dataRoot: '',
  });
  return servers;
}
