// A TCP port free now on a host, for servers that must be told a port up front (the embedded stack's, the Temporal
// SDK's metrics exporter, which cannot report the one it got). A port from bind(0) comes from the kernel's ephemeral
// range, where every outbound connection takes its local port too: between its release here and the server's own
// bind, one of the many connections a busy process opens could take it (the server then fails with EADDRINUSE).
// So ports are drawn at random below that range, each checked free by binding it.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

/** The lowest port drawn: above the well-known and most registered ones. */
const DRAW_FROM = 10_000;
const DRAWS = 50;

/** Where the kernel's ephemeral ports start (Linux); undefined where it does not say. */
function ephemeralStart(): number | undefined {
  try {
    const low = Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    return Number.isInteger(low) ? low : undefined;
  } catch {
    return undefined;
  }
}

/** Binds `port` and releases it: the port bound, or undefined when it is taken (or not ours to take). */
function bindAndRelease(port: number, host: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', (err: NodeJS.ErrnoException) =>
      err.code === 'EADDRINUSE' || err.code === 'EACCES' ? resolve(undefined) : reject(err),
    );
    server.listen(port, host, () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : undefined));
    });
  });
}

export async function freePort(host = '127.0.0.1'): Promise<number> {
  const below = ephemeralStart();
  if (below !== undefined && below > DRAW_FROM) {
    for (let draw = 0; draw < DRAWS; draw++) {
      const port = await bindAndRelease(DRAW_FROM + Math.floor(Math.random() * (below - DRAW_FROM)), host);
      if (port !== undefined) return port;
    }
  }
  const port = await bindAndRelease(0, host);
  if (port === undefined) throw new Error(`no free port on ${host}`);
  return port;
}
