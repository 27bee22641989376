// Turning a symbolic case into the request it stands for: real ids for the params, a token for the auth choice,
// the body's text with its edits and lazy values spliced in.
import { subscriptionId } from '../../store/push/subscriptions';
import { signToken } from '../support/tokens';
import { isPlainObject } from './check';
import { INTRUDER, type Fixtures, type RunFixture } from './fixtures';
import { paramNames, segmentText } from './generators';
import type {
  AuthChoice,
  BodyChoice,
  BodyOp,
  FuzzCase,
  Lazy,
  ResolvedRequest,
  RouteSpec,
  RunState,
  Value,
} from './spec';

function b64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

async function authHeader(choice: AuthChoice, tokens: Fixtures['tokens']): Promise<string | undefined> {
  const claims = { team: 'fuzz-team' };
  const now = Math.floor(Date.now() / 1000);
  const sign = (payload: Record<string, unknown>, secret = tokens.secret) => signToken(payload, secret);
  switch (choice.k) {
    case 'valid':
      return [
        `Bearer ${tokens.owner}`,
        `bearer ${tokens.owner}`,
        `BEARER   ${tokens.owner}`,
        `Bearer\t${tokens.owner}`,
      ][choice.style % 4];
    case 'otherTeam':
      return `Bearer ${tokens.intruder}`;
    case 'none':
      return undefined;
    case 'garbage':
      return choice.value;
    case 'flawed': {
      const token = await ((): Promise<string> | string => {
        switch (choice.flaw) {
          case 'wrongSecret':
            return sign({ ...claims, sub: 'fuzz-user' }, 'not-the-secret');
          case 'expired':
            return sign({ ...claims, sub: 'fuzz-user', exp: now - 60 });
          case 'notYetValid':
            return sign({ ...claims, sub: 'fuzz-user', nbf: now + 3600 });
          case 'noTeam':
            return sign({ sub: 'fuzz-user' });
          case 'noSub':
            return sign(claims);
          case 'emptyTeam':
            return sign({ team: '', sub: 'fuzz-user' });
          case 'numericTeam':
            return sign({ team: 42, sub: 7 });
          case 'algNone':
            return `${b64url({ alg: 'none', typ: 'JWT' })}.${b64url({ ...claims, sub: 'fuzz-user' })}.`;
          case 'hs512':
            return signToken({ ...claims, sub: 'fuzz-user' }, tokens.secret, 'HS512');
          case 'noExp':
            return sign({ ...claims, sub: 'fuzz-user' });
          case 'tooLong':
            return sign({ ...claims, sub: 'fuzz-user', exp: now + 30 * 24 * 3600 });
          case 'futureIat': {
            const iat = now + 3600;
            return sign({ ...claims, sub: 'fuzz-user', iat, exp: iat + 600 });
          }
          case 'tampered': {
            const [header, , signature] = tokens.owner.split('.');
            return `${header}.${b64url({ team: 'other-team', sub: 'fuzz-user' })}.${signature}`;
          }
          case 'truncated':
            return tokens.owner.slice(0, -3);
          case 'basicScheme':
          case 'noScheme':
          case 'twoTokens':
            return tokens.owner;
        }
      })();
      if (choice.flaw === 'basicScheme') return `Basic ${token}`;
      if (choice.flaw === 'noScheme') return token;
      if (choice.flaw === 'twoTokens') return `Bearer ${token} ${token}`;
      return `Bearer ${token}`;
    }
  }
}

function lazyText(lazy: Lazy): string {
  switch (lazy.lazy) {
    case 'huge': {
      const unit = JSON.stringify(lazy.char).slice(1, -1);
      return `"${unit.repeat(Math.ceil(lazy.bytes / Buffer.byteLength(unit)))}"`;
    }
    case 'deep':
      return lazy.shape === 'array'
        ? '['.repeat(lazy.depth) + ']'.repeat(lazy.depth)
        : '{"a":'.repeat(lazy.depth) + '0' + '}'.repeat(lazy.depth);
    case 'many':
      return `[${Array.from({ length: lazy.count }, (_, i) => `"ISS-${i}"`).join(',')}]`;
    case 'wide':
      return `{${Array.from({ length: lazy.count }, (_, i) => `"k${i}":${i}`).join(',')}}`;
    case 'raw':
      return lazy.text;
  }
}

type JsonPath = (string | number)[];

/** Every path into a JSON value (objects and arrays), parents before children. */
function pathsOf(value: unknown, prefix: JsonPath = []): JsonPath[] {
  if (typeof value !== 'object' || value === null) return [];
  const keys: (string | number)[] = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
  return keys.flatMap((key) => {
    const path = [...prefix, key];
    return [path, ...pathsOf((value as Record<string | number, unknown>)[key], path)];
  });
}

function parentOf(root: unknown, path: JsonPath): Record<string | number, unknown> | undefined {
  let node = root;
  for (const key of path.slice(0, -1)) {
    if (typeof node !== 'object' || node === null) return undefined;
    node = (node as Record<string | number, unknown>)[key];
  }
  return typeof node === 'object' && node !== null ? (node as Record<string | number, unknown>) : undefined;
}

/** Own data property, even for "__proto__" (an assignment would set the prototype instead). */
function define(target: Record<string | number, unknown>, key: string | number, v: unknown): void {
  Object.defineProperty(target, key, { value: v, enumerable: true, writable: true, configurable: true });
}

/** A valid body with the case's edits applied, serialised; lazy values are spliced in as text. */
function editedBody(valid: Record<string, unknown>, ops: BodyOp[]): string {
  const body = JSON.parse(JSON.stringify(valid)) as Record<string, unknown>;
  const splices: string[] = [];
  const put = (v: Value): unknown => {
    // A copy: generated values (and constants) are shared between cases, and later edits may write into them.
    if ('v' in v) return structuredClone(v.v);
    splices.push(lazyText(v));
    return `@@fuzz-lazy-${splices.length - 1}@@`;
  };
  for (const op of ops) {
    const paths = pathsOf(body);
    if (op.op === 'extra') {
      const objects: JsonPath[] = [[], ...paths.filter((p) => isPlainObject(valueAt(body, p)))];
      const at = objects[op.pick % objects.length];
      const target = at.length ? (valueAt(body, at) as Record<string, unknown>) : body;
      define(target, op.key, put(op.value));
      continue;
    }
    if (!paths.length) {
      if (op.op === 'set') define(body, 'x', put(op.value));
      continue;
    }
    const path = paths[op.pick % paths.length];
    const parent = parentOf(body, path);
    if (!parent) continue;
    const key = path[path.length - 1];
    if (op.op === 'drop') {
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
    } else define(parent, key, put(op.value));
  }
  let text = JSON.stringify(body);
  splices.forEach((splice, i) => {
    text = text.replace(`"@@fuzz-lazy-${i}@@"`, () => splice);
  });
  return text;
}

function valueAt(root: unknown, path: JsonPath): unknown {
  let node = root;
  for (const key of path) node = (node as Record<string | number, unknown>)[key];
  return node;
}

function bodyText(choice: BodyChoice, valid: () => Record<string, unknown>): string | Uint8Array | undefined {
  switch (choice.k) {
    case 'none':
      return undefined;
    case 'valid':
      return editedBody(valid(), choice.ops);
    case 'truncated': {
      const text = JSON.stringify(valid());
      return text.slice(0, Math.min(choice.keep, text.length - 1));
    }
    case 'json':
      return JSON.stringify(choice.value) ?? 'null';
    case 'text':
      return choice.text;
    case 'bytes':
      return choice.bytes;
    case 'lazy':
      return lazyText(choice.value);
  }
}

export async function resolve(route: RouteSpec, c: FuzzCase, fx: Fixtures): Promise<ResolvedRequest> {
  const runTeams: string[] = [];
  const runIds: string[] = [];
  const runStates: RunState[] = [];
  const devices: ResolvedRequest['devices'] = [];
  let wellFormed = true;
  let named: RunFixture | undefined;
  const segments: Record<string, string> = {};
  // Runs first: the interaction and episode params are "of the run" named in the same path.
  const later = (name: string) => Number(name === 'iid' || route.paramKinds?.[name] === 'episode');
  const names = paramNames(route.template).sort((a, b) => later(a) - later(b));
  for (const name of names) {
    const choice = c.params[name];
    if (choice.k === 'raw') {
      wellFormed = false;
      segments[name] = segmentText(choice);
    } else if (choice.k === 'device') {
      const device = choice.whose === 'own' ? await fx.ownDevice() : await fx.foreignDevice(choice.whose);
      devices.push({ whose: choice.whose, owner: device.owner, endpoint: device.endpoint });
      segments[name] = subscriptionId(device.endpoint);
    } else if (choice.k === 'episode') {
      const run = choice.of === 'run' ? named : await fx.otherTeamRun();
      segments[name] = `${run?.runId ?? 'run_ffffffffffffffffffffffffffffffff'}:end`;
    } else if (choice.k === 'missing' && route.paramKinds?.[name]) {
      segments[name] =
        route.paramKinds[name] === 'device' ? '0'.repeat(64) : 'run_00000000000000000000000000000000:end';
    } else if (choice.k === 'own' || choice.k === 'otherTeam') {
      named = choice.k === 'own' ? await fx.run(choice.state) : await fx.otherTeamRun();
      runTeams.push(named.teamId);
      runIds.push(named.runId);
      if (choice.k === 'own') runStates.push(choice.state);
      segments[name] = named.runId;
    } else if (choice.k === 'missing') {
      segments[name] =
        name === 'iid' ? 'int_00000000000000000000000000000000' : 'run_00000000000000000000000000000000';
    } else if (choice.k === 'ok') {
      segments[name] = choice.id;
    } else if (choice.k === 'ofRun') {
      segments[name] = named?.interactionId ?? 'int_ffffffffffffffffffffffffffffffff';
    } else {
      const other = await fx.otherTeamRun();
      segments[name] = other.interactionId ?? 'int_eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee';
    }
  }
  const path =
    (c.path ?? route.template.replace(/:(\w+)/g, (_, name: string) => segments[name])) + (c.query ?? '');
  const headers: Record<string, string> = {};
  const auth = await authHeader(c.auth, fx.tokens);
  if (auth !== undefined) headers.authorization = auth;
  for (const [name, v] of c.headers) headers[name] = v;
  let body: string | Uint8Array | undefined;
  if (c.method !== 'GET' && c.method !== 'HEAD') {
    body = bodyText(c.body, () =>
      route.valid ? route.valid(fx, c.body.k === 'valid' ? c.body.variant : 0) : {},
    );
    if (body !== undefined && c.contentType !== null) headers['content-type'] = c.contentType;
  }
  const callerTeam = c.auth.k === 'valid' ? 'fuzz-team' : c.auth.k === 'otherTeam' ? 'other-team' : undefined;
  const callerUser = c.auth.k === 'valid' ? fx.user : c.auth.k === 'otherTeam' ? INTRUDER : undefined;
  return {
    method: c.method,
    path,
    headers,
    body,
    callerTeam,
    runTeams,
    runIds,
    runStates,
    wellFormed,
    callerUser,
    devices,
  };
}
