// GET /api/v1/openapi.json: the API as OpenAPI 3.1, made from the routers themselves. Every route carries its
// RouteSpec on its validate() middleware, so the document lists exactly the routes that exist, with the schemas
// that are enforced (zod 4's JSON Schema output is draft 2020-12, OpenAPI 3.1's dialect).
import Router from '@koa/router';
import { z } from 'zod';
import { CALLBACK_EVENT_SCHEMAS, type CallbackEventType } from '../domain/callbackEvents';
import { TEAM_EVENT_SCHEMAS } from '../domain/teamEventSchemas';
import type { TeamEventType } from '../domain/teamEvents';
import { validate, type RouteSpec } from '../platform/http/validate';

export const OPENAPI_PATH = '/api/v1/openapi.json';
/** The version of this document's API (the /api/v1 surface), not of the package. */
const API_VERSION = '1.0.0';

export interface DocumentedRoute {
  method: string;
  /** The router's path, e.g. /api/v1/runs/:id */
  path: string;
  spec?: RouteSpec;
}

/** Every method and path the routers answer, with the spec of its validate() middleware when it has one. */
export function documentedRoutes(routers: Router[]): DocumentedRoute[] {
  return routers.flatMap((router) =>
    router.stack.flatMap((layer) => {
      const spec = layer.stack.map((mw) => (mw as { spec?: RouteSpec }).spec).find(Boolean);
      return layer.methods
        .filter((method) => method !== 'HEAD')
        .map((method) => ({ method, path: String(layer.path), spec }));
    }),
  );
}

const jsonSchema = (schema: z.ZodType): Record<string, unknown> => {
  const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' });
  return rest;
};

/**
 * Each callback event type's body as JSON Schema. Published open (a field may be added within a version, so a
 * receiver should not refuse one it does not know); `closed`: every object refuses fields it does not document,
 * which is what the tests check the bodies sent against.
 */
export function callbackEventJsonSchemas(
  options: { closed?: boolean } = {},
): Record<CallbackEventType, Record<string, unknown>> {
  return eventJsonSchemas(CALLBACK_EVENT_SCHEMAS, options);
}

/** Each team endpoint event type's body as JSON Schema, open or `closed` as callbackEventJsonSchemas. */
export function teamEventJsonSchemas(
  options: { closed?: boolean } = {},
): Record<TeamEventType, Record<string, unknown>> {
  return eventJsonSchemas(TEAM_EVENT_SCHEMAS, options);
}

function eventJsonSchemas<T extends string>(
  schemas: Record<T, z.ZodType>,
  options: { closed?: boolean },
): Record<T, Record<string, unknown>> {
  const io = options.closed ? 'output' : 'input'; // zod closes objects (additionalProperties: false) on output
  return Object.fromEntries(
    Object.entries<z.ZodType>(schemas).map(([type, schema]): [string, Record<string, unknown>] => {
      const { $schema: _dialect, ...rest } = z.toJSONSchema(schema, { io });
      return [type, rest];
    }),
  ) as Record<T, Record<string, unknown>>;
}

/** The Standard Webhooks headers every callback and team event carries; `id` says what webhook-id is. */
const webhookHeaders = (id: string) =>
  [
    ['webhook-id', `${id}, the same on every attempt: dedupe on it`],
    ['webhook-timestamp', "this attempt's time, in Unix seconds (signed; refuse one too far from now)"],
    [
      'webhook-signature',
      'v1,<base64 HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>"> with the secret, one per secret ' +
        'space-separated (two during a rotation overlap): a receiver holding either secret verifies',
    ],
  ] as const;

const webhook = (name: string, schema: Record<string, unknown>, id: string, test: string) => ({
  post: {
    summary: `${name}: ${String(schema.description)}`,
    parameters: webhookHeaders(id).map(([header, description]) => ({
      name: header,
      in: 'header',
      required: true,
      description,
      schema: { type: 'string' },
    })),
    requestBody: { required: true, content: { 'application/json': { schema } } },
    responses: {
      '2XX': {
        description:
          'received. 408, 429, 5xx, 3xx (never followed) and network errors are tried again on the ' +
          `schedule (Retry-After honoured); any other 4xx ends the delivery. ${test} is never retried.`,
      },
    },
    // The receiver's side: it authenticates the sender by the signature, not by this API's bearer.
    security: [],
  },
});

/**
 * OpenAPI 3.1 `webhooks`: what this service POSTs to a run's callback URL (named by event type) and to a team's
 * endpoints (named `endpoint <type>`), one entry per event type.
 */
function webhooks(): Record<string, unknown> {
  return Object.fromEntries([
    ...Object.entries(callbackEventJsonSchemas()).map(([type, schema]) => [
      type,
      webhook(type, schema, 'the episode id (a test ping: <runId>:test:<uuid>)', 'A test ping'),
    ]),
    ...Object.entries(teamEventJsonSchemas()).map(([type, schema]) => [
      `endpoint ${type}`,
      webhook(`endpoint ${type}`, schema, "the event's id (the body's id)", 'A test event'),
    ]),
  ]);
}

function parameters(spec: RouteSpec): unknown[] {
  const shapeOf = (schema?: z.ZodType) =>
    schema instanceof z.ZodObject ? (schema.shape as Record<string, z.ZodType>) : {};
  return [
    ...Object.entries(shapeOf(spec.params)).map(([name, schema]) => ({
      name,
      in: 'path',
      required: true,
      schema: jsonSchema(schema),
    })),
    ...Object.entries(shapeOf(spec.query)).map(([name, schema]) => ({
      name,
      in: 'query',
      required: !schema.safeParse(undefined).success,
      ...(schema.description ? { description: schema.description } : {}),
      schema: jsonSchema(schema),
    })),
  ];
}

/** The routers a document describes: those that answer without a bearer token, and those that ask for it. */
export interface DocumentedRouters {
  open: Router[];
  caller: Router[];
}

function operation(route: DocumentedRoute, open: boolean): Record<string, unknown> {
  const spec = route.spec;
  const success = String(spec?.success ?? 200);
  return {
    summary: spec?.summary,
    ...(spec?.params || spec?.query ? { parameters: parameters(spec) } : {}),
    ...(spec?.body
      ? {
          requestBody: {
            required: true,
            content: {
              'application/json': {
                schema: jsonSchema(spec.body),
                ...(spec.examples?.length
                  ? {
                      examples: Object.fromEntries(
                        spec.examples.map((value, i) => [`example${i + 1}`, { value }]),
                      ),
                    }
                  : {}),
              },
            },
          },
        }
      : {}),
    ...(open ? { security: [] } : {}),
    responses: {
      [success]: { description: success === '204' ? 'done, no body' : 'done' },
      default: {
        description:
          'an error: 400 invalid input, 401 no or bad token, 404 unknown, 409 conflict, 429 over a limit',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      },
    },
  };
}

export function openApiDocument({ open, caller }: DocumentedRouters): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [routers, isOpen] of [
    [open, true],
    [caller, false],
  ] as const) {
    for (const route of documentedRoutes(routers)) {
      const path = route.path.replace(/:(\w+)/g, '{$1}');
      (paths[path] ??= {})[route.method.toLowerCase()] = operation(route, isOpen);
    }
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Flow Notify', version: API_VERSION },
    paths,
    webhooks: webhooks(),
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: {
        Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
      },
    },
  };
}

/** Serves the document, made once from the routers it describes (and itself, which needs no token). */
export function openApiRouter(routers: DocumentedRouters): Router {
  const router = new Router();
  let document: Record<string, unknown> | undefined;
  router.get(OPENAPI_PATH, validate({ summary: 'this API as OpenAPI 3.1' }), (ctx) => {
    document ??= openApiDocument({ ...routers, open: [...routers.open, router] });
    ctx.body = document;
  });
  return router;
}
