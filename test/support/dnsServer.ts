// A DNS server on loopback UDP for the guard's resolver: it answers A queries for the names it was given, answers
// NXDOMAIN for the others, and never answers a name under a hung suffix (an attacker's slow authoritative server,
// as a recursive resolver passes it on). Only what a stub resolver's query needs (RFC 1035 4.1).
import dgram from 'node:dgram';
import net from 'node:net';

export interface DnsServer {
  /** host:port, as Resolver.setServers takes it. */
  address: string;
  /** Questions received, by name. */
  asked(name: string): number;
  close(): Promise<void>;
}

export async function startDnsServer(options: {
  /** Per name, its addresses: IPv4 ones answer A questions, IPv6 ones AAAA. */
  answers: Record<string, string[]>;
  hungSuffix: string;
}): Promise<DnsServer> {
  const socket = dgram.createSocket('udp4');
  const asked = new Map<string, number>();
  socket.on('message', (query, from) => {
    const { name, end } = questionOf(query);
    asked.set(name, (asked.get(name) ?? 0) + 1);
    if (name.endsWith(options.hungSuffix)) return;
    const qtype = query.readUInt16BE(end);
    const addresses = options.answers[name];
    const records = (addresses ?? [])
      .filter((address) => net.isIP(address) === (qtype === 28 ? 6 : qtype === 1 ? 4 : 0))
      .map(addressRecord);
    const header = Buffer.from(query.subarray(0, 12));
    // QR, opcode as asked, RD kept, RA; RCODE 3 (NXDOMAIN) for a name it does not hold.
    header.writeUInt16BE(0x8180 | (query.readUInt16BE(2) & 0x0100) | (addresses === undefined ? 3 : 0), 2);
    header.writeUInt16BE(1, 4); // QDCOUNT
    header.writeUInt16BE(records.length, 6); // ANCOUNT
    header.writeUInt32BE(0, 8); // NSCOUNT, ARCOUNT
    socket.send(Buffer.concat([header, query.subarray(12, end + 4), ...records]), from.port, from.address);
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

/** One A or AAAA record for the question's name (a pointer to offset 12), a minute's TTL. */
function addressRecord(address: string): Buffer {
  const v6 = net.isIP(address) === 6;
  const data = v6 ? ipv6Bytes(address) : Buffer.from(address.split('.').map(Number));
  const record = Buffer.alloc(12 + data.length);
  record.writeUInt16BE(0xc00c, 0);
  record.writeUInt16BE(v6 ? 28 : 1, 2); // TYPE AAAA or A
  record.writeUInt16BE(1, 4); // CLASS IN
  record.writeUInt32BE(60, 6);
  record.writeUInt16BE(data.length, 10);
  data.copy(record, 12);
  return record;
}

/** The 16 bytes of an IPv6 address (:: expanded). */
function ipv6Bytes(address: string): Buffer {
  const [head, tail = ''] = address.split('::');
  const groups = (part: string) => (part ? part.split(':') : []);
  const missing = 8 - groups(head).length - groups(tail).length;
  const all = [
    ...groups(head),
    ...Array<string>(address.includes('::') ? missing : 0).fill('0'),
    ...groups(tail),
  ];
  const bytes = Buffer.alloc(16);
  all.forEach((group, i) => bytes.writeUInt16BE(parseInt(group, 16), i * 2));
  return bytes;
}
