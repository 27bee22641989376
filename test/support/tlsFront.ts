// A loopback TLS front for the Temporal dev server (which has no TLS of its own): an HTTP/2 TLS server that
// requires a client certificate from a test CA (mTLS) and relays every gRPC call, headers, body and trailers, to
// the dev server in plaintext, recording the `authorization` metadata each call carried. What a secured cluster or
// Temporal Cloud's frontend looks like to the SDK.
//
// testPki() makes the certificates with the openssl command line: a CA, a server certificate for `localhost` and
// 127.0.0.1, a client certificate from that CA, and a client certificate from another CA (to be refused).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface TestPki {
  dir: string;
  /** PEM file paths */
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  /** A client pair signed by a CA the front does not trust. */
  strangerCertFile: string;
  strangerKeyFile: string;
  remove(): void;
}

function openssl(dir: string, args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

function makeCa(dir: string, name: string): void {
  openssl(dir, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key`]);
  openssl(dir, [
    'req', '-x509', '-new', '-key', `${name}.key`, '-sha256', '-days', '2', '-subj', `/CN=${name}`,
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
    '-out', `${name}.pem`,
  ]); // prettier-ignore
}

function makeLeaf(dir: string, ca: string, name: string, extensions: string): void {
  openssl(dir, ['ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', `${name}.key.sec1`]);
  // PKCS#8: what every TLS stack reads (the SDK's rustls included).
  openssl(dir, ['pkcs8', '-topk8', '-nocrypt', '-in', `${name}.key.sec1`, '-out', `${name}.key`]);
  openssl(dir, ['req', '-new', '-key', `${name}.key`, '-subj', `/CN=${name}`, '-out', `${name}.csr`]);
  writeFileSync(path.join(dir, `${name}.ext`), `basicConstraints=CA:FALSE\n${extensions}\n`);
  openssl(dir, [
    'x509', '-req', '-in', `${name}.csr`, '-CA', `${ca}.pem`, '-CAkey', `${ca}.key`, '-CAcreateserial',
    '-days', '2', '-sha256', '-extfile', `${name}.ext`, '-out', `${name}.pem`,
  ]); // prettier-ignore
}

export function testPki(): TestPki {
  const dir = mkdtempSync(path.join(tmpdir(), 'flow-notify-pki-'));
  makeCa(dir, 'test-ca');
  makeCa(dir, 'stranger-ca');
  makeLeaf(
    dir,
    'test-ca',
    'server',
    'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth',
  );
  makeLeaf(dir, 'test-ca', 'client', 'extendedKeyUsage=clientAuth');
  makeLeaf(dir, 'stranger-ca', 'stranger', 'extendedKeyUsage=clientAuth');
  const file = (name: string) => path.join(dir, name);
  return {
    dir,
    caFile: file('test-ca.pem'),
    serverCertFile: file('server.pem'),
    serverKeyFile: file('server.key'),
    clientCertFile: file('client.pem'),
    clientKeyFile: file('client.key'),
    strangerCertFile: file('stranger.pem'),
    strangerKeyFile: file('stranger.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface TlsFront {
  /** host:port to give as TEMPORAL_ADDRESS */
  address: string;
  /** The `authorization` metadata of every call, in order (undefined when a call had none). */
  readonly authorizations: (string | undefined)[];
  /** Calls relayed, per client certificate subject CN. */
  readonly callsByClient: Map<string, number>;
  /** TLS handshakes refused (no client certificate, or one from another CA). */
  readonly refused: string[];
  close(): Promise<void>;
}

const HOP_BY_HOP = new Set([':scheme', ':authority', 'connection', 'keep-alive', 'host']);

export async function startTlsFront(upstreamAddress: string, pki: TestPki): Promise<TlsFront> {
  const authorizations: (string | undefined)[] = [];
  const callsByClient = new Map<string, number>();
  const refused: string[] = [];
  const upstream = http2.connect(`http://${upstreamAddress}`);
  upstream.on('error', () => undefined);
  const server = http2.createSecureServer({
    key: readFileSync(pki.serverKeyFile),
    cert: readFileSync(pki.serverCertFile),
    ca: readFileSync(pki.caFile),
    requestCert: true,
    rejectUnauthorized: true,
  });
  server.on('tlsClientError', (err) => refused.push(err.message));
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream, headers) => {
    const auth = headers.authorization;
    authorizations.push(Array.isArray(auth) ? auth.join(',') : auth);
    const socket = stream.session?.socket as import('node:tls').TLSSocket | undefined;
    const cn = String(socket?.getPeerCertificate?.().subject?.CN ?? '?');
    callsByClient.set(cn, (callsByClient.get(cn) ?? 0) + 1);

    const forward: http2.OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(headers)) if (!HOP_BY_HOP.has(name)) forward[name] = value;
    const up = upstream.request(forward);
    let trailers: http2.IncomingHttpHeaders = {};
    let ended = false;
    up.on('response', (response) => {
      if (stream.destroyed) return;
      // A gRPC "trailers-only" answer (an error with no body) ends with its headers.
      ended = response['grpc-status'] !== undefined;
      stream.respond({ ...response }, ended ? { endStream: true } : { waitForTrailers: true });
    });
    up.on('trailers', (t) => (trailers = t));
    stream.on('wantTrailers', () => {
      const out: http2.OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(trailers)) if (!name.startsWith(':')) out[name] = value;
      stream.sendTrailers(out);
    });
    up.on('data', (chunk: Buffer) => {
      if (!stream.destroyed && stream.headersSent && !ended) stream.write(chunk);
    });
    up.on('end', () => {
      if (!stream.destroyed && stream.headersSent && !ended && !stream.writableEnded) stream.end();
    });
    up.on('error', () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    stream.on('data', (chunk: Buffer) => up.write(chunk));
    stream.on('end', () => up.end());
    stream.on('close', () => {
      if (!up.closed) up.close(http2.constants.NGHTTP2_CANCEL);
    });
    stream.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    authorizations,
    callsByClient,
    refused,
    async close() {
      for (const session of sessions) session.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      upstream.destroy();
    },
  };
}
