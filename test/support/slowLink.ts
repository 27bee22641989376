// A TCP relay that holds back every byte the far side sends (a slow push service), for tests that must land
// something in the middle of a fan-out.
import net from 'node:net';

/**
 * A TCP relay in front of the push service that delays every byte the service sends back by `delayMs`. TLS
 * passes through untouched (the certificate names 127.0.0.1, and the VAPID audience is the relay's origin, which
 * is the Host the push service sees), so the service still verifies and decrypts every message.
 */
export async function slowLink(targetPort: number, delayMs: number) {
  const sockets = new Set<net.Socket>();
  /** While held, bytes both ways wait here, in order, for release(). */
  let held: (() => void)[] | undefined;
  const pass = (deliver: () => void) => (held ? held.push(deliver) : deliver());
  const server = net.createServer((client) => {
    const upstream = net.connect(targetPort, '127.0.0.1');
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.on('data', (chunk) => pass(() => upstream.write(chunk)));
    // Timers of equal duration fire in the order they were set, so the byte stream keeps its order.
    upstream.on('data', (chunk) =>
      setTimeout(() => pass(() => client.writable && client.write(chunk)), delayMs),
    );
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => setTimeout(() => client.destroy(), delayMs));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    /** Stops every byte both ways (nothing new reaches the service, no answer gets back) until release(). */
    hold() {
      held ??= [];
    },
    release() {
      const waiting = held ?? [];
      held = undefined;
      for (const deliver of waiting) deliver();
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
