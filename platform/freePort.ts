// A TCP port free now on a host: bound at port 0, read, released. For servers that must be told a port up front
// (the embedded stack's, the Temporal SDK's metrics exporter, which cannot report the one it got).
import { createServer } from 'node:net';

export async function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, host, () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}
