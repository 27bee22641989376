// Security headers on every answer, the errors included. The studio gets a strict Content-Security-Policy (it has
// no inline script or style: everything is a same-origin file), the API one that allows nothing at all (it serves
// JSON, never a document). Neither may be framed, sniffed, or leak its URL in a Referer; no other origin keeps a
// window handle on ours (COOP) or embeds what we answer (CORP). Strict-Transport-Security goes with answers that
// travelled over TLS: a TLS socket of our own, or a TLS-terminating proxy we were told to trust (TRUST_PROXY),
// unless its X-Forwarded-Proto says the request came in plain.
import type { Context, Middleware } from 'koa';

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

/** A year, without includeSubDomains: the operator's other hosts are not ours to pin to HTTPS. */
export const HSTS = 'max-age=31536000';

const isApi = (p: string): boolean =>
  p === '/api' || p.startsWith('/api/') || p === '/healthz' || p === '/readyz' || p === '/metrics';

function overTls(ctx: Context, trustProxy: boolean): boolean {
  if ((ctx.req.socket as { encrypted?: boolean }).encrypted) return true;
  if (!trustProxy) return false;
  const forwarded = ctx.get('x-forwarded-proto').split(',')[0].trim().toLowerCase();
  return forwarded !== 'http';
}

export function securityHeaders(options: { trustProxy?: boolean } = {}): Middleware {
  const trustProxy = options.trustProxy ?? false;
  return async (ctx, next) => {
    ctx.set({
      'content-security-policy': isApi(ctx.path) ? API_CSP : STUDIO_CSP,
      'x-content-type-options': 'nosniff',
      'referrer-policy': 'no-referrer',
      // For browsers that predate frame-ancestors.
      'x-frame-options': 'DENY',
      'cross-origin-opener-policy': 'same-origin',
      'cross-origin-resource-policy': 'same-origin',
    });
    if (overTls(ctx, trustProxy)) ctx.set('strict-transport-security', HSTS);
    await next();
  };
}
