// push_services: one row per push service origin a known service's 401/403 was met at: the recent refusals of
// fan-outs in which it accepted nothing (the evidence that it refuses our VAPID identity as a whole, bounded by
// domain/pushServices.ts judgeRefusals) and when it last did. Read and written by _id only; as many rows as origins.
import type { Db } from 'mongodb';
import type { KeyRefusal } from '../../domain/pushServices';

export interface PushServiceRow {
  /** The origin (scheme, host, port) of the push service's endpoints. */
  _id: string;
  refusals: KeyRefusal[];
  /** The last time it was judged to refuse our identity as a whole (a push_config_fault). */
  faultAt?: Date;
}

export type PushServiceStore = ReturnType<typeof createPushServiceStore>;

export function createPushServiceStore(db: Db) {
  const rows = db.collection<PushServiceRow>('push_services');
  return {
    async get(origin: string): Promise<PushServiceRow | undefined> {
      return (await rows.findOne({ _id: origin })) ?? undefined;
    },

    /**
     * Replaces the evidence and, when judged a fault, moves faultAt forward. One write per origin per fan-out; two
     * fan-outs writing at once may lose each other's evidence, which only delays a verdict (never invents one).
     */
    async record(origin: string, refusals: KeyRefusal[], faultAt?: Date): Promise<void> {
      await rows.updateOne(
        { _id: origin },
        { $set: { refusals }, ...(faultAt ? { $max: { faultAt } } : {}) },
        { upsert: true },
      );
    },
  };
}
