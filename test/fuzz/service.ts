// The fuzzer's routes outside the resource routers: the probes (platform/http/healthRoutes.ts), the metrics scrape
// (platform/http/metricsRoutes.ts), the OpenAPI document, and whole unknown paths (the studio's catch-all).
import { none, type RouteSpec } from './spec';

export const SERVICE_ROUTES: RouteSpec[] = [
  { name: 'GET /healthz', method: 'GET', template: '/healthz', onSuccess: none },
  { name: 'GET /readyz', method: 'GET', template: '/readyz', onSuccess: none },
  { name: 'GET /metrics', method: 'GET', template: '/metrics', onSuccess: none },
  { name: 'GET /api/v1/openapi.json', method: 'GET', template: '/api/v1/openapi.json', onSuccess: none },
  { name: 'ANY unknown paths', method: 'GET', template: '' },
];
