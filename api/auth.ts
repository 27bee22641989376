// requireAuth: Authorization: Bearer <JWT> with a user and a team claim. It is the whole gate.
// A token is HS256 signed with the local secret (the embedded default, npm run token), or RS256/ES256 signed by a
// deployment's identity provider and verified against its JWKS. Either way it must carry a numeric exp within the
// maximum lifetime, and an iat (when present) not in the future.
import { decodeProtectedHeader, errors, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import type { Context, Middleware } from 'koa';
import type { JwksConfig } from '../config';
import { ID_SEPARATOR, isId, MAX_ID_BYTES } from '../domain/ids';
import type { Caller } from '../runs/service';
import { KeysUnavailableError, remoteKeySet } from './authKeys';
import { HttpError } from '../platform/http/httpErrors';

export interface AuthState {
  caller: Caller;
  /** Set by the body parser when the body was not valid JSON. */
  bodyError?: string;
  /** The bearer's verification, once per request (see createAuthenticator). */
  bearer?: Promise<Caller>;
}

export interface AuthOptions {
  /** HS256 secret (at least 32 bytes; config.ts checks). Absent: only JWKS tokens are accepted. */
  jwtSecret?: string;
  jwks?: JwksConfig;
  /** When set, every token must carry this iss / aud, whichever key signed it. */
  issuer?: string;
  audience?: string;
  maxLifetimeSeconds: number;
  clockSkewSeconds: number;
  now?: () => Date;
  /** Where a failed key reload is told (the caller only learns the keys are unavailable). */
  log?: (line: string) => void;
}

type Verify = (token: string) => Promise<{ payload: JWTPayload; user: string; team: string }>;

function jwksVerifier(options: JwksConfig, clockTolerance: number, log?: (line: string) => void): Verify {
  const keys = remoteKeySet({ ...options, log });
  return async (token) => {
    const { payload } = await jwtVerify(token, keys, {
      algorithms: ['RS256', 'ES256'],
      issuer: options.issuer,
      audience: options.audience,
      clockTolerance,
    });
    return { payload, user: options.userClaim, team: options.teamClaim };
  };
}

function secretVerifier(
  secret: string,
  clockTolerance: number,
  expected: { issuer?: string; audience?: string },
): Verify {
  const key = new TextEncoder().encode(secret);
  return async (token) => {
    const { payload } = await jwtVerify(token, key, {
      algorithms: ['HS256'],
      clockTolerance,
      ...(expected.issuer === undefined ? {} : { issuer: expected.issuer }),
      ...(expected.audience === undefined ? {} : { audience: expected.audience }),
    });
    return { payload, user: 'sub', team: 'team' };
  };
}

/** Verifies a bearer token to its caller, or throws the HttpError to answer (401, or 503 without the keys). */
export function createTokenVerifier(options: AuthOptions): (token: string) => Promise<Caller> {
  const now = options.now ?? (() => new Date());
  const skew = options.clockSkewSeconds;
  // A token of the local secret is held to the same issuer and audience as the provider's.
  const expected = { issuer: options.issuer, audience: options.audience };
  const bySecret = options.jwtSecret ? secretVerifier(options.jwtSecret, skew, expected) : undefined;
  const byJwks = options.jwks ? jwksVerifier(options.jwks, skew, options.log) : undefined;
  return async (token) => {
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw new HttpError(401, 'invalid token');
    }
    const verify = alg === 'HS256' ? bySecret : alg === 'RS256' || alg === 'ES256' ? byJwks : undefined;
    if (!verify) throw new HttpError(401, 'invalid token');
    let verified: Awaited<ReturnType<Verify>>;
    try {
      verified = await verify(token);
    } catch (err) {
      if (err instanceof KeysUnavailableError) {
        // The caller learns the keys are unavailable; the operator's log gets why (the cause).
        const unavailable = new HttpError(503, 'identity provider keys are unavailable; try again shortly', {
          'retry-after': '5',
        });
        unavailable.cause = err;
        throw unavailable;
      }
      throw new HttpError(401, err instanceof errors.JWTExpired ? 'token expired' : 'invalid token');
    }
    const { payload } = verified;
    const nowSeconds = now().getTime() / 1000;
    if (typeof payload.exp !== 'number' || !Number.isFinite(payload.exp))
      throw new HttpError(401, 'token must carry a numeric exp');
    if (payload.iat !== undefined && payload.iat > nowSeconds + skew)
      throw new HttpError(401, 'token issued in the future');
    const start = payload.iat ?? nowSeconds;
    if (payload.exp - start > options.maxLifetimeSeconds + skew)
      throw new HttpError(401, `token lifetime exceeds ${options.maxLifetimeSeconds} seconds`);
    const userId = payload[verified.user];
    const teamId = payload[verified.team];
    if (typeof userId !== 'string' || typeof teamId !== 'string' || !userId || !teamId)
      throw new HttpError(401, `token must carry ${verified.user} and ${verified.team}`);
    if (!isId(userId) || !isId(teamId))
      throw new HttpError(
        401,
        `${verified.user} and ${verified.team} must be 1–${MAX_ID_BYTES} bytes (UTF-8) without control characters`,
      );
    // Keys and workflow ids join a team and a user with "|" (digest|<team>|<user>, push-burst|…): an id holding
    // one would share them with another tenant's.
    if (userId.includes(ID_SEPARATOR) || teamId.includes(ID_SEPARATOR))
      throw new HttpError(401, `${verified.user} and ${verified.team} must not contain "${ID_SEPARATOR}"`);
    // A team admin manages the team's endpoints and escalation policy.
    const admin = Array.isArray(payload.roles) && payload.roles.includes('admin');
    return admin ? { userId, teamId, admin } : { userId, teamId };
  };
}

/**
 * The request's caller from its bearer token, verified at most once per request: the request span asks before
 * requireAuth does (whether to continue the caller's trace), and both get the same answer or the same error.
 */
export function createAuthenticator(options: AuthOptions): (ctx: Context) => Promise<Caller> {
  const verify = createTokenVerifier(options);
  return (ctx) => {
    const state = ctx.state as AuthState;
    if (!state.bearer) {
      const match = /^Bearer\s+(\S+)$/i.exec(ctx.get('authorization'));
      state.bearer = match ? verify(match[1]) : Promise.reject(new HttpError(401, 'missing bearer token'));
      state.bearer.catch(() => undefined); // a route that needs no caller never awaits it
    }
    return state.bearer;
  };
}

export function requireAuth(authenticate: (ctx: Context) => Promise<Caller>): Middleware<AuthState> {
  return async (ctx, next) => {
    ctx.state.caller = await authenticate(ctx);
    await next();
  };
}

/** Team admins only (the token's "roles": ["admin"]): anyone else is a 403, before their input is looked at. */
export function requireAdmin(refusal: string): Middleware<AuthState> {
  return async (ctx, next) => {
    if (!ctx.state.caller.admin) throw new HttpError(403, refusal);
    await next();
  };
}

/** Mints a token for the local secret (npm run token, tests). `expiresIn` is a time span: '1d', '2h', '90m'. */
export function mintToken(
  secret: string,
  userId: string,
  teamId: string,
  expiresIn = '1d',
  expected: { issuer?: string; audience?: string } = {},
  claims: { roles?: string[] } = {},
): Promise<string> {
  const token = new SignJWT({ ...claims, team: teamId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setSubject(userId)
    .setIssuedAt()
    .setExpirationTime(expiresIn);
  if (expected.issuer !== undefined) token.setIssuer(expected.issuer);
  if (expected.audience !== undefined) token.setAudience(expected.audience);
  return token.sign(new TextEncoder().encode(secret));
}
