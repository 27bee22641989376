// The OpenAPI document is made from the routers, so it cannot drift from them: every route the app answers is in
// it with a summary, and every request example it shows passes the schema that route enforces. No servers: the
// app is built with inert dependencies (nothing here calls a route that reaches them).
import assert from 'node:assert/strict';
import { TEAM_EVENT_TYPES } from '../../domain/teamEvents';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { documentedRoutes, OPENAPI_PATH } from '../../api/openapi';
import { callbackBody, testCallbackBody } from '../../domain/callback';
import { callbackSchemaMismatch } from '../support/callbackReceiver';
import { appWithEveryRoute, routersOf } from './everyRoute';
import { aRun, AT } from './fixtures';

describe('the OpenAPI document', () => {
  const app = appWithEveryRoute();
  let server: Server;
  let document: {
    openapi: string;
    paths: Record<string, Record<string, { summary?: string; requestBody?: unknown }>>;
    webhooks: Record<string, { post: Webhook }>;
  };
  type Webhook = {
    summary: string;
    parameters: Array<{ name: string; in: string; required: boolean }>;
    requestBody: { content: { 'application/json': { schema: Record<string, unknown> } } };
  };

  before(async () => {
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}${OPENAPI_PATH}`);
    assert.equal(res.status, 200, 'served without a token');
    document = (await res.json()) as typeof document;
  });
  after(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('is OpenAPI 3.1', () => {
    assert.equal(document.openapi, '3.1.0');
  });

  it('lists every route the app answers (but the catch-all), each with a summary', () => {
    const routes = documentedRoutes(routersOf(app)).filter((route) => route.path !== '/{*rest}');
    assert.ok(routes.length >= 20, `only ${routes.length} routes found`);
    for (const route of routes) {
      const documented = document.paths[route.path.replace(/:(\w+)/g, '{$1}')]?.[route.method.toLowerCase()];
      assert.ok(documented, `${route.method} ${route.path} is missing from the document`);
      assert.ok(documented.summary, `${route.method} ${route.path} has no summary`);
      assert.ok(route.spec, `${route.method} ${route.path} validates nothing through validate()`);
    }
  });

  it('every documented request example validates against the schema the route enforces', () => {
    let examples = 0;
    for (const { method, path, spec } of documentedRoutes(routersOf(app))) {
      for (const example of spec?.examples ?? []) {
        assert.ok(spec?.body, `${method} ${path} shows an example but takes no body`);
        const result = spec.body.safeParse(example);
        assert.ok(result.success, `${method} ${path}: ${JSON.stringify(example)} → ${result.error?.message}`);
        examples++;
      }
      if (spec?.body) assert.ok(spec.examples?.length, `${method} ${path} takes a body but shows no example`);
    }
    assert.ok(examples >= 10);
  });

  it('the routes that answer without a token say so; the others ask for the bearer', async () => {
    const open = Object.entries(document.paths)
      .filter(([, ops]) =>
        Object.values(ops).some((op) => Array.isArray((op as { security?: unknown }).security)),
      )
      .map(([path]) => path)
      .sort();
    assert.deepEqual(open, [
      '/api/v1/interactions/actions',
      '/api/v1/notifications/receipts',
      '/api/v1/openapi.json',
      '/healthz',
      '/readyz',
    ]);
    // What each says is what it does: asked without a token, only those that ask for the bearer answer 401.
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const [path, ops] of Object.entries(document.paths)) {
      for (const [method, op] of Object.entries(ops)) {
        const url = base + path.replace(/\{[^}]+\}/g, 'x');
        const body = ['post', 'put', 'patch'].includes(method) ? '{}' : undefined;
        const headers = body ? { 'content-type': 'application/json' } : undefined;
        const res = await fetch(url, { method: method.toUpperCase(), body, headers });
        const asksBearer = !Array.isArray((op as { security?: unknown }).security);
        assert.equal(
          res.status === 401,
          asksBearer,
          `${method.toUpperCase()} ${path} answered ${res.status}`,
        );
      }
    }
  });

  it('documents request bodies as JSON Schema, path parameters by name', () => {
    const pause = document.paths['/api/v1/runs/{id}/pause'].post as {
      parameters: Array<{ name: string; in: string }>;
      requestBody: { content: { 'application/json': { schema: { required?: string[] } } } };
    };
    assert.deepEqual(
      pause.parameters.map((p) => [p.name, p.in]),
      [['id', 'path']],
    );
    assert.deepEqual(pause.requestBody.content['application/json'].schema.required, ['prompt']);
  });

  it("documents the paged listings' query parameters, optional, with their bounds", () => {
    type Parameter = { name: string; in: string; required: boolean; schema: Record<string, unknown> };
    for (const path of [
      '/api/v1/runs',
      '/api/v1/runs/{id}/episodes',
      '/api/v1/notifications/push/subscriptions',
    ]) {
      const parameters = (document.paths[path].get as unknown as { parameters: Parameter[] }).parameters;
      const query = parameters.filter((p) => p.in === 'query');
      assert.deepEqual(
        query.map((p) => [p.name, p.required]),
        [
          ['limit', false],
          ['before', false],
        ],
        path,
      );
      assert.equal(query[0].schema.maximum, 200, path);
      assert.equal(query[0].schema.minimum, 1, path);
      assert.equal(query[1].schema.type, 'string', path);
    }
  });

  it('publishes every callback event type under webhooks: its body as JSON Schema and the signature headers', () => {
    assert.deepEqual(Object.keys(document.webhooks ?? {}).sort(), [
      ...TEAM_EVENT_TYPES.map((type) => `endpoint ${type}`).sort(),
      'interaction.escalated',
      'run.cancelled',
      'run.failed',
      'run.finished',
      'run.test',
    ]);
    for (const [type, { post }] of Object.entries(document.webhooks)) {
      const schema = post.requestBody.content['application/json'].schema as {
        properties: Record<string, { const?: string }>;
        required: string[];
      };
      assert.equal(schema.properties.type.const, type.replace(/^endpoint /, ''));
      assert.equal(schema.properties.version.const, '1');
      assert.ok(schema.required.includes('run'), type);
      assert.ok(post.summary.startsWith(`${type}: `), type);
      assert.deepEqual(
        post.parameters.map((p) => [p.name, p.in, p.required]),
        [
          ['webhook-id', 'header', true],
          ['webhook-timestamp', 'header', true],
          ['webhook-signature', 'header', true],
        ],
        type,
      );
    }
    const ended = document.webhooks['run.failed'].post.requestBody.content['application/json'].schema as {
      required: string[];
    };
    assert.deepEqual(ended.required, ['version', 'type', 'episodeId', 'run']);
  });

  it('the bodies the callback builders make match the published schema of their type', () => {
    const ended = { endedAt: new Date(AT.getTime() + 60_000) };
    const bodies = [
      callbackBody(aRun({ status: 'finished', finalAnswer: 'Deployed.', ...ended }), 'run_abc:end'),
      callbackBody(
        aRun({ status: 'failed', error: { code: 'oom', message: 'Out of memory' }, ...ended }),
        'e',
      ),
      callbackBody(aRun({ status: 'cancelled', ...ended }), 'run_abc:end'),
      testCallbackBody(aRun()),
      testCallbackBody(aRun({ status: 'paused' })),
    ];
    for (const body of bodies) assert.equal(callbackSchemaMismatch(JSON.stringify(body)), undefined);
    // A field the schema does not document, or a status the type does not have, is caught.
    const finished = callbackBody(aRun({ status: 'finished', ...ended }), 'e')!;
    assert.match(
      String(callbackSchemaMismatch(JSON.stringify({ ...finished, extra: 1 }))),
      /must NOT have additional properties/,
    );
    assert.match(
      String(
        callbackSchemaMismatch(JSON.stringify({ ...finished, run: { ...finished.run, status: 'failed' } })),
      ),
      /run\/status must be equal to constant/,
    );
  });
});
