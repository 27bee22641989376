// requireAuth: Authorization: Bearer <JWT HS256> with claims sub (user) and team. It is the whole gate.
import jwt from 'jsonwebtoken';
import type { Middleware } from 'koa';
import type { Caller } from '../engine/runEngine';
import { HttpError } from './errors';

export interface AuthState {
  caller: Caller;
  /** Set by the body parser when the body was not valid JSON. */
  bodyError?: string;
}

export function requireAuth(secret: string): Middleware<AuthState> {
  return async (ctx, next) => {
    const header = ctx.get('authorization');
    const match = /^Bearer\s+(\S+)$/i.exec(header);
    if (!match) throw new HttpError(401, 'missing bearer token');
    let claims: jwt.JwtPayload | string;
    try {
      claims = jwt.verify(match[1], secret, { algorithms: ['HS256'] });
    } catch (err) {
      const expired = err instanceof jwt.TokenExpiredError;
      throw new HttpError(401, expired ? 'token expired' : 'invalid token');
    }
    if (typeof claims !== 'object' || typeof claims.sub !== 'string' || typeof claims.team !== 'string') {
      throw new HttpError(401, 'token must carry sub and team');
    }
    if (!claims.sub || !claims.team) throw new HttpError(401, 'token must carry sub and team');
    ctx.state.caller = { userId: claims.sub, teamId: claims.team };
    await next();
  };
}

/** Mints a token for the local secret (npm run token, tests). */
export function mintToken(
  secret: string,
  userId: string,
  teamId: string,
  expiresIn: jwt.SignOptions['expiresIn'] = '30d',
) {
  return jwt.sign({ team: teamId }, secret, { algorithm: 'HS256', subject: userId, expiresIn });
}
