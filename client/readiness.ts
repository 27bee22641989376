// Readiness checks shared by the API (/readyz) and the worker's probe endpoint.
import type { Connection } from '@temporalio/client';
import { searchAttributes } from '../workflows/ids';

/**
 * The episode workflows' search attributes exist on the namespace (a start without them fails). Once seen they
 * stay (nobody removes them under a running service), so the answer is kept after the first success.
 */
export function searchAttributesProbe(connection: Connection, namespace: string): () => Promise<void> {
  let present = false;
  return async () => {
    if (present) return;
    const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace });
    const missing = Object.values(searchAttributes)
      .map((key) => key.name)
      .filter((name) => !(name in (customAttributes ?? {})));
    if (missing.length) throw new Error(`missing search attributes ${missing.join(', ')}`);
    present = true;
  };
}
