// Slots: at most `capacity` things held per key, across every process, without a compare-and-swap. FerretDB v1 has
// none (its conditional updates and deletes read, then write by _id); the one exclusive write on both servers is an
// insert hitting a unique _id (E11000). So each slot is a chain of uses, `<key>|<slot>|<n>`, and taking a free slot
// inserts its next use: of the racers for one use exactly one wins and the others try another slot. A burst is
// admitted up to the capacity and never below one (a count-then-insert-then-recount lets every racer see the
// others and back off, admitting none).
// A taker whose read was stale (the chain moved on, or its rows were removed and it started over at 0) can still
// insert a use beside a held one, so after its insert it reads the slot again and gives its use back when any other
// held use is there. Of two such uses the one checked later sees the other: both are never kept.
// This module owns no collection: the store that keeps the slots does (rate_limits, push_subscription_slots).
import { randomInt } from 'node:crypto';
import type { Collection, Filter, OptionalUnlessRequiredId } from 'mongodb';
import { isDuplicateKey } from './mongo';

export interface SlotRow {
  /** `<key>|<slot>|<n>`: the n-th use of the slot. */
  _id: string;
  key: string;
  slot: number;
  n: number;
  at: Date;
}

export const slotUseId = (key: string, slot: number, n: number): string => `${key}|${slot}|${n}`;

/**
 * Takes one of the key's `capacity` slots for `fields`, or answers undefined when none is free. `rows` are the key's
 * rows as the caller just read them; `held` says whether a use still holds its slot.
 */
export async function takeSlot<R extends SlotRow>(
  collection: Collection<R>,
  input: {
    key: string;
    capacity: number;
    rows: R[];
    held: (row: R) => boolean;
    at: Date;
    fields: Omit<R, keyof SlotRow>;
  },
): Promise<R | undefined> {
  const { key, capacity, rows, held, at } = input;
  const heads = new Map<number, number>();
  for (const row of rows) {
    if (typeof row.slot === 'number') heads.set(row.slot, Math.max(heads.get(row.slot) ?? -1, row.n));
  }
  const taken = new Set(rows.filter(held).map((row) => row.slot));
  const free = Array.from({ length: Math.max(0, capacity) }, (_, slot) => slot).filter((s) => !taken.has(s));
  // From a random free slot on: racers spread over the slots instead of all queueing on the first.
  const start = free.length ? randomInt(free.length) : 0;
  for (const slot of [...free.slice(start), ...free.slice(0, start)]) {
    const n = (heads.get(slot) ?? -1) + 1;
    const use = { ...input.fields, _id: slotUseId(key, slot, n), key, slot, n, at } as R;
    try {
      await collection.insertOne(use as OptionalUnlessRequiredId<R>);
    } catch (err) {
      if (isDuplicateKey(err)) continue; // another taker won this use
      throw err;
    }
    const again = await collection.find({ key, slot } as Filter<R>).toArray();
    if (!again.some((row) => row._id !== use._id && held(row as R))) return use;
    await collection.deleteOne({ _id: use._id } as Filter<R>); // a stale read: give it back
  }
  return undefined;
}
