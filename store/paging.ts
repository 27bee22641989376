// Cursor paging for the newest-first listings (runs of a team, a user's devices, a run's episodes). Each reads
// from an index that ends in (time desc, _id desc) after the fields its filter pins, so sort and limit are served by
// the index and a page reads only its own rows (plus the cursor's ties), never a skip over the rows before it.
import type { Collection, Document, Filter } from 'mongodb';

/** Where the previous page ended: its last row's time and id. */
export interface PageCursor {
  at: Date;
  id: string;
}

export interface Page<T> {
  rows: T[];
  /** The cursor of the next (older) page; absent on the last one. */
  next?: PageCursor;
}

/** Opaque to callers: base64url of [epoch ms, id]. */
export function encodeCursor(cursor: PageCursor): string {
  return Buffer.from(JSON.stringify([cursor.at.getTime(), cursor.id])).toString('base64url');
}

/** Undefined for anything encodeCursor did not make. */
export function decodeCursor(text: string): PageCursor | undefined {
  try {
    const value: unknown = JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
    if (!Array.isArray(value) || value.length !== 2) return undefined;
    const [ms, id] = value as unknown[];
    if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || typeof id !== 'string' || !id)
      return undefined;
    const at = new Date(ms);
    return Number.isNaN(at.getTime()) ? undefined : { at, id };
  } catch {
    return undefined;
  }
}

/**
 * One page, newest first, of the rows matching `filter`, sorted on (`field` desc, _id desc). The cursor's bound is
 * `field <= at` (a range the index serves, so the read stays pushed down); the rows at exactly `at` with an _id at
 * or above the cursor's were on earlier pages and are skipped here. Usually that is the cursor's own row, so one
 * read of limit + 2 rows does; a run of ties longer than that is read again with a larger limit.
 */
export async function pageNewestFirst<T extends { _id: string }>(
  collection: Collection<T>,
  filter: Filter<T>,
  field: keyof T & string,
  limit: number,
  before?: PageCursor,
  projection?: Document,
): Promise<Page<T>> {
  const bounded = (before ? { ...filter, [field]: { $lte: before.at } } : filter) as Filter<T>;
  const seen = (row: T): boolean =>
    before !== undefined &&
    (row[field] as unknown as Date).getTime() === before.at.getTime() &&
    row._id >= before.id;
  for (let read = limit + (before ? 2 : 1); ; read *= 2) {
    const rows = (await collection
      .find(bounded, { sort: { [field]: -1, _id: -1 }, limit: read, ...(projection ? { projection } : {}) })
      .toArray()) as T[];
    const fresh = rows.filter((row) => !seen(row));
    if (fresh.length > limit || rows.length < read) {
      const page = fresh.slice(0, limit);
      const last = page.at(-1);
      return {
        rows: page,
        ...(fresh.length > limit && last
          ? { next: { at: last[field] as unknown as Date, id: last._id } }
          : {}),
      };
    }
  }
}

/**
 * A cursor's rows in pages of `pageSize` (the sweep's windows): its batches are the pages, so a caller that stops
 * early (it found what it looks for) leaves the rest unread; the cursor is closed either way.
 */
export async function* inPages<T>(cursor: AsyncIterable<T>, pageSize: number): AsyncGenerator<T[]> {
  let page: T[] = [];
  for await (const row of cursor) {
    page.push(row);
    if (page.length === pageSize) {
      yield page;
      page = [];
    }
  }
  if (page.length) yield page;
}
