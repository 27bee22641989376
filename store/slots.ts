// Slots: at most `capacity` things held per key, across every process, without a compare-and-swap. FerretDB v1 has
// none (its conditional updates and deletes read, then write by _id); the one exclusive write on both servers is an
// insert hitting a unique _id (E11000). So each slot is a chain of uses, `<key>|<slot>|<n>`, and taking a free slot
// inserts its next use: of the racers for one use exactly one wins and the others try another slot. A burst is
// admitted up to the capacity and never below one (a count-then-insert-then-recount lets every racer see the
// others and back off, admitting none).
// A taker whose read was stale (the chain moved on, or its rows were removed and it started over at 0) can still
// insert a use beside a held one, so after its insert it reads the slot again and gives its use back when any other
// held use is there. Of two such uses the one checked later sees the other: both are never kept.
// This module owns no collection: the store that keeps the slots does (push_subscription_slots).
import { randomInt } from 'node:crypto';
import type { Collection, Filter, OptionalUnlessRequiredId } from 'mongodb';
import { duplicatePositions } from './mongo';

export interface SlotRow {
  /** `<key>|<slot>|<n>`: the n-th use of the slot. */
  _id: string;
  key: string;
  slot: number;
  n: number;
  at: Date;
}

export const slotUseId = (key: string, slot: number, n: number): string => `${key}|${slot}|${n}`;

export interface SlotRequest<R extends SlotRow> {
  key: string;
  capacity: number;
  /** The key's rows as the caller just read them. */
  rows: R[];
  /** Whether a use still holds its slot. */
  held: (row: R) => boolean;
  at: Date;
  fields: Omit<R, keyof SlotRow>;
}

/**
 * Takes one of the key's `capacity` slots for `fields`, or answers undefined when none is free. `rows` are the key's
 * rows as the caller just read them; `held` says whether a use still holds its slot.
 */
export async function takeSlot<R extends SlotRow>(
  collection: Collection<R>,
  input: SlotRequest<R>,
): Promise<R | undefined> {
  return (await takeSlots(collection, [input]))[0];
}

/**
 * takeSlot for several keys at once (one each), in rounds: each round inserts every request's next try in one
 * write and reads their keys again in one query, so n keys cost what one does. Answers each request's use, in
 * order (undefined: no slot free for it).
 */
export async function takeSlots<R extends SlotRow>(
  collection: Collection<R>,
  requests: SlotRequest<R>[],
): Promise<(R | undefined)[]> {
  const plans = requests.map((input) => {
    const heads = new Map<number, number>();
    for (const row of input.rows) {
      if (typeof row.slot === 'number') heads.set(row.slot, Math.max(heads.get(row.slot) ?? -1, row.n));
    }
    const taken = new Set(input.rows.filter(input.held).map((row) => row.slot));
    const free = Array.from({ length: Math.max(0, input.capacity) }, (_, slot) => slot).filter(
      (slot) => !taken.has(slot),
    );
    // From a random free slot on: racers spread over the slots instead of all queueing on the first.
    const start = free.length ? randomInt(free.length) : 0;
    return { input, heads, order: [...free.slice(start), ...free.slice(0, start)], next: 0 };
  });
  const uses: (R | undefined)[] = requests.map(() => undefined);
  let pending = plans.flatMap((plan, i) => (plan.order.length ? [i] : []));
  while (pending.length) {
    const tries = pending.map((i) => {
      const { input, heads, order } = plans[i];
      const slot = order[plans[i].next++];
      const n = (heads.get(slot) ?? -1) + 1;
      const { key, at } = input;
      return { ...input.fields, _id: slotUseId(key, slot, n), key, slot, n, at } as R;
    });
    let lost = new Set<number>(); // another taker won this use
    try {
      await collection.insertMany(tries as OptionalUnlessRequiredId<R>[], { ordered: false });
    } catch (err) {
      lost = duplicatePositions(err);
    }
    const inserted = tries.flatMap((use, j) => (lost.has(j) ? [] : [j]));
    const keys = [...new Set(inserted.map((j) => tries[j].key))];
    const again = keys.length ? await collection.find({ key: { $in: keys } } as Filter<R>).toArray() : [];
    for (const j of inserted) {
      const use = tries[j];
      const { held } = plans[pending[j]].input;
      const beside = again.some(
        (row) => row.key === use.key && row.slot === use.slot && row._id !== use._id && held(row as R),
      );
      if (!beside) uses[pending[j]] = use;
      else await collection.deleteOne({ _id: use._id } as Filter<R>); // a stale read: give it back
    }
    pending = pending.filter((i) => !uses[i] && plans[i].next < plans[i].order.length);
  }
  return uses;
}
