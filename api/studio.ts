// Serves the studio (static files, no auth) and answers the catch-alls: an unknown GET under /api is a JSON
// 404, any path answers GET, so other methods on unknown paths are 405 (an SPA catch-all).
import { createReadStream, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import Router from '@koa/router';
import type { Middleware } from 'koa';
import { allowedMethodsOf, HttpError } from '../platform/http/httpErrors';

// From source: ./studio; from a build: dist/studio (npm run build copies it there).
export const STUDIO_DIR = path.resolve(__dirname, '..', 'studio');

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.json': 'application/json',
  '.webmanifest': 'application/manifest+json',
};

const isApi = (p: string): boolean => p === '/api' || p.startsWith('/api/');

/** GET/HEAD of a studio file, or the SPA's index.html for any other non-API path (deep links like /runs/:id). */
export function serveStudio(dir = STUDIO_DIR): Middleware {
  return async (ctx, next) => {
    if (
      (ctx.method !== 'GET' && ctx.method !== 'HEAD') ||
      isApi(ctx.path) ||
      ctx.path === '/healthz' ||
      ctx.path === '/readyz'
    )
      return next();
    let decoded: string;
    try {
      decoded = decodeURIComponent(ctx.path);
    } catch {
      throw new HttpError(400, 'malformed URL');
    }
    const wanted = path.resolve(dir, `.${path.posix.normalize(decoded)}`);
    const inside = wanted.startsWith(dir + path.sep);
    const file =
      inside && existsSync(wanted) && statSync(wanted).isFile() ? wanted : path.join(dir, 'index.html');
    if (!existsSync(file)) return next();
    ctx.type = TYPES[path.extname(file)] ?? 'application/octet-stream';
    // The service worker must be re-checked on every load so a new version takes over promptly.
    ctx.set(
      'cache-control',
      file.endsWith('.html') || file.endsWith('sw.js') ? 'no-cache' : 'public, max-age=300',
    );
    ctx.body = createReadStream(file);
  };
}

/** The last router: GET anything → JSON 404; any other method → 405 (thrown, so it is JSON too). */
export function catchAllRouter() {
  const router = new Router();
  router.get('/{*rest}', () => {
    throw new HttpError(404, 'not found');
  });
  return router;
}

/**
 * The catch-all's answers for every path under a feature that is off (web push), given ahead of requireAuth: a
 * route that does not exist asks for no token. Nothing below it runs for those paths.
 */
export function absentFeature(prefix: string): Middleware {
  const catchAll = catchAllRouter();
  const routes = catchAll.routes();
  const allowed = allowedMethodsOf(catchAll);
  return async (ctx, next) => {
    if (ctx.path !== prefix && !ctx.path.startsWith(`${prefix}/`)) return next();
    // Koa's context stands in for the routers' own (the params they add are not read here); nothing runs after.
    await allowed(ctx as never, () => routes(ctx as never, async () => undefined));
    if (ctx.body === undefined) throw new HttpError(404, 'not found');
  };
}
