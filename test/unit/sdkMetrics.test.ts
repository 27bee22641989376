// The worker's read of the SDK's exporter: a size cap that stops the read, a whole deadline.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readSdkMetrics } from '../../platform/sdkMetrics';

/** A loopback exporter that answers with `write(res)`; counts the bytes it managed to send. */
async function exporter(
  write: (res: import('node:http').ServerResponse, sent: { bytes: number }) => void,
): Promise<{ url: string; sent: { bytes: number }; server: Server }> {
  const sent = { bytes: 0 };
  const server = createServer((_req, res) => write(res, sent));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/metrics`, sent, server };
}

const close = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

describe('SDK metrics read', () => {
  it('stops reading once the cap is passed, long before the deadline, however long the answer', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'a');
    const { url, sent, server } = await exporter((res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      // Forever, as fast as the reader takes it.
      const pump = (): void => {
        while (res.write(chunk)) sent.bytes += chunk.length;
        sent.bytes += chunk.length;
        res.once('drain', pump);
      };
      res.on('close', () => res.removeAllListeners('drain'));
      pump();
    });
    try {
      const started = Date.now();
      const text = await readSdkMetrics(url, 256 * 1024, 5000);
      const took = Date.now() - started;
      assert.match(text, /^# the Temporal SDK's metrics could not be read: .*256 KiB/);
      assert.ok(took < 2000, `took ${took} ms`);
    } finally {
      await close(server);
    }
  });

  it('an answer under the cap is returned whole; a silent exporter meets the deadline', async () => {
    const body = '# HELP temporal_x x\ntemporal_x 1\n';
    const small = await exporter((res) => res.end(body));
    const silent = await exporter(() => undefined);
    try {
      assert.equal(await readSdkMetrics(small.url, 1024, 2000), body);
      const started = Date.now();
      assert.match(await readSdkMetrics(silent.url, 1024, 300), /could not be read: .*(timeout|aborted)/i);
      assert.ok(Date.now() - started < 1500);
    } finally {
      await close(small.server);
      await close(silent.server);
    }
  });
});
