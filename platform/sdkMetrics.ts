// The Temporal SDK's own metrics, read from its exporter on a loopback port for the worker's /metrics.

/** Largest answer read from the SDK's own exporter (a few hundred series in practice). */
const SDK_METRICS_MAX_BYTES = 4 * 1024 * 1024;

/** Whole deadline of one read of the exporter. */
const SDK_METRICS_TIMEOUT_MS = 2000;

/**
 * The exporter's text, or a comment line saying why it could not be read. The body is counted as it arrives and
 * the read stops once it passes the cap, so a runaway answer costs at most the cap in memory, not the deadline.
 */
export async function readSdkMetrics(
  url: string,
  maxBytes = SDK_METRICS_MAX_BYTES,
  timeoutMs = SDK_METRICS_TIMEOUT_MS,
): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok || !res.body) {
      await res.body?.cancel();
      throw new Error(`answered ${res.status}`);
    }
    const chunks: Uint8Array[] = [];
    let bytes = 0;
    const reader = res.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > maxBytes) {
        await reader.cancel();
        throw new Error(`answer passed ${Math.round(maxBytes / 1024)} KiB`);
      }
      chunks.push(value);
    }
    return Buffer.concat(chunks).toString('utf8');
  } catch (err) {
    return `# the Temporal SDK's metrics could not be read: ${String(err).split('\n')[0]}\n`;
  }
}
