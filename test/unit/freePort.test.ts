// freePort hands out ports a server can still bind a moment later: not from the kernel's ephemeral range, where
// every outbound connection takes its local port (a suite opens thousands), so none can take it in between.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { freePort } from '../../platform/freePort';

const EPHEMERAL_RANGE = '/proc/sys/net/ipv4/ip_local_port_range';

const bind = (port: number): Promise<void> =>
  new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => server.close(() => resolve()));
  });

describe('freePort', () => {
  it("draws ports below the kernel's ephemeral range, each free to bind", async function () {
    const [low] = readFileSync(EPHEMERAL_RANGE, 'utf8').trim().split(/\s+/).map(Number);
    const ports = await Promise.all(Array.from({ length: 50 }, () => freePort()));
    for (const port of ports) {
      assert.ok(port < low, `${port} is in the ephemeral range (from ${low})`);
      await bind(port);
    }
    assert.ok(new Set(ports).size > 40, `${new Set(ports).size} distinct of 50: drawn at random`);
  });
});
