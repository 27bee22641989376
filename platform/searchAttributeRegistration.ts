// Registers the episode workflows' search attributes on a Temporal server that does not have them yet
// (the embedded dev server gets them on its command line instead).
import type { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';

const TYPES: Record<string, temporal.api.enums.v1.IndexedValueType> = {
  Keyword: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
  KeywordList: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
  Text: temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
};

export async function ensureSearchAttributes(
  connection: Connection,
  namespace: string,
  wanted: Record<string, string>,
): Promise<string[]> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const known = new Set(Object.keys(existing.customAttributes ?? {}));
  const missing = Object.entries(wanted).filter(([name]) => !known.has(name));
  if (!missing.length) return [];
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(
      missing.map(([name, type]) => {
        const indexed = TYPES[type];
        if (indexed === undefined) throw new Error(`unknown search attribute type ${type} for ${name}`);
        return [name, indexed];
      }),
    ),
  });
  return missing.map(([name]) => name);
}
