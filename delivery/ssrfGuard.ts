// The outbound-URL guard shared by callbacks and web push endpoints. The outbound callback has no role gate, so
// this is its whole authorization decision:
//
//   1. http or https only, no credentials in the URL;
//   2. exactly one resolution of the host (IP literals are not resolved), failing closed on error or no answer: a
//      name that does not exist is a refusal, a resolver that could not answer (SERVFAIL, timeout...) is not
//      (ResolverUnavailableError: nothing is sent, and the caller retries later);
//   3. every answer must be public unicast (or, with allowPrivate, at least not a never-allowed address);
//   4. the first validated address is pinned into a per-delivery agent, so the connection cannot be re-resolved
//      to somewhere else (DNS rebinding), while Host, SNI and the certificate check keep the original name;
//   5. redirects are never followed, so no 3xx hop re-opens the rebinding window.
import dns from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import type { DeliveryCategory } from '../domain/callback';
import { withDeadline } from '../platform/deadline';

export class TargetRefusedError extends Error {
  override name = 'TargetRefusedError';
  // The URL itself is not kept: a refused one may carry credentials, and errors end up in logs.
  constructor(
    /** A short sentence saying why, for operator logs (it may name internal addresses). */
    readonly reason: string,
    /** What the run's owner is shown. */
    readonly category: DeliveryCategory = 'refused: not allowed',
  ) {
    super(`outbound target refused: ${reason}`);
  }
}

/**
 * The resolver could not answer now (EAI_AGAIN, SERVFAIL, a timeout, an unknown error): not a verdict on the
 * target, so never a refusal. Nothing was sent; try again later.
 */
export class ResolverUnavailableError extends Error {
  override name = 'ResolverUnavailableError';
  readonly category: DeliveryCategory = 'dns: temporary failure';
  constructor(
    /** The resolver's error code (EAI_AGAIN, ESERVFAIL, ETIMEOUT...), or 'unknown'. */
    readonly code: string,
  ) {
    super(`resolver unavailable (${code})`);
  }
}

/** The answers that say the name does not exist (NXDOMAIN, no address record): a verdict, not a hiccup. */
const NAME_DOES_NOT_EXIST = new Set(['ENOTFOUND', 'ENODATA']);

/** A lookup slower than this counts as a resolver failure (the system resolver can wait 30 s and more). */
export const DEFAULT_LOOKUP_TIMEOUT_MS = 5_000;

export interface ResolvedAddress {
  address: string;
  family: number;
}

export type HostLookup = (hostname: string) => Promise<ResolvedAddress[]>;

export interface CheckOptions {
  /** CALLBACK_ALLOW_PRIVATE / PUSH_ALLOW_PRIVATE: let loopback and private receivers through. */
  allowPrivate?: boolean;
  /** Injected for tests; the default asks the system resolver once for every address. */
  lookup?: HostLookup;
  /** A lookup still pending after this is a ResolverUnavailableError (ETIMEOUT). Default 5 s. */
  lookupTimeoutMs?: number;
}

export interface CheckedTarget {
  url: URL;
  /** The validated address every connection of this delivery goes to. */
  address: string;
  family: 4 | 6;
}

/** How long one DNS server is given per try, and how many tries: inside the check's own deadline. */
const DNS_TRY_MS = 1_500;
const DNS_TRIES = 2;

/**
 * Asks DNS itself (c-ares, on the event loop), never the system resolver (getaddrinfo, on Node's thread pool of
 * four): a name an attacker's server answers slowly holds a thread for as long as the system resolver waits, long
 * after the check gave up, and four of them held every other tenant's lookup (and the process's file reads) behind
 * them. So /etc/hosts and search domains are not read; `localhost` and its subdomains are loopback (RFC 6761).
 * `servers`: host:port of the DNS servers to ask (absent: the system's, from /etc/resolv.conf).
 */
export function resolverLookup(options: { servers?: string[]; preferIpv6?: boolean } = {}): HostLookup {
  const resolver = new dns.promises.Resolver({ timeout: DNS_TRY_MS, tries: DNS_TRIES });
  if (options.servers) resolver.setServers(options.servers);
  const ipv6First = options.preferIpv6 ?? hostHasGlobalIpv6();
  return async (hostname) => {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    if (name === 'localhost' || name.endsWith('.localhost'))
      return [
        { address: '127.0.0.1', family: 4 },
        { address: '::1', family: 6 },
      ];
    const [v4, v6] = await Promise.allSettled([resolver.resolve4(name), resolver.resolve6(name)]);
    const fours = v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : [];
    const sixes = v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : [];
    // The first is the one connected to: of the family this host can reach, as getaddrinfo's order had it.
    const answers = ipv6First ? [...sixes, ...fours] : [...fours, ...sixes];
    if (answers.length) return answers;
    // No address at all: the name's own verdict (NXDOMAIN, no records) only when both families agree on one.
    const codes = [v4, v6].map((r) => (r.status === 'rejected' ? errorCode(r.reason) : 'ENODATA'));
    const code = codes.find((c) => !NAME_DOES_NOT_EXIST.has(c)) ?? codes[0];
    throw Object.assign(new Error(`dns ${code} ${name}`), { code, hostname: name });
  };
}

/**
 * Whether this host has a global IPv6 address (not loopback, not link-local): then IPv6 answers come first, as in
 * getaddrinfo's RFC 6724 order; without one (most containers), IPv4 first, which an IPv6-less host can reach.
 */
function hostHasGlobalIpv6(): boolean {
  return Object.values(os.networkInterfaces())
    .flat()
    .some((i) => i !== undefined && i.family === 'IPv6' && !i.internal && !/^fe[89ab]/i.test(i.address));
}

export const systemLookup: HostLookup = resolverLookup();

type Verdict = 'public' | 'internal' | 'never';

// One list per family: a BlockList checks IPv4 addresses against IPv6 rules through their IPv4-mapped form, so a
// ::ffff:0:0/96 rule in a shared list would match every IPv4 address.
function blockList(family: 'ipv4' | 'ipv6', subnets: string[]): net.BlockList {
  const list = new net.BlockList();
  for (const subnet of subnets) {
    const [prefix, bits] = subnet.split('/');
    list.addSubnet(prefix, Number(bits), family);
  }
  return list;
}

// Loopback comes first: ::1 sits inside the IPv4-compatible ::/96 that is otherwise never allowed.
const LOOPBACK_V4 = blockList('ipv4', ['127.0.0.0/8']);
const LOOPBACK_V6 = blockList('ipv6', ['::1/128']);

// Refused even with allowPrivate: there is no legitimate receiver behind these. Unspecified and broadcast and
// multicast addresses are not a single host; link-local holds the cloud metadata service (169.254.169.254), and
// the clouds that serve it elsewhere are listed by address; the IPv6 forms that embed or tunnel to an IPv4
// address (mapped, compatible, NAT64, 6to4, Teredo) would reach an IPv4 host this check never classified.
const NEVER_V4 = blockList('ipv4', [
  '0.0.0.0/8',
  '100.100.100.200/32', // Alibaba Cloud metadata (inside CGNAT, which allowPrivate otherwise lets through)
  '168.63.129.16/32', // Azure WireServer (a public address, answered only inside Azure)
  '169.254.0.0/16',
  '192.0.0.192/32', // Oracle Cloud metadata (inside the IETF protocol block)
  '224.0.0.0/4',
  '240.0.0.0/4', // reserved, includes 255.255.255.255 broadcast
]);
const NEVER_V6 = blockList('ipv6', [
  '::/96', // unspecified ::/128 and IPv4-compatible (::1 was let through above as loopback)
  '::ffff:0:0/96',
  '64:ff9b::/96',
  '64:ff9b:1::/48',
  '100::/64', // discard-only
  'fd00:ec2::/64', // AWS instance metadata, DNS and time over IPv6 (inside unique-local)
  'fd20:ce::254/128', // Google Cloud metadata over IPv6
  '2001::/32', // Teredo
  '2002::/16', // 6to4
  'fe80::/10',
  'ff00::/8',
]);

// Not public, but a deliberate private receiver may live here (allowPrivate).
const INTERNAL_V4 = blockList('ipv4', [
  '10.0.0.0/8',
  '100.64.0.0/10', // CGNAT
  '172.16.0.0/12',
  '192.0.0.0/24', // IETF protocol assignments
  '192.0.2.0/24', // TEST-NET-1
  '192.88.99.0/24', // 6to4 relay anycast
  '192.168.0.0/16',
  '198.18.0.0/15', // benchmarking
  '198.51.100.0/24', // TEST-NET-2
  '203.0.113.0/24', // TEST-NET-3
]);
const INTERNAL_V6 = blockList('ipv6', [
  'fc00::/7', // unique-local
  'fec0::/10', // deprecated site-local
  '2001:2::/48', // benchmarking
  '2001:10::/28', // ORCHID
  '2001:20::/28', // ORCHIDv2
  '2001:db8::/32', // documentation
  '3fff::/20', // documentation (RFC 9637)
]);

// Global unicast is allocated only from 2000::/3; anything else that got this far is unassigned.
const GLOBAL_UNICAST_V6 = blockList('ipv6', ['2000::/3']);

function classify(address: string, family: 4 | 6): Verdict {
  if (family === 4) {
    if (LOOPBACK_V4.check(address, 'ipv4')) return 'internal';
    if (NEVER_V4.check(address, 'ipv4')) return 'never';
    if (INTERNAL_V4.check(address, 'ipv4')) return 'internal';
    return 'public';
  }
  if (LOOPBACK_V6.check(address, 'ipv6')) return 'internal';
  if (NEVER_V6.check(address, 'ipv6')) return 'never';
  if (INTERNAL_V6.check(address, 'ipv6')) return 'internal';
  if (!GLOBAL_UNICAST_V6.check(address, 'ipv6')) return 'never';
  return 'public';
}

/** The refusal of an address, or undefined when it may be connected to. */
function refusal(address: string, allowPrivate: boolean, verb: string): TargetRefusedError | undefined {
  // A zone id (fe80::1%eth0) names an interface, not a host; BlockList would not match it either.
  const family = address.includes('%') ? 0 : net.isIP(address);
  if (family !== 4 && family !== 6) {
    return new TargetRefusedError(
      `host ${verb} something that is not an IP address (${address})`,
      'refused: dns',
    );
  }
  const verdict = classify(address, family);
  if (verdict === 'public') return undefined;
  if (verdict === 'internal' && allowPrivate) return undefined;
  if (verdict === 'never' && allowPrivate) {
    return new TargetRefusedError(
      `host ${verb} an unspecified, multicast, link-local, cloud metadata or IPv4-embedding address (${address})`,
      'refused: private address',
    );
  }
  return new TargetRefusedError(
    `host ${verb} a private or reserved address (${address})`,
    'refused: private address',
  );
}

/** The resolver's code of a lookup error ('unknown' when it has none). */
function errorCode(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code !== '' ? code : 'unknown';
}

/** One lookup, bounded in time: a resolver that hangs is unavailable, not a verdict. */
async function boundedLookup(
  lookup: HostLookup,
  host: string,
  timeoutMs: number,
): Promise<ResolvedAddress[]> {
  try {
    return await withDeadline(lookup(host), timeoutMs, () => {
      throw new ResolverUnavailableError('ETIMEOUT');
    });
  } catch (err) {
    if (err instanceof ResolverUnavailableError) throw err;
    const code = errorCode(err);
    if (NAME_DOES_NOT_EXIST.has(code))
      throw new TargetRefusedError(`host did not resolve (${code})`, 'refused: dns');
    throw new ResolverUnavailableError(code);
  }
}

/** URL.hostname keeps the brackets of an IPv6 literal; connect() and BlockList want them off. */
function bareHost(url: URL): string {
  return url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
}

/**
 * Validates an outbound URL and picks the one address to connect to. Rejects with TargetRefusedError (a verdict:
 * scheme, credentials, address, a name that does not exist) or ResolverUnavailableError (no verdict yet).
 * Resolves the host at most once; the returned address is what pinnedAgent/postPinned connect to.
 */
export async function checkCallbackTarget(url: string, opts: CheckOptions = {}): Promise<CheckedTarget> {
  const allowPrivate = opts.allowPrivate ?? false;
  const lookup = opts.lookup ?? systemLookup;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TargetRefusedError('not a valid URL', 'refused: invalid url');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new TargetRefusedError('scheme must be http or https', 'refused: invalid url');
  }
  // Credentials would be sent to whoever answers, and user@host is a classic way to disguise the real host.
  if (parsed.username !== '' || parsed.password !== '') {
    throw new TargetRefusedError('URL carries credentials', 'refused: invalid url');
  }
  const host = bareHost(parsed);
  if (host === '') throw new TargetRefusedError('URL has no host', 'refused: invalid url');

  // WHATWG URL has already normalised 2130706433, 0x7f000001, 127.1 and [::ffff:127.0.0.1] to canonical form.
  const literal = net.isIP(host);
  if (literal === 4 || literal === 6) {
    const refused = refusal(host, allowPrivate, 'is');
    if (refused !== undefined) throw refused;
    return { url: parsed, address: host, family: literal };
  }

  const answers = await boundedLookup(lookup, host, opts.lookupTimeoutMs ?? DEFAULT_LOOKUP_TIMEOUT_MS);
  if (!Array.isArray(answers) || answers.length === 0) {
    throw new TargetRefusedError('host did not resolve (no address)', 'refused: dns');
  }
  // Every answer, not just the first: the client library might pick any of them, and an attacker controls the order.
  for (const { address } of answers) {
    const refused = refusal(address, allowPrivate, 'resolves to');
    if (refused !== undefined) throw refused;
  }
  const address = answers[0].address;
  return { url: parsed, address, family: net.isIP(address) === 6 ? 6 : 4 };
}

/** A socket lookup that answers every question with the validated address: the pin itself. */
export function pinnedLookup({ address, family }: CheckedTarget): net.LookupFunction {
  return (_hostname, options, callback) => {
    // With autoSelectFamily (the Node 20 default) net asks for all addresses and expects an array back.
    if (options.all === true) callback(null, [{ address, family }]);
    else callback(null, address, family);
  };
}

export type PinnedAgentOptions = Omit<https.AgentOptions, 'lookup' | 'keepAlive'>;

/**
 * An agent whose every DNS question is answered with the validated address. The request still names the
 * original host, so the Host header, SNI and certificate verification use it; only the TCP dial is pinned.
 */
export function pinnedAgent(target: CheckedTarget, opts: PinnedAgentOptions = {}): http.Agent | https.Agent {
  // keepAlive off: the agent lives for one delivery, and a pooled socket must not outlive the check.
  const options = { ...opts, lookup: pinnedLookup(target), keepAlive: false };
  return target.url.protocol === 'https:' ? new https.Agent(options) : new http.Agent(options);
}

export interface PostOptions {
  headers?: http.OutgoingHttpHeaders;
  body: string | Buffer;
  /** Whole exchange, connect to last body byte. Default 10 s. */
  timeoutMs?: number;
  /** The response body is cut here and the connection dropped. Default 64 KiB. */
  maxResponseBytes?: number;
  /** Extra agent options (e.g. a test CA). */
  agent?: PinnedAgentOptions;
  /**
   * A keep-alive agent already pinned to this target (pinnedLookup) to use instead of a fresh one: it is not
   * destroyed after the exchange, and a socket whose answer was read to the end goes back to it.
   */
  pool?: http.Agent;
}

export interface PinnedResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The receiver sent more than maxResponseBytes. */
  truncated: boolean;
}

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024;

class TimeoutError extends Error {
  override name = 'TimeoutError';
  readonly code = 'ETIMEDOUT';
}

/** What a user is shown of a delivery that failed before any answer: the guard's verdict, the deadline, or else. */
export function failureCategory(err: unknown): DeliveryCategory {
  if (err instanceof TargetRefusedError || err instanceof ResolverUnavailableError) return err.category;
  return err instanceof TimeoutError ? 'timeout' : 'network error';
}

/**
 * One POST to a checked target through its pinned agent. A 3xx is returned as is (http.request never follows
 * redirects; the caller treats it as a failure). Rejects on network error or once timeoutMs has passed.
 */
export function postPinned(target: CheckedTarget, opts: PostOptions): Promise<PinnedResponse> {
  const timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const maxBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const body = typeof opts.body === 'string' ? Buffer.from(opts.body) : opts.body;
  const agent = opts.pool ?? pinnedAgent(target, opts.agent);
  const send = target.url.protocol === 'https:' ? https.request : http.request;

  return new Promise<PinnedResponse>((resolve, reject) => {
    let settled = false;
    const settle = (outcome: () => void): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      outcome();
      if (!opts.pool) agent.destroy();
    };

    const req = send({
      agent,
      method: 'POST',
      hostname: bareHost(target.url),
      port: target.url.port === '' ? undefined : Number(target.url.port),
      path: `${target.url.pathname}${target.url.search}`,
      headers: { ...opts.headers, 'content-length': body.length },
    });

    // Declared after settle, but settle only runs from the handlers attached below it.
    const timer = setTimeout(() => {
      const err = new TimeoutError(`no complete answer within ${timeoutMs} ms`);
      settle(() => reject(err));
      req.destroy(err);
    }, timeoutMs);

    req.on('error', (err) => settle(() => reject(err)));
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      const done = (truncated: boolean): void =>
        settle(() =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            truncated,
          }),
        );
      res.on('data', (chunk: Buffer) => {
        if (settled) return;
        const room = maxBytes - size;
        if (chunk.length <= room) {
          chunks.push(chunk);
          size += chunk.length;
          return;
        }
        // Over the cap: keep what fits and stop reading, so a hostile receiver cannot stream at us forever.
        chunks.push(chunk.subarray(0, room));
        size += room;
        done(true);
        res.destroy();
        req.destroy();
      });
      res.on('end', () => done(false));
      res.on('error', (err) => settle(() => reject(err)));
    });
    req.end(body);
  });
}
