// A DNS server on loopback UDP for the guard's resolver: it answers A queries for the names it was given, answers
// NXDOMAIN for the others, and never answers a name under a hung suffix (an attacker's slow authoritative server,
// as a recursive resolver passes it on). Only what a stub resolver's query needs (RFC 1035 4.1).
import dgram from 'node:dgram';

export interface DnsServer {
  /** host:port, as Resolver.setServers takes it. */
  address: string;
  /** Questions received, by name. */
  asked(name: string): number;
  close(): Promise<void>;
}

export async function startDnsServer(options: {
  answers: Record<string, string>;
  hungSuffix: string;
}): Promise<DnsServer> {
  const socket = dgram.createSocket('udp4');
  const asked = new Map<string, number>();
  socket.on('message', (query, from) => {
    const { name, end } = questionOf(query);
    asked.set(name, (asked.get(name) ?? 0) + 1);
    if (name.endsWith(options.hungSuffix)) return;
    const qtype = query.readUInt16BE(end);
    const address = options.answers[name];
    const answer = address !== undefined && qtype === 1 ? aRecord(address) : Buffer.alloc(0);
    const header = Buffer.from(query.subarray(0, 12));
    // QR, opcode as asked, RD kept, RA; RCODE 3 (NXDOMAIN) for a name it does not hold.
    header.writeUInt16BE(0x8180 | (query.readUInt16BE(2) & 0x0100) | (address === undefined ? 3 : 0), 2);
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(answer.length ? 1 : 0, 6); // ANCOUNT
    header.writeUInt32BE(0, 8); // NSCOUNT, ARCOUNT
    socket.send(Buffer.concat([header, query.subarray(12, end + 4), answer]), from.port, from.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    asked: (name) => asked.get(name) ?? 0,
    close: () => new Promise((resolve) => socket.close(() => resolve())),
  };
}

/** The question's name (lower case, no trailing dot) and where its QTYPE starts. */
function questionOf(query: Buffer): { name: string; end: number } {
  const labels: string[] = [];
  let at = 12;
  while (query[at] !== 0) {
    labels.push(query.subarray(at + 1, at + 1 + query[at]).toString('latin1'));
    at += 1 + query[at];
  }
  return { name: labels.join('.').toLowerCase(), end: at + 1 };
}

/** One A record for the question's name (a pointer to offset 12), a minute's TTL. */
function aRecord(address: string): Buffer {
  const record = Buffer.alloc(16);
  record.writeUInt16BE(0xc00c, 0);
  record.writeUInt16BE(1, 2); // TYPE A
  record.writeUInt16BE(1, 4); // CLASS IN
  record.writeUInt32BE(60, 6);
  record.writeUInt16BE(4, 10);
  address.split('.').forEach((octet, i) => record.writeUInt8(Number(octet), 12 + i));
  return record;
}
