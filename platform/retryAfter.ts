/**
 * The longest Retry-After taken as given: a day, past every wait a delivery keeps (an hour at most). A longer
 * one (or an HTTP date years ahead) reads as this, so what is recorded stays a number a store takes.
 */
export const RETRY_AFTER_MAX_SECONDS = 86_400;

/** Retry-After (RFC 9110): delay-seconds or an HTTP date, at most a day. Undefined when absent or unreadable. */
export function retryAfterMs(header: string | string[] | undefined, nowMs: number): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  if (/^\d+$/.test(value)) return Math.min(Number(value), RETRY_AFTER_MAX_SECONDS) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.min(Math.max(0, at - nowMs), RETRY_AFTER_MAX_SECONDS * 1000);
}
