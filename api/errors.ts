// Error middleware: every error becomes {"error": "..."} with the right status, and is logged once here.
import type { Middleware } from 'koa';
import { z } from 'zod';
import { ConflictError, NotFoundError, ValidationError } from '../domain/errors';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function statusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof NotFoundError) return 404;
  if (err instanceof ConflictError) return 409;
  if (err instanceof ValidationError || err instanceof z.ZodError) return 400;
  const status = (err as { status?: unknown })?.status;
  return typeof status === 'number' && status >= 400 && status < 600 ? status : 500;
}

function messageOf(err: unknown, status: number): string {
  if (err instanceof z.ZodError) {
    const issue = err.issues[0];
    const where = issue?.path.length ? `${issue.path.join('.')}: ` : '';
    return `invalid request: ${where}${issue?.message ?? 'bad input'}`;
  }
  if (status >= 500) return 'internal error';
  const type = (err as { type?: unknown })?.type;
  if (type === 'entity.too.large') return 'request body too large';
  return err instanceof Error && err.message ? err.message : 'request failed';
}

export function errorMiddleware(log: (line: string) => void): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const status = statusOf(err);
      ctx.status = status;
      ctx.body = { error: messageOf(err, status) };
      if (status >= 500)
        log(`${ctx.method} ${ctx.path} failed: ${err instanceof Error ? err.stack : String(err)}`);
    }
  };
}

/** The parsed JSON body, or a 400 when it was not JSON (the body parser leaves that to the route). */
export function jsonBody(ctx: { state: { bodyError?: string }; request: { body?: unknown } }): unknown {
  if (ctx.state.bodyError !== undefined) throw new HttpError(400, 'invalid JSON body');
  return ctx.request.body ?? {};
}
