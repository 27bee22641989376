// A loopback identity provider: holds signing keys, serves their public halves as a JWKS (RFC 7517) and signs
// tokens with them, as a deployment's IdP would. Keys can be rotated and the endpoint made to fail.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK, type JWTPayload } from 'jose';

interface SigningKey {
  kid: string;
  alg: 'RS256' | 'ES256';
  privateKey: CryptoKey;
  jwk: JWK;
}

export class JwksServer {
  /** Keys published in the JWKS. */
  private published: SigningKey[] = [];
  /** Every key ever made, published or not (a token can be signed by a key the JWKS no longer lists). */
  private readonly all = new Map<string, SigningKey>();
  /** Requests for the JWKS seen so far. */
  fetches = 0;
  /** When set, the JWKS endpoint answers this status with no keys. */
  failWith?: number;

  private constructor(
    private readonly server: http.Server,
    readonly issuer: string,
  ) {}

  static async start(issuer = 'https://idp.flow.test/'): Promise<JwksServer> {
    let self: JwksServer | undefined = undefined;
    const server = http.createServer((req, res) => {
      self!.fetches++;
      if (self!.failWith) {
        res.writeHead(self!.failWith, { 'content-type': 'text/plain' }).end('unavailable');
        return;
      }
      const body = JSON.stringify({ keys: self!.published.map((k) => k.jwk) });
      res.writeHead(200, { 'content-type': 'application/jwk-set+json' }).end(body);
    });
    self = new JwksServer(server, issuer);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return self;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/.well-known/jwks.json`;
  }

  /** Makes a key; published unless told otherwise. */
  async addKey(kid: string, alg: 'RS256' | 'ES256', publish = true): Promise<void> {
    const { publicKey, privateKey } = await generateKeyPair(alg);
    const jwk = { ...(await exportJWK(publicKey)), kid, alg, use: 'sig' };
    const key = { kid, alg, privateKey, jwk };
    this.all.set(kid, key);
    if (publish) this.published.push(key);
  }

  /** The JWKS lists exactly these keys from now on (a rotation). */
  publishOnly(...kids: string[]): void {
    this.published = kids.map((kid) => this.all.get(kid)!);
  }

  /** A token signed by one of the keys: iat now, exp in an hour, unless the claims say otherwise. */
  async sign(kid: string, claims: JWTPayload, audience: string, issuer = this.issuer): Promise<string> {
    const key = this.all.get(kid)!;
    const now = Math.floor(Date.now() / 1000);
    return new SignJWT({ iat: now, exp: now + 3600, ...claims })
      .setProtectedHeader({ alg: key.alg, kid })
      .setIssuer(issuer)
      .setAudience(audience)
      .sign(key.privateKey);
  }

  async stop(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
