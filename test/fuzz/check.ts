// Sending a case, and the properties every answer must hold: an answer, never a 5xx, errors as {"error"}, a refusal
// that stored nothing, a create that stored exactly its record, no 2xx across teams or users; and, after each
// route, the domain shape of everything stored.
import type { Db } from 'mongodb';
import { RUN_STATUSES } from '../../domain/runStatus';
import { PREF_KINDS, prefKey } from '../../store/push/notificationPrefs';
import { COLLECTIONS, type Answer, type ResolvedRequest, type RouteSpec } from './spec';

const STANDARD_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export const isPlainObject = (v: unknown): boolean =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export async function send(
  baseUrl: string,
  timeoutMs: number,
  req: { method: string; path: string; headers: Record<string, string>; body?: string | Uint8Array },
): Promise<Answer | { error: string }> {
  try {
    const res = await fetch(baseUrl + req.path, {
      method: req.method,
      headers: req.headers,
      body: typeof req.body === 'object' ? new Uint8Array(req.body) : req.body,
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = Buffer.from(await res.arrayBuffer()).toString('utf8');
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', text };
  } catch (err) {
    const cause = (err as { cause?: { code?: string; message?: string } }).cause;
    return {
      error: `${err instanceof Error ? err.message : String(err)}${cause ? ` (${cause.code ?? ''} ${cause.message ?? ''})` : ''}`,
    };
  }
}

export function interactionOf(text: string): string | undefined {
  try {
    const id = (JSON.parse(text) as { interactionId?: unknown }).interactionId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

export function short(text: string, max = 240): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (${text.length} chars)`;
}

export function describe(req: ResolvedRequest, answer: Answer | { error: string }): string {
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, short(v, 120)]));
  const body =
    req.body === undefined
      ? 'none'
      : typeof req.body === 'string'
        ? `${JSON.stringify(short(req.body))} (${Buffer.byteLength(req.body)} bytes)`
        : `bytes ${Buffer.from(req.body).toString('hex')}`;
  const got =
    'error' in answer
      ? `no answer: ${answer.error}`
      : `${answer.status} ${answer.contentType} ${short(answer.text)}`;
  return `request: ${req.method} ${short(req.path, 200)}\n  headers: ${JSON.stringify(headers)}\n  body: ${body}\n  answer: ${got}`;
}

// What a case wrote. The default probe reads the server's own command counters (serverStatus
// metrics.commands: one cheap call on MongoDB and FerretDB alike), so "a refused request wrote nothing" is
// checked on every case at a constant cost; counting documents instead (countMode 'documents') is exact for the
// collections it counts but scans each on FerretDB, which grows with the store (≈40 µs a document, twice a case).
const WRITE_COMMANDS = ['insert', 'update', 'delete', 'findAndModify'] as const;
export type Snapshot = Record<string, number>;

export async function commandSnapshot(db: Db): Promise<Snapshot | undefined> {
  const status = (await db.admin().command({ serverStatus: 1 })) as {
    metrics?: { commands?: Record<string, { total?: unknown; failed?: unknown } | undefined> };
  };
  const commands = status.metrics?.commands;
  if (!commands) return undefined;
  return Object.fromEntries(
    WRITE_COMMANDS.map((name) => {
      const total = commands[name]?.total;
      return [name, typeof total === 'number' || typeof total === 'bigint' ? Number(total) : 0];
    }),
  );
}

export async function documentSnapshot(db: Db): Promise<Snapshot> {
  const counts = await Promise.all(COLLECTIONS.map((name) => db.collection(name).countDocuments({})));
  return Object.fromEntries(COLLECTIONS.map((name, i) => [name, counts[i]]));
}

export function diff(before: Snapshot, after: Snapshot): Snapshot {
  const changed: Snapshot = {};
  for (const name of Object.keys(after))
    if (after[name] !== (before[name] ?? 0)) changed[name] = after[name] - (before[name] ?? 0);
  return changed;
}

function isErrorShape(answer: Answer): string | undefined {
  if (!/^application\/json/i.test(answer.contentType))
    return `error answer is ${answer.contentType || 'untyped'}`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(answer.text);
  } catch {
    return 'error answer is not JSON';
  }
  if (
    !isPlainObject(parsed) ||
    typeof (parsed as { error?: unknown }).error !== 'string' ||
    Object.keys(parsed as object).length !== 1
  ) {
    return 'error answer is not {"error": string}';
  }
  return undefined;
}

/** Properties of one answer; an empty list means the case passed. */
export function check(
  route: RouteSpec,
  req: ResolvedRequest,
  answer: Answer | { error: string },
  written: Snapshot,
  mode: 'commands' | 'documents',
): string[] {
  const wrote = JSON.stringify(written);
  if ('error' in answer)
    return [`the API did not answer: ${answer.error} (write commands meanwhile: ${wrote})`];
  const problems: string[] = [];
  const { status } = answer;
  // 501 is HTTP's own answer to a method the server does not implement; 431 is Node's to oversized headers.
  if (status >= 500 && !(status === 501 && !STANDARD_METHODS.has(req.method)))
    problems.push(`answered ${status} (write commands meanwhile: ${wrote})`);
  if (status >= 400 && req.method !== 'HEAD' && status !== 431) {
    const shape = isErrorShape(answer);
    if (shape) problems.push(shape);
  }
  // A refused request stores nothing. By command: no insert, update or findAndModify ran at all (a delete
  // cannot leave a record behind; DELETE of a missing watch is a 404 after a no-op delete).
  // Refused on a run already in the repeat's state, the route finishes the transition first all the same.
  const repairs =
    mode === 'commands' && route.repeatOf !== undefined && req.runStates.includes(route.repeatOf)
      ? (route.repeatInserts ?? 0)
      : 0;
  const stored =
    mode === 'documents'
      ? Object.keys(written).length > 0
      : Math.max(0, (written.insert ?? 0) - repairs) + (written.update ?? 0) + (written.findAndModify ?? 0) >
        0;
  if (status >= 400 && status < 500 && stored) problems.push(`a ${status} wrote to the store: ${wrote}`);
  if ((req.method === 'GET' || req.method === 'HEAD') && status < 500 && stored)
    problems.push(`a ${req.method} (${status}) wrote to the store: ${wrote}`);
  // The path as fetch sent it (a relative "//…" or "/\\…" would parse as a host, so keep the origin in front).
  const pathname = new URL(`http://x${req.path}`).pathname;
  // Without a token only the studio's files (HTML, scripts, styles, images), the probes (/healthz, /readyz; /metrics
  // is text) and the OpenAPI document answer a 2xx: a JSON or empty 2xx (a 204, say) came from a route behind the gate.
  if (
    status < 300 &&
    req.callerTeam === undefined &&
    (/^application\/json/i.test(answer.contentType) || !answer.contentType) &&
    !/^\/(healthz|readyz|api\/v1\/openapi\.json)\/?$/i.test(pathname)
  ) {
    problems.push(`answered ${status} (${answer.contentType || 'no content type'}) without a valid token`);
  }
  if (
    status < 300 &&
    req.method !== 'OPTIONS' &&
    req.callerTeam &&
    req.runTeams.some((team) => team !== req.callerTeam)
  ) {
    problems.push(`answered ${status} to ${req.callerTeam} about another team's run`);
  }
  const notTheirs = req.devices.filter((d) => d.owner !== req.callerUser);
  if (status < 300 && req.method !== 'OPTIONS' && req.method !== 'HEAD' && notTheirs.length)
    problems.push(
      `answered ${status} to ${req.callerUser ?? 'no user'} about the ${notTheirs[0].whose} device`,
    );
  // A create that succeeds writes its whole record: exactly these documents (or, by command, these inserts).
  if (status < 300 && req.method === route.method && req.wellFormed && route.template) {
    const repeat = route.repeatOf !== undefined && req.runStates.includes(route.repeatOf);
    const expected = repeat
      ? mode === 'documents'
        ? {}
        : { insert: route.repeatInserts ?? 0 }
      : mode === 'documents'
        ? route.onSuccess?.(answer)
        : route.inserts === undefined
          ? undefined
          : { insert: typeof route.inserts === 'number' ? route.inserts : route.inserts(answer as Answer) };
    if (expected) {
      const got = mode === 'documents' ? written : { insert: written.insert ?? 0 };
      const want = Object.fromEntries(
        Object.keys({ ...expected, ...got }).flatMap((k) =>
          (expected as Snapshot)[k] || got[k] ? [[k, (expected as Snapshot)[k] ?? 0]] : [],
        ),
      );
      const have = Object.fromEntries(Object.keys(want).map((k) => [k, got[k] ?? 0]));
      if (JSON.stringify(want) !== JSON.stringify(have))
        problems.push(`a ${status} wrote ${JSON.stringify(have)}, expected exactly ${JSON.stringify(want)}`);
    }
  }
  return problems;
}

/**
 * The domain shape of every stored document, and the records that must come together: a run and its
 * run_started event, one run_paused event per pause, its run_<status> event once ended, the pending interaction
 * of a run paused for a human; no event, interaction or watch of a missing run or of another team.
 */
export async function storedShapeProblems(db: Db): Promise<string[]> {
  const problems: string[] = [];
  const isDate = (v: unknown) => v instanceof Date && !Number.isNaN(v.getTime());
  const isText = (v: unknown) => typeof v === 'string' && v.length > 0;
  const get = (doc: unknown, key: string): unknown => (doc as Record<string, unknown> | undefined)?.[key];

  const eventsOf = new Map<string, { types: string[]; teams: Set<unknown> }>();
  for await (const e of db
    .collection('events')
    .find({}, { projection: { _id: 1, runId: 1, teamId: 1, type: 1, at: 1 } })) {
    if (!isText(e._id) || !isText(e.type) || !isDate(e.at) || !isText(e.teamId) || !isText(e.runId))
      problems.push(`event ${String(e._id)}: bad shape`);
    const entry = eventsOf.get(String(e.runId)) ?? { types: [], teams: new Set() };
    entry.types.push(String(e.type));
    entry.teams.add(e.teamId);
    eventsOf.set(String(e.runId), entry);
  }
  const interactions = new Map<string, Record<string, unknown>>();
  for await (const i of db.collection('interactions').find({}, { projection: { prompt: 0 } })) {
    interactions.set(String(i._id), i);
    if (
      !['pending', 'answered', 'abandoned'].includes(i.status as string) ||
      !isDate(i.createdAt) ||
      !isText(i.runId) ||
      (i.status === 'answered' && (typeof i.answer !== 'string' || !isDate(i.answeredAt)))
    )
      problems.push(`interaction ${String(i._id)}: bad shape`);
  }

  const runs = new Map<string, string>();
  for await (const r of db
    .collection('runs')
    .find({}, { projection: { finalAnswer: 0, 'error.message': 0 } })) {
    const id = String(r._id);
    runs.set(id, String(r.teamId));
    const pause = r.pause as Record<string, unknown> | undefined;
    const events = eventsOf.get(id) ?? { types: [], teams: new Set() };
    const count = (type: string) => events.types.filter((t) => t === type).length;
    const interaction = isText(pause?.interactionId)
      ? interactions.get(String(pause?.interactionId))
      : undefined;
    const bad = [
      !isText(r._id) && '_id',
      !isText(r.teamId) && 'teamId',
      !isText(r.ownerId) && 'ownerId',
      typeof r.title !== 'string' && 'title',
      !(RUN_STATUSES as readonly unknown[]).includes(r.status) && 'status',
      !(Number.isInteger(r.pauseCount) && (r.pauseCount as number) >= 0) && 'pauseCount',
      !(Array.isArray(r.watchedIssueIds) && r.watchedIssueIds.every(isText)) && 'watchedIssueIds',
      !isDate(r.createdAt) && 'createdAt',
      !isDate(r.updatedAt) && 'updatedAt',
      r.callback !== undefined &&
        !(isText(get(r.callback, 'url')) && isText(get(r.callback, 'secret'))) &&
        'callback',
      r.status === 'paused' && !(pause && typeof pause.reason === 'string' && isDate(pause.at)) && 'pause',
      ['finished', 'failed', 'cancelled'].includes(r.status as string) && !isDate(r.endedAt) && 'endedAt',
      r.status === 'failed' && !isText(get(r.error, 'code')) && 'error',
      count('run_started') !== 1 && `${count('run_started')} run_started events`,
      count('run_paused') !== r.pauseCount &&
        `${count('run_paused')} run_paused events for ${String(r.pauseCount)} pauses`,
      ['finished', 'failed', 'cancelled'].includes(r.status as string) &&
        count(`run_${String(r.status)}`) !== 1 &&
        `${count(`run_${String(r.status)}`)} run_${String(r.status)} events`,
      r.status === 'paused' &&
        pause?.reason === 'human_input' &&
        !(interaction && interaction.status === 'pending' && interaction.runId === id) &&
        'no pending interaction for its human-input pause',
      [...events.teams].some((team) => team !== r.teamId) && "events of another team's id",
    ].filter(Boolean);
    if (bad.length)
      problems.push(
        `run ${id}: ${bad.map((b) => (String(b).includes(' ') ? b : `bad ${String(b)}`)).join(', ')}`,
      );
  }
  for (const runId of eventsOf.keys()) if (!runs.has(runId)) problems.push(`events of missing run ${runId}`);
  for (const i of interactions.values()) {
    if (runs.get(String(i.runId)) !== i.teamId)
      problems.push(`interaction ${String(i._id)}: of missing run ${String(i.runId)} or of another team`);
  }
  for await (const s of db.collection('push_subscriptions').find({})) {
    if (
      !isText(s.endpoint) ||
      !isText(get(s.keys, 'p256dh')) ||
      !isText(get(s.keys, 'auth')) ||
      !isText(s.userId) ||
      !isText(s.teamId) ||
      !isDate(s.createdAt) ||
      !isDate(s.updatedAt)
    )
      problems.push(`push subscription ${String(s._id)}: bad shape`);
  }
  for await (const p of db.collection('notification_prefs').find({})) {
    const off: unknown = p.off ?? [];
    if (
      !isText(p.userId) ||
      !isText(p.teamId) ||
      String(p._id) !== prefKey(p.userId, p.teamId) ||
      (p.scope !== 'team' && p.scope !== 'own') ||
      !Array.isArray(off) ||
      off.some((kind) => !PREF_KINDS.includes(kind)) ||
      (p.scope === 'own' && !off.length) ||
      !isDate(p.updatedAt)
    )
      problems.push(`notification pref ${String(p._id)}: bad shape`);
  }
  for await (const w of db.collection('assistant_run_watches').find({})) {
    if (
      String(w._id) !== `${String(w.assistantId)}|${String(w.runId)}` ||
      typeof w.active !== 'boolean' ||
      !isText(w.teamId) ||
      !isDate(w.updatedAt)
    )
      problems.push(`watch ${String(w._id)}: bad shape`);
    if (runs.get(String(w.runId)) !== w.teamId)
      problems.push(`watch ${String(w._id)}: of missing run ${String(w.runId)} or of another team`);
  }
  return problems;
}
