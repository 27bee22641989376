// The identity provider's key set (JWKS), held in memory. Fresh for AUTH_JWKS_CACHE_SECONDS; then it is reloaded,
// one fetch at a time however many requests wait on it. When a reload fails the last good set keeps serving for up
// to AUTH_JWKS_MAX_STALE_SECONDS more (an outage of the provider is not a login outage), and the next reload waits
// a backoff that doubles with each failure, so an outage is not met with one fetch per request.
import {
  createLocalJWKSet,
  errors,
  type FlattenedJWSInput,
  type JSONWebKeySet,
  type JWSHeaderParameters,
} from 'jose';
import type { JwksConfig } from '../config';

/** The keys could not be had: the provider's fault (503), not the token's. */
export class KeysUnavailableError extends Error {}

/** The whole JWKS exchange: this deadline, and at most this much of the answer. */
const JWKS_TIMEOUT_MS = 5000;
const JWKS_MAX_BYTES = 64 * 1024;
/** After the n-th failed reload in a row the next waits FIRST × 2^(n−1), at most MAX. */
const FIRST_BACKOFF_MS = 1000;
const MAX_BACKOFF_MS = 60_000;

export interface KeySetOptions extends Pick<
  JwksConfig,
  'url' | 'cacheSeconds' | 'maxStaleSeconds' | 'cooldownSeconds'
> {
  /** Default: a GET with the deadline and the size cap, no redirects. */
  fetchKeySet?: (url: string) => Promise<JSONWebKeySet>;
  /** Told once per failed reload (the URL and why); the caller only learns the keys are unavailable. */
  log?: (line: string) => void;
  now?: () => number;
}

async function fetchKeySet(url: string): Promise<JSONWebKeySet> {
  const res = await fetch(url, {
    headers: { accept: 'application/jwk-set+json, application/json' },
    redirect: 'manual',
    signal: AbortSignal.timeout(JWKS_TIMEOUT_MS),
  });
  if (res.status !== 200) {
    await res.body?.cancel();
    throw new Error(`answered ${res.status}`);
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (res.body) {
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      size += chunk.length;
      if (size > JWKS_MAX_BYTES) throw new Error(`answer larger than ${JWKS_MAX_BYTES} bytes`);
      chunks.push(chunk);
    }
  }
  return JSON.parse(Buffer.concat(chunks).toString('utf8')) as JSONWebKeySet;
}

type LocalKeys = ReturnType<typeof createLocalJWKSet>;

/** A key resolver for jwtVerify over the provider's key set. */
export function remoteKeySet(options: KeySetOptions) {
  const now = options.now ?? Date.now;
  const fetchKeys = options.fetchKeySet ?? fetchKeySet;
  let held: { keys: LocalKeys; fetchedAt: number } | undefined;
  let lastAttemptAt = -Infinity;
  let failures = 0;
  let lastFailure = 'not fetched yet';
  let inflight: Promise<LocalKeys> | undefined;

  const nextAttemptAt = (): number =>
    lastAttemptAt +
    (failures === 0
      ? options.cooldownSeconds * 1000
      : Math.min(FIRST_BACKOFF_MS * 2 ** (failures - 1), MAX_BACKOFF_MS));
  const age = (): number => (held ? now() - held.fetchedAt : Infinity);
  const fresh = (): boolean => age() < options.cacheSeconds * 1000;
  const usable = (): boolean => age() < (options.cacheSeconds + options.maxStaleSeconds) * 1000;

  async function attempt(): Promise<LocalKeys> {
    lastAttemptAt = now();
    try {
      const keys = createLocalJWKSet(await fetchKeys(options.url));
      held = { keys, fetchedAt: now() };
      failures = 0;
      return keys;
    } catch (err) {
      failures++;
      lastFailure = err instanceof Error ? err.message : String(err);
      options.log?.(
        `identity provider keys could not be fetched from ${options.url} (${failures} in a row): ${lastFailure}` +
          (held && usable() ? `; the key set of ${Math.round(age() / 1000)} s ago still serves` : ''),
      );
      throw new KeysUnavailableError(lastFailure);
    }
  }

  /** One fetch at a time: whoever comes while one is under way waits on it. */
  function reload(): Promise<LocalKeys> {
    if (!inflight) {
      const pending = attempt();
      inflight = pending;
      void pending.then(
        () => (inflight = undefined),
        () => (inflight = undefined),
      );
    }
    return inflight;
  }

  const mayReload = (): boolean => inflight !== undefined || now() >= nextAttemptAt();

  async function current(): Promise<LocalKeys> {
    if (held && fresh()) return held.keys;
    if (mayReload()) {
      try {
        return await reload();
      } catch (err) {
        if (held && usable()) return held.keys;
        throw err;
      }
    }
    if (held && usable()) return held.keys;
    throw new KeysUnavailableError(lastFailure);
  }

  return async (header: JWSHeaderParameters, token: FlattenedJWSInput) => {
    const keys = await current();
    try {
      return await keys(header, token);
    } catch (err) {
      // An unknown kid may be a rotation: fetch again, once the cooldown (or the backoff) allows.
      if (!(err instanceof errors.JWKSNoMatchingKey) || !mayReload()) throw err;
      return (await reload())(header, token);
    }
  };
}
