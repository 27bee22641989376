// Error middleware: every error becomes {"error": "..."} with the right status, and is logged once here.
import type { IncomingMessage } from 'node:http';
import type { Context, Middleware } from 'koa';
import { z } from 'zod';
import { ConflictError, ForbiddenError, GoneError, NotFoundError } from '../../domain/errors';
import { cutCodePoints } from '../../domain/text';

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    /** Sent with the answer (Retry-After on a 429 or 503). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

/** A limit reached: 429, saying when to come back. */
export function tooManyRequests(what: string, retryAfterSeconds: number): HttpError {
  return new HttpError(429, `too many ${what}; try again later`, {
    'retry-after': String(retryAfterSeconds),
  });
}

function statusOf(err: unknown): number {
  if (err instanceof HttpError) return err.status;
  if (err instanceof ForbiddenError) return 403;
  if (err instanceof NotFoundError) return 404;
  if (err instanceof ConflictError) return 409;
  if (err instanceof GoneError) return 410;
  if (err instanceof z.ZodError) return 400;
  const status = (err as { status?: unknown })?.status;
  return typeof status === 'number' && status >= 400 && status < 600 ? status : 500;
}

/** What the caller sent, as a refusal names it: a few words, however long or many. */
const SHOWN_KEY_POINTS = 40;
const SHOWN_KEYS = 3;

const shown = (key: PropertyKey): string => cutCodePoints(String(key), SHOWN_KEY_POINTS);

function zodMessage(err: z.ZodError): string {
  const issue = err.issues[0];
  if (!issue) return 'invalid request: bad input';
  const where = issue.path.length ? `${issue.path.map(shown).join('.')}: ` : '';
  let what = issue.message;
  if (issue.code === 'unrecognized_keys') {
    const keys = issue.keys.slice(0, SHOWN_KEYS).map((key) => JSON.stringify(shown(key)));
    const more = issue.keys.length > SHOWN_KEYS ? ` and ${issue.keys.length - SHOWN_KEYS} more` : '';
    what = `Unrecognized key${issue.keys.length > 1 ? 's' : ''}: ${keys.join(', ')}${more}`;
  }
  return `invalid request: ${where}${what}`;
}

function messageOf(err: unknown, status: number): string {
  if (err instanceof z.ZodError) return zodMessage(err);
  // The router's answer to a method it does not know (PROPFIND, say): the caller's doing, not a failure here.
  if (status === 501) return 'method not implemented';
  // A deliberate 5xx (503 while the identity provider's keys cannot be fetched) says what is wrong.
  if (status >= 500 && !(err instanceof HttpError)) return 'internal error';
  const type = (err as { type?: unknown })?.type;
  if (type === 'entity.too.large') return 'request body too large';
  return err instanceof Error && err.message ? err.message : 'request failed';
}

/**
 * A router's answers to a method a path does not take (405) or no route takes (501), thrown as HttpErrors so they
 * take the {"error"} shape; the 405 with the Allow header it must carry (RFC 9110), which the router sets only when
 * it does not throw.
 */
export function allowedMethodsOf<State, Ctx>(router: {
  allowedMethods(): Middleware<State, Ctx>;
}): Middleware<State, Ctx> {
  const allowed = router.allowedMethods();
  return async (ctx, next) => {
    await allowed(ctx, next);
    // Only the router answers so without throwing: a handler's error passes through `allowed` as thrown.
    if (ctx.status !== 405 && ctx.status !== 501) return;
    const allow = ctx.response.get('Allow');
    const message = ctx.status === 405 ? 'method not allowed' : 'method not implemented';
    throw new HttpError(ctx.status, message, allow ? { Allow: allow } : {});
  };
}

export function errorMiddleware(log: (line: string) => void): Middleware {
  return async (ctx, next) => {
    try {
      await next();
    } catch (err) {
      const status = statusOf(err);
      ctx.status = status;
      ctx.body = { error: messageOf(err, status) };
      if (err instanceof HttpError) ctx.set(err.headers);
      if (status >= 500 && status !== 501)
        log(
          `${ctx.method} ${ctx.path} failed: ${err instanceof Error ? err.stack : String(err)}` +
            (err instanceof Error && err.cause !== undefined ? ` (cause: ${String(err.cause)})` : ''),
        );
    }
  };
}

/** The parsed JSON body, or a 400 when it was not JSON (the body parser leaves that to the route). */
export function jsonBody(ctx: { state: { bodyError?: string }; request: { body?: unknown } }): unknown {
  if (ctx.state.bodyError !== undefined) throw new HttpError(400, 'invalid JSON body');
  return ctx.request.body ?? {};
}

/** How much of a refused body is read off (and thrown away) to keep its connection; past that it is dropped. */
const DISCARD_LIMIT = 8 * 1024 * 1024;

/**
 * Reads off and discards the rest of a body the parser gave up on, as Node itself does for a body no one reads.
 * The parser stops reading mid-body on an error (an undecodable gzip body, a chunked body over the limit) and
 * leaves the request paused, so the answer went out with "keep-alive" on a connection the server never read again:
 * the client's next request on it sat behind the unread bytes until the keep-alive timeout reset the socket.
 */
function discardRest(req: IncomingMessage): void {
  if (req.readableEnded) return;
  req.unpipe();
  let left = DISCARD_LIMIT;
  req.on('data', (chunk: Buffer) => {
    left -= chunk.length;
    if (left < 0) req.destroy();
  });
  req.resume();
}

/**
 * The body parser's onError. A body that cannot be decoded at all is answered here: 413 past the limit, 415 for a
 * content-encoding other than gzip, deflate or br, 400 when the compressed data is corrupt. A body that decodes but
 * is not JSON is left to the route, which answers it with its own message (see jsonBody).
 */
export function onBodyError(err: Error, ctx: Context): void {
  discardRest(ctx.req);
  const status = (err as { status?: unknown }).status;
  if (status === 413) throw err;
  if (status === 415) throw new HttpError(415, 'unsupported content-encoding (use gzip, deflate or br)');
  const encoding = ctx.get('content-encoding') || 'identity';
  // zlib's own errors (Z_DATA_ERROR, Z_BUF_ERROR, brotli's) carry no HTTP status.
  if (status === undefined && encoding !== 'identity')
    throw new HttpError(400, `request body is not valid ${encoding} data`);
  ctx.state.bodyError = err.message;
}
