// GET /api/v1/openapi.json: the API as OpenAPI 3.1, made from the routers themselves. Every route carries its
// RouteSpec on its validate() middleware, so the document lists exactly the routes that exist, with the schemas
// that are enforced (zod 4's JSON Schema output is draft 2020-12, OpenAPI 3.1's dialect).
import Router from '@koa/router';
import { z } from 'zod';
import { validate, type RouteSpec } from './validate';

export const OPENAPI_PATH = '/api/v1/openapi.json';
/** The version of this document's API (the /api/v1 surface), not of the package. */
const API_VERSION = '1.0.0';

/** Paths that answer without a bearer token. */
const PUBLIC = new Set(['/healthz', '/readyz', OPENAPI_PATH]);

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

function operation(route: DocumentedRoute): Record<string, unknown> {
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
    ...(PUBLIC.has(route.path) ? { security: [] } : {}),
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

export function openApiDocument(routers: Router[]): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of documentedRoutes(routers)) {
    const path = route.path.replace(/:(\w+)/g, '{$1}');
    (paths[path] ??= {})[route.method.toLowerCase()] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: { title: 'Flow Notify', version: API_VERSION },
    paths,
    security: [{ bearer: [] }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT' } },
      schemas: {
        Error: { type: 'object', required: ['error'], properties: { error: { type: 'string' } } },
      },
    },
  };
}

/** Serves the document, made once from the routers it describes (and itself). */
export function openApiRouter(routers: Router[]): Router {
  const router = new Router();
  let document: Record<string, unknown> | undefined;
  router.get(OPENAPI_PATH, validate({ summary: 'this API as OpenAPI 3.1' }), (ctx) => {
    document ??= openApiDocument([...routers, router]);
    ctx.body = document;
  });
  return router;
}
