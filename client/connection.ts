// The one way every process (worker, API, runner CLI, launcher) reaches Temporal: address, TLS / mTLS and the
// Temporal Cloud API key, from the config. Both the client's Connection and the worker's NativeConnection take it.
import type { TLSConfig } from '@temporalio/client';
import type { TemporalConnectionConfig } from '../config';

export interface TemporalConnectionOptions {
  address: string;
  tls?: TLSConfig;
  apiKey?: string;
}

export function temporalConnectionOptions(config: TemporalConnectionConfig): TemporalConnectionOptions {
  const tls = config.temporalTls;
  return {
    address: config.temporalAddress,
    ...(tls
      ? {
          tls: {
            ...(tls.serverName ? { serverNameOverride: tls.serverName } : {}),
            ...(tls.ca ? { serverRootCACertificate: tls.ca } : {}),
            ...(tls.clientCert ? { clientCertPair: tls.clientCert } : {}),
          },
        }
      : {}),
    ...(config.temporalApiKey ? { apiKey: config.temporalApiKey } : {}),
  };
}
