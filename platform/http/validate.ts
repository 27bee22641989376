// One way to validate a request: each route names its zod schemas in a RouteSpec, and validate(spec) parses the
// path parameters and the body into a typed ctx.state.input before the handler runs. The same specs make the
// OpenAPI document (api/openapi.ts), so what is documented is what is enforced.
import type { Middleware, ParameterizedContext } from 'koa';
import { z } from 'zod';
import { HttpError, jsonBody } from './httpErrors';

export interface RouteSpec {
  summary: string;
  params?: z.ZodType;
  /** The query string (each parameter once: a repeated one is an array, which a string schema refuses). */
  query?: z.ZodType;
  body?: z.ZodType;
  /** Request bodies shown in the OpenAPI document; a test checks that each one validates. */
  examples?: unknown[];
  /** The status of a successful answer (200 unless said). */
  success?: number;
}

type Parsed<T> = T extends z.ZodType ? z.output<T> : undefined;

export interface Input<S extends RouteSpec> {
  params: S['params'] extends z.ZodType ? z.output<S['params']> : Record<string, string>;
  query: Parsed<S['query']>;
  body: Parsed<S['body']>;
}

/** A schema whose refusals are fixed messages (docs/api.md): the chosen message is the whole answer. */
interface Verbatim {
  /** Where several issues are found, the first of these messages that occurs wins (the documented check order). */
  precedence: string[];
  /** A body that is not JSON at all is handed to the schema as undefined instead of answered "invalid JSON body". */
  ownsBadJson: boolean;
}

const verbatimSchemas = new WeakMap<z.ZodType, Verbatim>();

export function verbatim<T extends z.ZodType>(schema: T, options: Partial<Verbatim> = {}): T {
  verbatimSchemas.set(schema, { precedence: [], ownsBadJson: false, ...options });
  return schema;
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const fixed = verbatimSchemas.get(schema);
  if (!fixed) throw result.error;
  const messages = result.error.issues.map((issue) => issue.message);
  throw new HttpError(400, fixed.precedence.find((m) => messages.includes(m)) ?? messages[0]);
}

export type Validated<S extends RouteSpec> = Middleware<{ input: Input<S> }> & { spec: S };

/**
 * The context of a handler after `validator` and steps that add `Added` to the state. Typed by hand: a router
 * infers a route's state from one of its middleware only, so steps between validate() and the handler hide the input.
 */
export type HandlerContext<V, Added> = ParameterizedContext<
  Added & { input: V extends Validated<infer S> ? Input<S> : never }
>;

export function validate<S extends RouteSpec>(spec: S): Validated<S> {
  const middleware: Middleware<{ input: Input<S> }> = async (ctx, next) => {
    const params = spec.params ? parse(spec.params, ctx.params) : ctx.params;
    const query: unknown = spec.query ? parse(spec.query, { ...ctx.query }) : undefined;
    let body: unknown;
    if (spec.body) {
      const badJsonIsTheSchemas =
        verbatimSchemas.get(spec.body)?.ownsBadJson && (ctx.state as { bodyError?: string }).bodyError;
      body = parse(spec.body, badJsonIsTheSchemas ? undefined : jsonBody(ctx as never));
    }
    ctx.state.input = { params, query, body } as Input<S>;
    await next();
  };
  return Object.assign(middleware, { spec });
}
