// A small in-process CPU profiler for benchmarks (BENCH_PROFILE=1): samples a phase with the V8 inspector and
// sums self time by where the code lives (our modules, a package, Node internals, native/GC), so a report can
// say what dominates without opening a .cpuprofile by hand.
import { Session } from 'node:inspector';
import path from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

export interface ProfileSummary {
  totalMs: number;
  /** Self time by area (a package, one of our folders, node internals, (gc), (program)...), largest first. */
  byArea: { area: string; ms: number; share: number }[];
  /** The heaviest functions by self time. */
  topFunctions: { fn: string; area: string; ms: number; share: number }[];
}

const ROOT = path.resolve(__dirname, '..');

function areaOf(url: string, fn: string): string {
  if (!url) return fn.startsWith('(') ? fn : '(native)';
  if (url.startsWith('node:')) return `node:${url.slice(5).split('/')[1] ?? url.slice(5)}`;
  const file = url.replace(/^file:\/\//, '');
  const nm = file.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = file.slice(nm + 'node_modules/'.length).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (file.startsWith(ROOT)) {
    const rel = path.relative(ROOT, file).split(path.sep);
    return rel.length > 2 ? `${rel[0]}/${rel[1]}` : rel[0];
  }
  return file;
}

function post<T>(session: Session, method: string, params?: object): Promise<T> {
  return new Promise((resolve, reject) =>
    session.post(method, params ?? {}, (err, result) => (err ? reject(err) : resolve(result as T))),
  );
}

/** Runs fn under the sampling profiler and summarises where the main thread's CPU time went. */
export async function profiled<T>(fn: () => Promise<T>): Promise<{ value: T; summary: ProfileSummary }> {
  const session = new Session();
  session.connect();
  await post(session, 'Profiler.enable');
  await post(session, 'Profiler.setSamplingInterval', { interval: 200 });
  await post(session, 'Profiler.start');
  let value: T;
  let profile: CpuProfile;
  try {
    value = await fn();
  } finally {
    ({ profile } = await post<{ profile: CpuProfile }>(session, 'Profiler.stop'));
    session.disconnect();
  }
  return { value, summary: summarise(profile) };
}

function summarise(profile: CpuProfile): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
  const areas = new Map<string, number>();
  const fns = new Map<string, { area: string; us: number }>();
  let total = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id)!;
    const { functionName, url, lineNumber } = node.callFrame;
    const area = areaOf(url, functionName);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const key =
      `${functionName || '(anonymous)'} ${url ? `${path.basename(url)}:${lineNumber + 1}` : ''}`.trim();
    const entry = fns.get(key) ?? { area, us: 0 };
    entry.us += us;
    fns.set(key, entry);
    total += us;
  }
  const share = (us: number): number => Math.round((us / total) * 1000) / 10;
  return {
    totalMs: Math.round(total / 1000),
    byArea: [...areas]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 14)
      .map(([area, us]) => ({ area, ms: Math.round(us / 1000), share: share(us) })),
    topFunctions: [...fns]
      .sort((a, b) => b[1].us - a[1].us)
      .slice(0, 14)
      .map(([fn, { area, us }]) => ({ fn, area, ms: Math.round(us / 1000), share: share(us) })),
  };
}

export function formatProfile(label: string, summary: ProfileSummary): string {
  const lines = [`  profile of ${label}: ${summary.totalMs} ms of main-thread samples`];
  lines.push('    by area:');
  for (const a of summary.byArea) lines.push(`      ${String(a.share).padStart(5)} %  ${a.area}`);
  lines.push('    heaviest functions (self time):');
  for (const f of summary.topFunctions)
    lines.push(`      ${String(f.share).padStart(5)} %  ${f.fn}  [${f.area}]`);
  return lines.join('\n');
}
