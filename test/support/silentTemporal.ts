// A Temporal address that accepts connections and never answers: a partition in which every call without a deadline
// would wait for good.
import net from 'node:net';
import { Client, Connection } from '@temporalio/client';

export interface SilentTemporal {
  client: Client;
  close(): Promise<void>;
}

export async function startSilentTemporal(): Promise<SilentTemporal> {
  const held = new Set<net.Socket>();
  const silent = net.createServer((socket) => void held.add(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const connection = Connection.lazy({ address: `127.0.0.1:${(silent.address() as net.AddressInfo).port}` });
  return {
    client: new Client({ connection }),
    async close() {
      await connection.close().catch(() => undefined);
      for (const socket of held) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    },
  };
}
