// Security headers on every answer, the errors included. The studio gets a strict Content-Security-Policy (it has
// no inline script or style: everything is a same-origin file), the API one that allows nothing at all (it serves
// JSON, never a document). Neither may be framed, sniffed, or leak its URL in a Referer.
import type { Middleware } from 'koa';

export const STUDIO_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "worker-src 'self'",
  "manifest-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

export const API_CSP = "default-src 'none'; frame-ancestors 'none'";

const isApi = (p: string): boolean =>
  p === '/api' || p.startsWith('/api/') || p === '/healthz' || p === '/metrics';

export function securityHeaders(): Middleware {
  return async (ctx, next) => {
    ctx.set({
      'content-security-policy': isApi(ctx.path) ? API_CSP : STUDIO_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      // For browsers that predate frame-ancestors.
      'x-frame-options': 'DENY',
    });
    await next();
  };
}
