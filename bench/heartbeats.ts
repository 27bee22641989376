// The activity heartbeats a workflow's activities sent: Temporal Cloud actions no history shows (operator/actions.ts
// counts the rest), read from the Temporal server's own `action` metric.

/**
 * The activity heartbeats a Temporal server has recorded so far in `namespace`, from the `action` counter its
 * metrics endpoint (`temporal server start-dev --metrics-port`) exports. The server publishes its counters about
 * once a second, so this reads until two reads 1.5 s apart agree (at most ten times). Read before and after a
 * workflow's life, the difference is what its activities sent, when nothing else heartbeats meanwhile.
 */
export async function heartbeatsRecorded(metricsUrl: string, namespace = 'default'): Promise<number> {
  let last = await heartbeatCounter(metricsUrl, namespace);
  for (let read = 1; read < 10; read++) {
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const now = await heartbeatCounter(metricsUrl, namespace);
    if (now === last) return now;
    last = now;
  }
  throw new Error(`${metricsUrl}: the heartbeat count kept moving (${last})`);
}

async function heartbeatCounter(metricsUrl: string, namespace: string): Promise<number> {
  const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`${metricsUrl}: ${res.status}`);
  let count = 0;
  for (const line of (await res.text()).split('\n')) {
    if (!line.startsWith('action{') || !line.includes(`namespace="${namespace}"`)) continue;
    if (line.includes('action_type="grpc_RecordActivityTaskHeartbeat"'))
      count += Number(line.split(' ').pop());
  }
  return count;
}
