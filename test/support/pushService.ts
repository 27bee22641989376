// A loopback stand-in for a browser push service that speaks the real Web Push protocol: RFC 8030 requests,
// RFC 8291 aes128gcm message encryption (decrypted with the browser-side key it handed out) and RFC 8292 VAPID.
// Tests register subscriptions, script failures per endpoint, and read back what a browser would have shown.
//
// Endpoints are `https://127.0.0.1:<port>/push/<id>` (Web Push is HTTPS-only), served with the test-only
// loopback certificate below: senders pass `agent: pushService.agent` or trust `pushService.ca`. The same port
// also answers plain HTTP (the first byte of each connection decides), for clients that speak it by hand.
// The VAPID audience is the https origin.
import {
  createECDH,
  createPrivateKey,
  createPublicKey,
  randomBytes,
  sign as signData,
  verify as verifySignature,
  type KeyObject,
} from 'node:crypto';
import { EventEmitter } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';

// http_ece ships no type declarations; this is the slice of its API used here.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ece = require('http_ece') as {
  decrypt(
    body: Buffer,
    params: { version: 'aes128gcm'; privateKey: ReturnType<typeof createECDH>; authSecret: Buffer },
  ): Buffer;
};

/** RFC 8030 / 8291: a push message body (header included) may not exceed 4096 octets. */
export const MAX_PUSH_BODY = 4096;
const MAX_VAPID_LIFETIME_SECONDS = 24 * 60 * 60;
const URGENCIES = ['very-low', 'low', 'normal', 'high'];

// A self-signed P-256 certificate for 127.0.0.1/localhost, valid 2000-2099. Test-only: it guards nothing.
const LOOPBACK_KEY = `-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgOB1d+7LhbN9h6gz4
VpFmN+kgQXvvqyliNwKR+nq1FMOhRANCAASROWrSoMqf4fqfbG5/zmY4fENHHlV+
wqLAflHWnD29ZN/A5hkGOje9HxDzNL0mOAkW9QBwmnbFeAhga2wJQ9VX
-----END PRIVATE KEY-----
`;
export const LOOPBACK_CA = `-----BEGIN CERTIFICATE-----
MIIBljCCAT2gAwIBAgIBATAKBggqhkjOPQQDAjAsMSowKAYDVQQDDCFmbG93LW5v
dGlmeSBsb29wYmFjayBwdXNoIHNlcnZpY2UwIBcNMDAwMTAxMDAwMDAwWhgPMjA5
OTEyMzEyMzU5NTlaMCwxKjAoBgNVBAMMIWZsb3ctbm90aWZ5IGxvb3BiYWNrIHB1
c2ggc2VydmljZTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJE5atKgyp/h+p9s
bn/OZjh8Q0ceVX7CosB+UdacPb1k38DmGQY6N70fEPM0vSY4CRb1AHCadsV4CGBr
bAlD1VejTjBMMA8GA1UdEwEB/wQFMAMBAf8wGgYDVR0RBBMwEYcEfwAAAYIJbG9j
YWxob3N0MB0GA1UdDgQWBBRja+RBH0Xc/rSlhZbJFyFToUuRvTAKBggqhkjOPQQD
AgNHADBEAiADkmE2pOFgulDq5dkKODGj14cDXB8qPEGtAXLKYZvqBgIgMcfTVWR6
y1joMCSo3V4dz8U2TwQ7zLrWPn/O1/ZG/aQ=
-----END CERTIFICATE-----
`;

// ---------------------------------------------------------------------------------------------------------------
// Keys and message encryption

const b64u = (b: Buffer): string => b.toString('base64url');
const unb64u = (s: string): Buffer => Buffer.from(s, 'base64url');

function leftPad(b: Buffer, length: number): Buffer {
  return b.length >= length ? b : Buffer.concat([Buffer.alloc(length - b.length), b]);
}

/** A fresh browser-side subscription key pair and auth secret, all base64url (no padding). */
export function createSubscriptionKeys(): { privateKey: string; p256dh: string; auth: string } {
  const ecdh = createECDH('prime256v1');
  ecdh.generateKeys();
  return {
    privateKey: b64u(leftPad(ecdh.getPrivateKey(), 32)),
    p256dh: b64u(ecdh.getPublicKey()),
    auth: b64u(randomBytes(16)),
  };
}

/**
 * Decrypts an RFC 8291 aes128gcm push message body as the browser would. The sender's ephemeral public key is
 * the header's keyid; `uaPublicKey` must be the public half of `uaPrivateKey` (it is checked, since the public
 * key takes part in the key derivation). Throws on any malformed header, key mismatch or authentication failure.
 */
export function decryptAes128gcm(
  body: Buffer,
  uaPrivateKey: string,
  uaPublicKey: string,
  authSecret: string,
): Buffer {
  const ecdh = createECDH('prime256v1');
  ecdh.setPrivateKey(unb64u(uaPrivateKey));
  if (!ecdh.getPublicKey().equals(unb64u(uaPublicKey))) {
    throw new Error('uaPublicKey is not the public key of uaPrivateKey');
  }
  const auth = unb64u(authSecret);
  if (auth.length !== 16) throw new Error(`the auth secret must be 16 bytes, not ${auth.length}`);
  // http_ece trusts the header blindly; check what RFC 8291 section 4 requires before handing it over.
  if (body.length < 21) throw new Error('body is shorter than the aes128gcm header');
  const rs = body.readUInt32BE(16);
  const idlen = body.readUInt8(20);
  if (idlen !== 65) throw new Error(`keyid must be the sender's 65-byte public key, not ${idlen} bytes`);
  if (body.length < 21 + idlen + 17) throw new Error('body has no ciphertext record');
  if (rs < 18) throw new Error(`record size ${rs} is too small`);
  return ece.decrypt(body, { version: 'aes128gcm', privateKey: ecdh, authSecret: auth });
}

// ---------------------------------------------------------------------------------------------------------------
// VAPID (RFC 8292)

export interface VapidKeyPair {
  /** base64url, 65-byte uncompressed P-256 point */
  publicKey: string;
  /** base64url, 32-byte P-256 scalar */
  privateKey: string;
}

export interface VapidClaims {
  aud: string;
  exp: number;
  sub: string;
  [claim: string]: unknown;
}

function publicKeyFromPoint(point: Buffer): KeyObject {
  if (point.length !== 65 || point[0] !== 0x04) {
    throw new Error('the key must be a 65-byte uncompressed P-256 point');
  }
  return createPublicKey({
    key: { kty: 'EC', crv: 'P-256', x: b64u(point.subarray(1, 33)), y: b64u(point.subarray(33)) },
    format: 'jwk',
  });
}

/**
 * Signs a VAPID JWT by hand (ES256, raw r||s signature), with any claims, including ones web-push refuses to
 * produce (an exp beyond 24 h, a foreign aud). `header` overrides the JOSE header.
 */
export function signVapidJwt(
  claims: VapidClaims,
  keys: VapidKeyPair,
  header: Record<string, unknown> = { typ: 'JWT', alg: 'ES256' },
): string {
  const point = unb64u(keys.publicKey);
  const key = createPrivateKey({
    key: {
      kty: 'EC',
      crv: 'P-256',
      x: b64u(point.subarray(1, 33)),
      y: b64u(point.subarray(33)),
      d: keys.privateKey,
    },
    format: 'jwk',
  });
  const signingInput = `${b64u(Buffer.from(JSON.stringify(header)))}.${b64u(Buffer.from(JSON.stringify(claims)))}`;
  const signature = signData('sha256', Buffer.from(signingInput), { key, dsaEncoding: 'ieee-p1363' });
  return `${signingInput}.${b64u(signature)}`;
}

/** The RFC 8292 `Authorization: vapid t=..., k=...` value for a JWT and the public key to present with it. */
export function vapidAuthorization(jwt: string, publicKey: string): string {
  return `vapid t=${jwt}, k=${publicKey}`;
}

class Rejection extends Error {
  constructor(
    readonly status: number,
    reason: string,
  ) {
    super(reason);
  }
}

interface VerifiedVapid {
  jwt: string;
  publicKey: string;
  claims: VapidClaims;
}

function parseAuthorization(req: http.IncomingMessage): { jwt: string; publicKey: string } {
  const authorization = req.headers.authorization;
  if (!authorization) throw new Rejection(401, 'missing Authorization header');
  const [scheme, ...rest] = authorization.trim().split(/\s+/);
  const credentials = rest.join(' ');
  if (scheme.toLowerCase() === 'vapid') {
    const params = new Map<string, string>();
    for (const part of credentials.split(',')) {
      const eq = part.indexOf('=');
      if (eq > 0) params.set(part.slice(0, eq).trim().toLowerCase(), part.slice(eq + 1).trim());
    }
    const jwt = params.get('t');
    const publicKey = params.get('k');
    if (!jwt || !publicKey) throw new Rejection(401, 'vapid Authorization needs both t= and k=');
    return { jwt, publicKey };
  }
  if (scheme.toLowerCase() === 'webpush') {
    // The draft-era form: `Authorization: WebPush <jwt>` with `Crypto-Key: p256ecdsa=<key>`.
    const cryptoKey = String(req.headers['crypto-key'] ?? '');
    const match = /(?:^|[;,\s])p256ecdsa=([A-Za-z0-9_-]+)/.exec(cryptoKey);
    if (!credentials || !match)
      throw new Rejection(401, 'WebPush Authorization needs Crypto-Key: p256ecdsa=');
    return { jwt: credentials, publicKey: match[1] };
  }
  throw new Rejection(401, `unsupported Authorization scheme ${JSON.stringify(scheme)}`);
}

function verifyVapid(jwt: string, publicKey: string, origin: string, nowSeconds: number): VerifiedVapid {
  let key: KeyObject;
  try {
    key = publicKeyFromPoint(unb64u(publicKey));
  } catch (err) {
    throw new Rejection(401, `bad VAPID public key: ${(err as Error).message}`);
  }
  const parts = jwt.split('.');
  if (parts.length !== 3) throw new Rejection(401, 'the JWT does not have three parts');
  let header: Record<string, unknown>;
  let claims: VapidClaims;
  try {
    header = JSON.parse(unb64u(parts[0]).toString('utf8')) as Record<string, unknown>;
    claims = JSON.parse(unb64u(parts[1]).toString('utf8')) as VapidClaims;
  } catch {
    throw new Rejection(401, 'the JWT header or claims are not JSON');
  }
  if (header.alg !== 'ES256') throw new Rejection(401, `JWT alg must be ES256, not ${String(header.alg)}`);
  if (header.typ !== undefined && header.typ !== 'JWT') throw new Rejection(401, 'JWT typ must be JWT');
  const signature = unb64u(parts[2]);
  if (signature.length !== 64) throw new Rejection(401, 'the ES256 signature must be 64 bytes (r||s)');
  const signed = verifySignature(
    'sha256',
    Buffer.from(`${parts[0]}.${parts[1]}`),
    { key, dsaEncoding: 'ieee-p1363' },
    signature,
  );
  if (!signed) throw new Rejection(401, 'the JWT signature does not verify with k');
  if (claims.aud !== origin) {
    throw new Rejection(401, `JWT aud ${JSON.stringify(claims.aud)} is not this push service (${origin})`);
  }
  if (typeof claims.exp !== 'number' || !Number.isInteger(claims.exp)) {
    throw new Rejection(401, 'JWT exp must be an integer');
  }
  if (claims.exp <= nowSeconds) throw new Rejection(401, 'JWT has expired');
  if (claims.exp > nowSeconds + MAX_VAPID_LIFETIME_SECONDS) {
    throw new Rejection(401, 'JWT exp is more than 24 hours ahead');
  }
  if (typeof claims.sub !== 'string' || !/^(mailto:|https:)/.test(claims.sub)) {
    throw new Rejection(401, 'JWT sub must be a mailto: or https: URI');
  }
  return { jwt, publicKey, claims };
}

// ---------------------------------------------------------------------------------------------------------------
// The service

/** What `PushSubscription.toJSON()` gives a page in the browser. */
export interface SubscriptionJSON {
  endpoint: string;
  expirationTime: null;
  keys: { p256dh: string; auth: string };
}

export interface EndpointOptions {
  /** Restrict the subscription to this VAPID public key (the browser's applicationServerKey): others get 403. */
  applicationServerKey?: string;
}

export interface ReceivedPush {
  endpointId: string;
  endpoint: string;
  name?: string;
  /** The decrypted body, parsed as JSON. */
  payload: unknown;
  rawText: string;
  headers: { ttl: number; urgency: string | undefined; topic: string | undefined };
  vapidPublicKey: string;
  jwt: string;
  claims: VapidClaims;
  /** Whether the request came over TLS (web-push's sendNotification) or plain HTTP (fetch). */
  tls: boolean;
  at: Date;
}

export interface PushRejection {
  endpointId: string | undefined;
  status: number;
  reason: string;
  at: Date;
}

export interface PushAttempt {
  endpointId: string | undefined;
  status: number;
  /** `accepted`, `scripted`, or the rejection reason. */
  outcome: string;
  at: Date;
}

/** An endpoint id, its URL, the name given to endpoint(), or the subscription object itself. */
export type EndpointRef = string | { endpoint: string };

interface Registration {
  id: string;
  name?: string;
  url: string;
  keys: { privateKey: string; p256dh: string; auth: string };
  applicationServerKey?: string;
  script: { status: number; headers: Record<string, string> }[];
  always?: { status: number; headers: Record<string, string> };
  misbehaviour?: { how: Misbehaviour; remaining: number };
  /** Taken pushes' 201s withheld until release (withholdAnswers). */
  withheld?: (() => void)[];
}

/**
 * How a push service can misbehave after accepting a request: trickle a 201's body one byte every `everyMs`
 * (never finishing), or stream an endless body as fast as the client reads it.
 */
export type Misbehaviour = { trickleEveryMs: number } | { endlessBody: true };

/** One misbehaving answer: how many body bytes went out, and whether the client hung up on it. */
export interface MisbehavedAnswer {
  endpointId: string;
  bytesSent: number;
  closedByClient: boolean;
}

const STATUS_TEXT: Record<number, string> = {
  404: 'no such subscription',
  410: 'push subscription has unsubscribed or expired',
  413: 'payload too large',
  429: 'too many requests',
  500: 'internal server error',
  503: 'service unavailable',
};

export class PushService {
  /** An https.Agent trusting the loopback certificate: pass it as web-push's `agent` option. */
  readonly agent = new https.Agent({ ca: LOOPBACK_CA });
  /** The loopback certificate (PEM), for clients that bring their own TLS settings. */
  readonly ca = LOOPBACK_CA;

  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();
  private port = 0;
  private readonly registrations = new Map<string, Registration>();
  private deliveries: ReceivedPush[] = [];
  private rejected: PushRejection[] = [];
  private attempted: PushAttempt[] = [];
  private misbehavedAnswers: MisbehavedAnswer[] = [];
  private jwts = new Set<string>();
  private ratio = { ratio: 0, status: 500, headers: {} as Record<string, string> };
  private readonly events = new EventEmitter();
  private sequence = 0;

  private constructor() {
    this.events.setMaxListeners(0);
    const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) res.writeHead(500).end(String(err));
      });
    };
    const plain = http.createServer(handler);
    const secure = https.createServer({ key: LOOPBACK_KEY, cert: LOOPBACK_CA }, handler);
    secure.on('tlsClientError', () => undefined);
    this.server = net.createServer((socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
      socket.on('error', () => undefined);
      // A TLS ClientHello starts with the handshake record type 0x16; anything else is plain HTTP.
      socket.once('data', (first: Buffer) => {
        socket.pause();
        socket.unshift(first);
        (first[0] === 0x16 ? secure : plain).emit('connection', socket);
        process.nextTick(() => socket.resume());
      });
    });
  }

  static async start(): Promise<PushService> {
    const service = new PushService();
    await new Promise<void>((resolve, reject) => {
      service.server.once('error', reject);
      service.server.listen(0, '127.0.0.1', () => resolve());
    });
    service.port = (service.server.address() as net.AddressInfo).port;
    return service;
  }

  /** The service's origin, which is also the VAPID audience: `https://127.0.0.1:<port>` (Web Push is HTTPS-only). */
  get origin(): string {
    return `https://127.0.0.1:${this.port}`;
  }

  /** Registers a new subscription, as a browser's pushManager.subscribe() would, and returns its toJSON(). */
  endpoint(name?: string, options: EndpointOptions = {}): SubscriptionJSON {
    const id = `${name ? `${name.replace(/[^A-Za-z0-9_-]/g, '_')}-` : ''}${randomBytes(6).toString('hex')}`;
    const keys = createSubscriptionKeys();
    const url = `${this.origin}/push/${id}`;
    this.registrations.set(id, {
      id,
      name,
      url,
      keys,
      applicationServerKey: options.applicationServerKey,
      script: [],
    });
    return { endpoint: url, expirationTime: null, keys: { p256dh: keys.p256dh, auth: keys.auth } };
  }

  /** The endpoint id (`<id>` in `/push/<id>`) a reference points at. */
  idOf(ref: EndpointRef): string {
    return this.registration(ref).id;
  }

  /** Answers the next requests to the endpoint with these statuses, in order, then behaves normally again. */
  failNext(ref: EndpointRef, statuses: number[], headers: Record<string, string> = {}): void {
    const registration = this.registration(ref);
    for (const status of statuses)
      registration.script.push({ status, headers: withDefaults(status, headers) });
  }

  /** Answers every request to the endpoint with this status until recover(). */
  failAlways(ref: EndpointRef, status: number, headers: Record<string, string> = {}): void {
    this.registration(ref).always = { status, headers: withDefaults(status, headers) };
  }

  /** Clears the endpoint's scripted failures. */
  recover(ref: EndpointRef): void {
    const registration = this.registration(ref);
    registration.script = [];
    registration.always = undefined;
    registration.misbehaviour = undefined;
  }

  /**
   * Takes every valid push to the endpoint (it counts as received at once) but withholds its 201 until
   * releaseAnswers(): a push service slow to answer, so the sender's send is still in flight.
   */
  withholdAnswers(ref: EndpointRef): void {
    this.registration(ref).withheld ??= [];
  }

  /** Sends the withheld 201s and answers the endpoint's pushes at once again. */
  releaseAnswers(ref: EndpointRef): void {
    const registration = this.registration(ref);
    const withheld = registration.withheld ?? [];
    registration.withheld = undefined;
    for (const send of withheld) send();
  }

  /** Misbehaves on the next `times` valid requests to the endpoint (every one until recover() by default). */
  misbehave(ref: EndpointRef, how: Misbehaviour, times = Infinity): void {
    this.registration(ref).misbehaviour = { how, remaining: times };
  }

  /** The misbehaving answers so far, oldest first. */
  misbehaved(ref?: EndpointRef): MisbehavedAnswer[] {
    const id = ref === undefined ? undefined : this.registration(ref).id;
    return this.misbehavedAnswers.filter((m) => id === undefined || m.endpointId === id);
  }

  /** For drills: fails this fraction (0..1) of otherwise-good requests to any endpoint. 0 turns it off. */
  failRatio(ratio: number, status = 500, headers: Record<string, string> = {}): void {
    this.ratio = { ratio, status, headers: withDefaults(status, headers) };
  }

  /** Accepted, decrypted deliveries, oldest first, for one endpoint or all. */
  received(ref?: EndpointRef): ReceivedPush[] {
    const id = ref === undefined ? undefined : this.registration(ref).id;
    return this.deliveries.filter((d) => id === undefined || d.endpointId === id);
  }

  /** Requests refused for breaking the protocol (bad VAPID, encoding, size...), oldest first. */
  rejections(ref?: EndpointRef): PushRejection[] {
    const id = ref === undefined ? undefined : this.registration(ref).id;
    return this.rejected.filter((r) => id === undefined || r.endpointId === id);
  }

  /** Every request with the status it got, scripted failures included, oldest first. */
  attempts(ref?: EndpointRef): PushAttempt[] {
    const id = ref === undefined ? undefined : this.registration(ref).id;
    return this.attempted.filter((a) => id === undefined || a.endpointId === id);
  }

  /** TCP connections open to the service now (a sender's idle keep-alive sockets included). */
  get openConnections(): number {
    return this.sockets.size;
  }

  /** How many different VAPID JWTs have been presented (a sender that caches its JWT keeps this low). */
  get distinctJwtCount(): number {
    return this.jwts.size;
  }

  /** Resolves once `count` deliveries have been accepted (for one endpoint or all); rejects after the timeout. */
  waitFor(count: number, ref?: EndpointRef, timeoutMs = 10_000): Promise<ReceivedPush[]> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const got = this.received(ref);
        if (got.length < count) return false;
        clearTimeout(timer);
        this.events.off('delivery', check);
        resolve(got);
        return true;
      };
      const timer = setTimeout(() => {
        this.events.off('delivery', check);
        reject(
          new Error(
            `push service: ${this.received(ref).length} of ${count} deliveries after ${timeoutMs} ms`,
          ),
        );
      }, timeoutMs);
      if (!check()) this.events.on('delivery', check);
    });
  }

  /** Forgets deliveries, rejections, attempts, JWTs seen, scripted failures and the failure ratio. */
  reset(): void {
    this.deliveries = [];
    this.rejected = [];
    this.attempted = [];
    this.misbehavedAnswers = [];
    this.jwts = new Set();
    this.ratio = { ratio: 0, status: 500, headers: {} };
    for (const registration of this.registrations.values()) {
      registration.script = [];
      registration.always = undefined;
      registration.misbehaviour = undefined;
    }
  }

  async close(): Promise<void> {
    this.agent.destroy();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private misbehaveOn(endpointId: string, res: http.ServerResponse, how: Misbehaviour): void {
    const record: MisbehavedAnswer = { endpointId, bytesSent: 0, closedByClient: false };
    this.misbehavedAnswers.push(record);
    res.writeHead(201, { 'content-type': 'text/plain' });
    let timer: NodeJS.Timeout | undefined;
    res.on('close', () => {
      clearInterval(timer);
      record.closedByClient = !res.writableFinished;
    });
    if ('trickleEveryMs' in how) {
      timer = setInterval(() => {
        record.bytesSent += 1;
        res.write('.');
      }, how.trickleEveryMs);
      return;
    }
    const chunk = Buffer.alloc(16 * 1024, 'x');
    const pump = (): void => {
      while (!res.destroyed) {
        record.bytesSent += chunk.length;
        if (!res.write(chunk)) {
          res.once('drain', pump);
          return;
        }
      }
    };
    pump();
  }

  private registration(ref: EndpointRef): Registration {
    const key = typeof ref === 'string' ? ref : ref.endpoint;
    const direct = this.registrations.get(key);
    if (direct) return direct;
    for (const registration of this.registrations.values()) {
      if (registration.url === key || registration.name === key) return registration;
    }
    throw new Error(`push service: no endpoint ${JSON.stringify(key)}`);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { body, size } = await readBody(req);
    const at = new Date();
    const match = /^\/push\/([A-Za-z0-9_-]+)$/.exec(new URL(req.url ?? '/', this.origin).pathname);
    const registration = match ? this.registrations.get(match[1]) : undefined;
    const endpointId = registration?.id;

    const answer = (status: number, outcome: string, headers: Record<string, string> = {}, text?: string) => {
      this.attempted.push({ endpointId, status, outcome, at });
      res.writeHead(status, { 'content-type': 'text/plain', ...headers });
      res.end(text ?? STATUS_TEXT[status] ?? outcome);
    };
    const reject = (status: number, reason: string) => {
      this.rejected.push({ endpointId, status, reason, at });
      answer(status, reason);
    };

    if (req.method !== 'POST') return reject(405, `method ${req.method} is not POST`);
    if (!registration) return reject(404, `no subscription at ${req.url}`);

    let vapid: VerifiedVapid;
    try {
      const presented = parseAuthorization(req);
      this.jwts.add(presented.jwt);
      // The audience is the origin the sender addressed: https plus the Host it named (127.0.0.1 or localhost).
      vapid = verifyVapid(
        presented.jwt,
        presented.publicKey,
        `https://${req.headers.host ?? ''}`,
        Math.floor(at.getTime() / 1000),
      );
      if (registration.applicationServerKey && registration.applicationServerKey !== vapid.publicKey) {
        throw new Rejection(403, 'k is not the applicationServerKey this subscription was made with');
      }
    } catch (err) {
      if (err instanceof Rejection) return reject(err.status, err.message);
      throw err;
    }

    const ttlHeader = req.headers.ttl;
    if (ttlHeader === undefined || !/^\d+$/.test(String(ttlHeader).trim())) {
      return reject(400, `TTL header missing or not a non-negative integer (${JSON.stringify(ttlHeader)})`);
    }
    const urgency = req.headers.urgency as string | undefined;
    if (urgency !== undefined && !URGENCIES.includes(urgency)) return reject(400, `bad Urgency ${urgency}`);
    const topic = req.headers.topic as string | undefined;
    if (topic !== undefined && !/^[A-Za-z0-9_-]{1,32}$/.test(topic)) return reject(400, `bad Topic ${topic}`);
    const encoding = req.headers['content-encoding'];
    if (encoding !== 'aes128gcm') {
      return reject(400, `Content-Encoding must be aes128gcm, not ${JSON.stringify(encoding)}`);
    }
    if (size === 0) return reject(400, 'empty body');
    if (size > MAX_PUSH_BODY) return reject(413, `body is ${size} bytes, over ${MAX_PUSH_BODY}`);

    const misbehaviour = registration.misbehaviour;
    if (misbehaviour && misbehaviour.remaining > 0) {
      misbehaviour.remaining--;
      this.attempted.push({ endpointId, status: 201, outcome: 'misbehaved', at });
      return this.misbehaveOn(registration.id, res, misbehaviour.how);
    }
    const scripted = registration.script.shift() ?? registration.always;
    if (scripted) return answer(scripted.status, 'scripted', scripted.headers);
    if (this.ratio.ratio > 0 && Math.random() < this.ratio.ratio) {
      return answer(this.ratio.status, 'scripted', this.ratio.headers);
    }

    let rawText: string;
    try {
      const { privateKey, p256dh, auth } = registration.keys;
      rawText = decryptAes128gcm(body, privateKey, p256dh, auth).toString('utf8');
    } catch (err) {
      return reject(400, `decryption failed: ${(err as Error).message}`);
    }
    let payload: unknown;
    try {
      payload = JSON.parse(rawText);
    } catch {
      return reject(400, `the decrypted payload is not JSON: ${rawText.slice(0, 80)}`);
    }

    this.deliveries.push({
      endpointId: registration.id,
      endpoint: registration.url,
      name: registration.name,
      payload,
      rawText,
      headers: { ttl: Number(ttlHeader), urgency, topic },
      vapidPublicKey: vapid.publicKey,
      jwt: vapid.jwt,
      claims: vapid.claims,
      tls: (req.socket as { encrypted?: boolean }).encrypted === true,
      at,
    });
    const messageId = `m${++this.sequence}`;
    const accept = () =>
      answer(
        201,
        'accepted',
        { location: `${this.origin}/message/${messageId}`, ttl: String(ttlHeader) },
        '',
      );
    if (registration.withheld) registration.withheld.push(accept);
    else accept();
    this.events.emit('delivery');
  }
}

/** Starts a push service on a free loopback port. Close it with close(). */
export function startPushService(): Promise<PushService> {
  return PushService.start();
}

function withDefaults(status: number, headers: Record<string, string>): Record<string, string> {
  const hasRetryAfter = Object.keys(headers).some((h) => h.toLowerCase() === 'retry-after');
  return status === 429 && !hasRetryAfter ? { ...headers, 'retry-after': '1' } : { ...headers };
}

/** The body (kept only up to the limit, so an oversized one is answered 413 without buffering it) and its size. */
function readBody(req: http.IncomingMessage): Promise<{ body: Buffer; size: number }> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_PUSH_BODY) chunks.push(chunk);
    });
    req.on('end', () => resolve({ body: Buffer.concat(chunks), size }));
    req.on('error', reject);
  });
}

/**
 * A push as the person sees it: the payload without its receipt and action tokens, which each fan-out attempt mints
 * afresh for the device (so a repeat after a crash is the same notification with other tokens).
 */
export function notificationOf(payload: unknown): Record<string, unknown> {
  const { actions } = payload as { actions?: { token?: string }[] };
  return {
    ...(payload as Record<string, unknown>),
    receipt: undefined,
    ...(actions ? { actions: actions.map((action) => ({ ...action, token: undefined })) } : {}),
  };
}
