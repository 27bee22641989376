// The fast-check generators of the route fuzzer: one route's cases (caseArbitrary), nearly valid or wild on every
// dimension at once, all symbolic (see spec.ts) so fast-check shrinks and prints them compactly.
import fc from 'fast-check';
import {
  RUN_STATES,
  type AssistantRef,
  type AuthChoice,
  type BodyChoice,
  type BodyOp,
  type DeviceRef,
  type EpisodeRef,
  type FuzzCase,
  type InteractionRef,
  type Lazy,
  type ParamChoice,
  type RawSegment,
  type RouteSpec,
  type RunRef,
  type TokenFlaw,
  type Value,
} from './spec';

const BODY_LIMIT = 1024 * 1024; // api/app.ts: jsonLimit '1mb'

const HEADER_CHAR = fc
  .integer({ min: 0x20, max: 0xff })
  .filter((c) => c !== 0x7f)
  .map((c) => String.fromCharCode(c));
const headerText = (maxLength: number) =>
  fc.string({ unit: HEADER_CHAR, minLength: 1, maxLength }).map((s) => s.trim() || 'x');

const badSegment: fc.Arbitrary<RawSegment> = fc
  .tuple(
    fc.oneof(
      {
        weight: 3,
        arbitrary: fc.constantFrom('', '.', '..', '...', 'a..b', '%', '%zz', '%E0%A4%A', '%00', '%2F'),
      },
      {
        weight: 3,
        arbitrary: fc.constantFrom(
          'a/b',
          'a%2Fb',
          '%2e%2e',
          '..%2f..%2fetc%2fpasswd',
          ' ',
          'a b',
          '?',
          '#',
          ';',
          '\\',
          "'",
          '"',
          '<script>',
          '{"$gt":""}',
          '$where',
          '__proto__',
          'constructor',
          'run_x|y',
          '*',
          '~',
          'run_00000000000000000000000000000000',
        ),
      },
      { weight: 2, arbitrary: fc.string({ unit: 'binary', minLength: 1, maxLength: 24 }) },
      { weight: 2, arbitrary: fc.string({ unit: 'grapheme', minLength: 1, maxLength: 24 }) },
      { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9_.:-]{1,40}$/) },
      {
        weight: 1,
        arbitrary: fc.constantFrom(128, 129, 2_000, 10_000).map((n) => 'a'.repeat(n)),
      },
    ),
    fc.boolean(),
  )
  .map(([text, encode]) => ({ k: 'raw' as const, text, encode }));

/** In wild cases a run is in any state (the route's own state as often as any): most answers are a 409. */
const runRef: fc.Arbitrary<RunRef> = fc.oneof(
  { withCrossShrink: true },
  {
    weight: 6,
    arbitrary: fc.constantFrom(...RUN_STATES).map((state) => ({ k: 'own' as const, state })),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'otherTeam' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 3, arbitrary: badSegment },
);

const interactionRef: fc.Arbitrary<InteractionRef> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant({ k: 'ofRun' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'otherRun' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 2, arbitrary: badSegment },
);

const assistantRef: fc.Arbitrary<AssistantRef> = fc.oneof(
  { withCrossShrink: true },
  {
    weight: 4,
    arbitrary: fc.stringMatching(/^[A-Za-z0-9_:-]{1,24}$/).map((id) => ({ k: 'ok' as const, id })),
  },
  { weight: 2, arbitrary: badSegment },
);

const deviceRef: fc.Arbitrary<DeviceRef> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant({ k: 'device' as const, whose: 'own' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'device' as const, whose: 'teammate' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'device' as const, whose: 'otherTeam' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 2, arbitrary: badSegment },
);

const episodeRef: fc.Arbitrary<EpisodeRef> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant({ k: 'episode' as const, of: 'run' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'episode' as const, of: 'otherRun' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'missing' as const }) },
  { weight: 2, arbitrary: badSegment },
);

const TOKEN_FLAWS: TokenFlaw[] = [
  'wrongSecret',
  'expired',
  'notYetValid',
  'noTeam',
  'noSub',
  'emptyTeam',
  'numericTeam',
  'algNone',
  'hs512',
  'noExp',
  'tooLong',
  'futureIat',
  'tampered',
  'truncated',
  'basicScheme',
  'noScheme',
  'twoTokens',
];
const authChoice: fc.Arbitrary<AuthChoice> = fc.oneof(
  { withCrossShrink: true },
  { weight: 12, arbitrary: fc.nat(3).map((style) => ({ k: 'valid' as const, style })) },
  { weight: 2, arbitrary: fc.constant({ k: 'otherTeam' as const }) },
  { weight: 1, arbitrary: fc.constant({ k: 'none' as const }) },
  { weight: 2, arbitrary: fc.constantFrom(...TOKEN_FLAWS).map((flaw) => ({ k: 'flawed' as const, flaw })) },
  {
    weight: 2,
    arbitrary: fc
      .oneof(
        headerText(64),
        headerText(64).map((s) => `Bearer ${s}`),
        fc.constantFrom(
          'Bearer',
          'Bearer ',
          'Bearer null',
          'Bearer undefined',
          'Bearer a.b.c',
          'Bearer eyJhbGciOiJIUzI1NiJ9..',
          'Bearer ' + 'A'.repeat(4_000),
          'Bearer a b',
          'Bearer\u00e9\u00e9',
        ),
      )
      .map((value) => ({ k: 'garbage' as const, value })),
  },
);

const RAW_NUMBERS = ['1e999', '-1e999', '1E400', '-0', '-0.0', '1e-400', '123456789012345678901234567890'];
const HUGE_BYTES = [
  129,
  501,
  2_049,
  10_001,
  64_001,
  100_001,
  1_000_001,
  BODY_LIMIT - 64,
  BODY_LIMIT + 1,
  1_500_000,
];
const lazyValue: fc.Arbitrary<Lazy> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      lazy: fc.constant('huge' as const),
      bytes: fc.constantFrom(...HUGE_BYTES),
      char: fc.constantFrom('a', 'é', '😀', '\\', '"', '\u0000', '\ud800', '\u2028'),
    }),
  },
  {
    weight: 3,
    arbitrary: fc.record({
      lazy: fc.constant('deep' as const),
      depth: fc.constantFrom(2, 99, 100, 101, 180, 181, 1_000, 5_000, 100_000),
      shape: fc.constantFrom('array' as const, 'object' as const),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ lazy: fc.constant('many' as const), count: fc.constantFrom(101, 1_000, 100_000) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ lazy: fc.constant('wide' as const), count: fc.constantFrom(1_000, 50_000) }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ lazy: fc.constant('raw' as const), text: fc.constantFrom(...RAW_NUMBERS) }),
  },
);

const WRONG_TYPES: unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  1e308,
  Number.MAX_SAFE_INTEGER + 2,
  '',
  ' ',
  '0',
  'null',
  [],
  {},
  [null],
  [[]],
  [[1, 2]],
  [{}],
  { $gt: '' },
  { $where: 'sleep(1000)' },
  { 'a.b': 1 },
  { _id: 'x' },
  { '': 1 },
  'x'.repeat(129),
  '\u0000',
  '\ud800',
  '\udfff\ud800',
  '💥',
  'é',
  '\u202e',
];
const jsonish = fc.jsonValue({ maxDepth: 3 });
/** Valid JSON a document store may refuse: operator and dotted keys, NUL in keys, nested arrays, ±Infinity. */
const storeHostile: fc.Arbitrary<Value> = fc.oneof(
  fc
    .constantFrom<unknown>(
      { $set: { x: 1 } },
      { 'a.b': 1 },
      { 'a\u0000b': 1 },
      [[]],
      [1, [2]],
      { a: [{ b: [[3]] }] },
      { _id: { $oid: 'x' } },
    )
    .map((v) => ({ v })),
  fc
    .constantFrom('1e999', '-1e999', '{"x":1e999}', '[1e400]')
    .map((text) => ({ lazy: 'raw' as const, text })),
);

const value: fc.Arbitrary<Value> = fc.oneof(
  { withCrossShrink: true },
  { weight: 3, arbitrary: fc.constantFrom(...WRONG_TYPES).map((v) => ({ v })) },
  { weight: 3, arbitrary: storeHostile },
  { weight: 3, arbitrary: jsonish.map((v) => ({ v })) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 64 }).map((v) => ({ v })) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 64 }).map((v) => ({ v })) },
  { weight: 3, arbitrary: lazyValue },
);

const extraKey = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'extra',
      '$where',
      '$set',
      'a.b',
      '.',
      '__proto__',
      'constructor',
      'prototype',
      '_id',
      '',
      '\u0000',
      'type',
      'spent',
      'id',
      'teamId',
      'ownerId',
      'status',
      'toString',
      'x'.repeat(1_000),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 16 }) },
);

const bodyOp: fc.Arbitrary<BodyOp> = fc.oneof(
  { weight: 1, arbitrary: fc.record({ op: fc.constant('drop' as const), pick: fc.nat(20) }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('set' as const), pick: fc.nat(20), value }) },
  {
    weight: 3,
    arbitrary: fc.record({ op: fc.constant('extra' as const), pick: fc.nat(20), key: extraKey, value }),
  },
);

const INVALID_JSON = [
  '{',
  '}',
  '[',
  '{"',
  '{"a":',
  '{"a":1,}',
  '[1,]',
  "{'a':1}",
  '{a:1}',
  'NaN',
  'Infinity',
  'undefined',
  'nul',
  'tru',
  '\uFEFF{}',
  '{}{}',
  '{"a":1}{"b":2}',
  '{"a":"\\x41"}',
  '{"a":"\\u12"}',
  '"\\ud800"',
  '{"a":01}',
  '{"a":.5}',
  '{"a":+1}',
  '/* c */ {}',
  '{"a":1} // c',
  'null',
  'true',
  '0',
  '"x"',
  '[]',
  '{"a":"\u2028"}',
  '\u0000',
  ' ',
  '',
  '\t\n{}\n',
  '{"__proto__":{"polluted":1}}',
  '{"constructor":{"prototype":{"polluted":1}}}',
  '{"a":1,"a":2}',
];

const bodyChoice: fc.Arbitrary<BodyChoice> = fc.oneof(
  { withCrossShrink: true },
  {
    weight: 12,
    arbitrary: fc.record({
      k: fc.constant('valid' as const),
      variant: fc.nat(7),
      ops: fc.oneof(
        { withCrossShrink: true },
        { weight: 1, arbitrary: fc.constant<BodyOp[]>([]) },
        { weight: 2, arbitrary: fc.array(bodyOp, { minLength: 1, maxLength: 3 }) },
      ),
    }),
  },
  { weight: 1, arbitrary: fc.constant({ k: 'none' as const }) },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('truncated' as const), variant: fc.nat(7), keep: fc.nat(200) }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('json' as const), value: jsonish }) },
  {
    weight: 1,
    arbitrary: fc.record({
      k: fc.constant('json' as const),
      value: fc.dictionary(extraKey, jsonish, { maxKeys: 5 }),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('json' as const), value: fc.anything({ maxDepth: 3 }) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      k: fc.constant('text' as const),
      text: fc.oneof(fc.constantFrom(...INVALID_JSON), fc.string({ unit: 'binary', maxLength: 200 })),
    }),
  },
  {
    weight: 1,
    arbitrary: fc.record({ k: fc.constant('bytes' as const), bytes: fc.uint8Array({ maxLength: 64 }) }),
  },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('lazy' as const), value: lazyValue }) },
);

const contentType: fc.Arbitrary<string | null> = fc.oneof(
  { withCrossShrink: true },
  { weight: 12, arbitrary: fc.constant('application/json') },
  { weight: 1, arbitrary: fc.constant(null) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'text/plain',
      'text/plain; charset=utf-8',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=xyz',
      'application/json; charset=utf-16',
      'application/json; charset=latin1',
      'application/json; charset=bogus',
      'application/merge-patch+json',
      'application/vnd.api+json',
      'application/csp-report',
      'application/xml',
      'application/octet-stream',
      '*/*',
      'json',
      'application/',
    ),
  },
  { weight: 1, arbitrary: headerText(40) },
);

const extraHeaders: fc.Arbitrary<[string, string][]> = fc.oneof(
  { withCrossShrink: true },
  { weight: 6, arbitrary: fc.constant<[string, string][]>([]) },
  {
    weight: 1,
    arbitrary: fc.array(
      fc.oneof(
        fc.tuple(
          fc.constant('content-encoding'),
          fc.constantFrom('gzip', 'deflate', 'br', 'identity', 'bogus', 'gzip, gzip', 'zstd'),
        ),
        fc.tuple(fc.constant('accept'), fc.constantFrom('text/html', 'application/xml', '*/*', 'image/png')),
        fc.tuple(fc.constant('accept-charset'), fc.constantFrom('utf-16', 'iso-8859-1', 'bogus')),
        fc.tuple(fc.constant('x-http-method-override'), fc.constantFrom('DELETE', 'PUT', 'GET')),
        fc.tuple(fc.constant('x-forwarded-for'), headerText(40)),
        fc.tuple(fc.constant('cookie'), headerText(40)),
        fc.tuple(fc.constant('origin'), fc.constantFrom('https://evil.example', 'null')),
        fc.tuple(
          headerText(20).map((s) => `x-${s.replace(/[^a-z0-9-]/gi, '') || 'fuzz'}`),
          headerText(40),
        ),
      ),
      { minLength: 1, maxLength: 3 },
    ),
  },
);

const querySuffix: fc.Arbitrary<string | null> = fc.oneof(
  { withCrossShrink: true },
  { weight: 8, arbitrary: fc.constant(null) },
  {
    weight: 1,
    arbitrary: fc.oneof(
      fc.constantFrom(
        '?',
        '?a',
        '?a=1&a=2',
        '?__proto__[x]=1',
        '?%zz',
        '?limit=-1',
        '?x=' + 'y'.repeat(2_000),
      ),
      fc.string({ unit: 'binary', maxLength: 30 }).map((s) => `?q=${encodeURIComponent(s)}`),
      // The paged listings' own parameters: any limit, and cursors that are or look like one.
      fc.string({ unit: 'binary', maxLength: 12 }).map((s) => `?limit=${encodeURIComponent(s)}`),
      fc
        .tuple(fc.oneof(fc.integer(), fc.double(), fc.string()), fc.oneof(fc.string(), fc.integer()))
        .map((pair) => `?before=${Buffer.from(JSON.stringify(pair)).toString('base64url')}`),
      fc.string({ unit: 'binary', maxLength: 40 }).map((s) => `?limit=2&before=${encodeURIComponent(s)}`),
    ),
  },
);

const OTHER_METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];
const methodFor = (method: string): fc.Arbitrary<string> =>
  fc.oneof(
    { withCrossShrink: true },
    { weight: 10, arbitrary: fc.constant(method) },
    { weight: 2, arbitrary: fc.constantFrom(...OTHER_METHODS) },
    { weight: 1, arbitrary: fc.constantFrom('PROPFIND', 'PURGE', 'SEARCH', 'MKCOL') },
  );

const unknownPath: fc.Arbitrary<string> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      '/',
      '/api',
      '/api/',
      '/api/v1',
      '/api/v1/',
      '/api/v1/nope',
      '/api/v2/runs',
      '/API/V1/RUNS',
      '/api/v1/runs/',
      '//api/v1/runs',
      '/api/v1/runs/x/y/z',
      '/api/v1/notifications',
      '/api/v1/notifications/push',
      '/api/v1/assistants/a/watches',
      '/index.html',
      '/sw.js',
      '/runs/abc',
      '/healthz/',
      '/healthz/x',
      '/favicon.ico',
      '/..%2f..%2f..%2fetc%2fpasswd',
      '/%2e%2e/%2e%2e/etc/passwd',
      '/%',
      '/%zz',
      '/%E0%A4%A',
      '/%00',
      '/api/%zz',
      '/api/v1/runs/%',
    ),
  },
  {
    weight: 3,
    arbitrary: fc
      .array(badSegment, { minLength: 1, maxLength: 5 })
      .map((segs) => `/api/v1/${segs.map(segmentText).join('/')}`),
  },
  {
    weight: 2,
    arbitrary: fc
      .array(badSegment, { minLength: 1, maxLength: 5 })
      .map((segs) => `/${segs.map(segmentText).join('/')}`),
  },
  { weight: 1, arbitrary: fc.constantFrom(`/api/v1/${'x'.repeat(10_000)}`, `/${'a/'.repeat(2_000)}`) },
);

export function caseArbitrary(route: RouteSpec): fc.Arbitrary<FuzzCase> {
  const params: Record<string, fc.Arbitrary<ParamChoice>> = {};
  const realParams: Record<string, fc.Arbitrary<ParamChoice>> = {};
  for (const name of paramNames(route.template)) {
    const kind = route.paramKinds?.[name];
    if (kind) {
      params[name] = kind === 'device' ? deviceRef : episodeRef;
      realParams[name] =
        kind === 'device'
          ? fc.constant({ k: 'device' as const, whose: 'own' as const })
          : fc.constant({ k: 'episode' as const, of: 'run' as const });
      continue;
    }
    params[name] = name === 'iid' ? interactionRef : name === 'assistantId' ? assistantRef : runRef;
    realParams[name] =
      name === 'iid'
        ? fc.constant({ k: 'ofRun' as const })
        : name === 'assistantId'
          ? fc.stringMatching(/^[A-Za-z0-9_:-]{1,24}$/).map((id) => ({ k: 'ok' as const, id }))
          : fc
              .constantFrom(...(route.preferred ?? RUN_STATES))
              .map((state) => ({ k: 'own' as const, state }));
  }
  // Anything goes, on every dimension at once.
  const wild = fc.record({
    method: route.template ? methodFor(route.method) : fc.constantFrom(...OTHER_METHODS, 'PROPFIND'),
    params: fc.record(params),
    path: route.template ? fc.constant(undefined) : unknownPath,
    query: querySuffix,
    auth: authChoice,
    body: bodyChoice,
    contentType,
    headers: extraHeaders,
  });
  // A well-formed request (the caller, the route's method, a real resource in the state the route acts on)
  // whose body is valid or up to two edits off: these get past the edge and exercise the writes.
  const nearlyValid = fc.record({
    method: route.template ? fc.constant(route.method) : fc.constantFrom(...OTHER_METHODS),
    params: fc.record(realParams),
    path: route.template ? fc.constant(undefined) : unknownPath,
    query: fc.constant(null),
    auth: fc.constant<AuthChoice>({ k: 'valid', style: 0 }),
    body: fc.record({
      k: fc.constant('valid' as const),
      variant: fc.nat(7),
      ops: fc.array(bodyOp, { maxLength: 2 }),
    }),
    contentType: fc.constant('application/json'),
    headers: fc.constant<[string, string][]>([]),
  });
  return fc.oneof(
    { withCrossShrink: true },
    { weight: 1, arbitrary: nearlyValid },
    { weight: 5, arbitrary: wild },
  ) as fc.Arbitrary<FuzzCase>;
}

export const paramNames = (template: string): string[] => [...template.matchAll(/:(\w+)/g)].map((m) => m[1]);
export const segmentText = (seg: RawSegment): string =>
  seg.encode ? encodeURIComponent(seg.text) : seg.text;
