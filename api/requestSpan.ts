// One server span per request (tracing on): the root of the trace a request starts, e.g. the run end whose
// episode workflow, push sends and callback attempts follow. Named by the route's pattern, never the raw path,
// so ids do not make every span name unique (OpenTelemetry's HTTP conventions).
//
// A caller's trace context (`traceparent`) is continued only on a request whose bearer token verifies, or on
// every request behind TRUST_PROXY (the proxy in front sets or strips it): otherwise anyone could choose our
// trace ids and force sampling. Baggage never comes in (platform/tracing.ts).
import type { Context, Middleware } from 'koa';
import type { Caller } from '../runs/service';
import { inServerSpan } from '../platform/tracing';

export interface RequestSpanTrust {
  /** TRUST_PROXY: the proxy in front vouches for the trace headers it lets through. */
  proxy: boolean;
  /** The request's bearer verified (once per request: requireAuth reuses the answer). */
  authenticate: (ctx: Context) => Promise<Caller>;
}

export const requestSpan =
  (trust: RequestSpanTrust): Middleware =>
  async (ctx, next) => {
    const trusted =
      trust.proxy ||
      (ctx.get('traceparent') !== '' &&
        ctx.get('authorization') !== '' &&
        (await trust.authenticate(ctx).then(
          () => true,
          () => false, // answered by requireAuth, if the route needs a caller at all
        )));
    return inServerSpan(trusted ? ctx.headers : undefined, next, () => {
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      return {
        name: typeof route === 'string' ? `${ctx.method} ${route}` : ctx.method,
        attributes: {
          'http.request.method': ctx.method,
          'http.response.status_code': ctx.status,
          'url.scheme': ctx.protocol,
          ...(typeof route === 'string' ? { 'http.route': route } : {}),
        },
        failed: ctx.status >= 500,
      };
    });
  };
