// The namespace must have the search attributes every workflow is started with (without them each start fails).
// Start-up (API and worker) stops with one line naming what is missing (exit 78, like any other configuration
// error); readiness (/readyz, the worker's probe) answers 503 naming them.
import type { ConnectionLike } from '@temporalio/client';
import { ConfigError } from '../config';
import { searchAttributes } from '../contract/searchAttributes';

async function missingSearchAttributes(connection: ConnectionLike, namespace: string): Promise<string[]> {
  const listed = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Set(Object.keys(listed.customAttributes ?? {}));
  return Object.values(searchAttributes)
    .map((key) => key.name)
    .filter((name) => !have.has(name));
}

export async function assertSearchAttributes(connection: ConnectionLike, namespace: string): Promise<void> {
  const missing = await missingSearchAttributes(connection, namespace);
  if (missing.length) {
    throw new ConfigError(
      `Temporal namespace "${namespace}" lacks the search attributes ${missing.join(', ')} ` +
        `(add each as Keyword: temporal operator search-attribute create --namespace ${namespace} ` +
        `--name <name> --type Keyword)`,
    );
  }
}

/** The readiness probe. Once seen the attributes stay (nobody removes them under a running service): kept. */
export function searchAttributesProbe(connection: ConnectionLike, namespace: string): () => Promise<void> {
  let present = false;
  return async () => {
    if (present) return;
    const missing = await missingSearchAttributes(connection, namespace);
    if (missing.length) throw new Error(`missing search attributes ${missing.join(', ')}`);
    present = true;
  };
}
