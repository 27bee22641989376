// The start-up check of the API and the worker: the namespace must have the search attributes every workflow
// is started with. Without it each start fails (logged for ever while /healthz says 200); with it, start-up
// stops with one line naming what is missing (exit 78, like any other configuration error).
import type { ConnectionLike } from '@temporalio/client';
import { ConfigError } from '../config';
import { searchAttributes } from '../workflows/ids';

export async function assertSearchAttributes(connection: ConnectionLike, namespace: string): Promise<void> {
  const listed = await connection.operatorService.listSearchAttributes({ namespace });
  const have = new Set(Object.keys(listed.customAttributes ?? {}));
  const missing = Object.values(searchAttributes)
    .map((key) => key.name)
    .filter((name) => !have.has(name));
  if (missing.length) {
    throw new ConfigError(
      `Temporal namespace "${namespace}" lacks the search attributes ${missing.join(', ')} ` +
        `(add each as Keyword: temporal operator search-attribute create --namespace ${namespace} ` +
        `--name <name> --type Keyword)`,
    );
  }
}
