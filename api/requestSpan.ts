// One server span per request (tracing on): the root of the trace a request starts, e.g. the run end whose
// episode workflow, push sends and callback attempts follow. Named by the route's pattern, never the raw path,
// so ids do not make every span name unique (OpenTelemetry's HTTP conventions).
import type { Middleware } from 'koa';
import { inServerSpan } from '../observability/tracing';

export const requestSpan: Middleware = (ctx, next) =>
  inServerSpan(ctx.headers, next, () => {
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
