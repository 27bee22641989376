// Tokens as any issuer might sign them, flawed ones included (the API's own minting is mintToken in api/auth).
import { SignJWT, type JWTPayload } from 'jose';

/** Signs `claims` as given (ill-typed ones too), with an iat of now unless they carry one, and no exp unless they do. */
export function signToken(
  claims: Record<string, unknown>,
  secret: string,
  alg: 'HS256' | 'HS512' = 'HS256',
): Promise<string> {
  return new SignJWT({ iat: Math.floor(Date.now() / 1000), ...claims } as JWTPayload)
    .setProtectedHeader({ alg, typ: 'JWT' })
    .sign(new TextEncoder().encode(secret));
}
