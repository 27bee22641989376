// endpoints: the systems a team registered to hear about its runs, each subscribed to event types. A team holds at
// most ENDPOINTS_PER_TEAM of them: endpoint_slots, beside it, holds the cap (store/slots.ts: no compare-and-swap
// needed, a burst of creates admits up to the cap and never more).
import type { Collection, Db, Filter, UpdateFilter } from 'mongodb';
import { RAISED_AGAIN_WITHIN_SECONDS } from '../../domain/outcome';
import type { SubscribableEventType, TeamEvent } from '../../domain/teamEvents';
import type { IndexSpec } from '../mongo';
import { takeSlot, type SlotRow } from '../slots';

export type EndpointFormat = 'standard' | 'slack';

export interface EndpointRow {
  _id: string;
  teamId: string;
  url: string;
  eventTypes: SubscribableEventType[];
  description?: string;
  disabled: boolean;
  /** Why it is disabled: someone asked, or it failed for ENDPOINT_DISABLE_AFTER_SECONDS without a success. */
  disabledReason?: 'manual' | 'failing';
  rateLimitPerSecond?: number;
  format: EndpointFormat;
  /** whsec_ secret; shown once, at creation and rotation. */
  secret: string;
  /** The secret a rotation replaced: events carry its signature too for CALLBACK_SECRET_OVERLAP_SECONDS. */
  previousSecret?: { secret: string; rotatedAt: Date };
  createdBy: string;
  createdAt: Date;
  updatedAt: Date;
  /**
   * When it was last enabled, disabled or given other event types: what it is owed changed then (the sweep raises
   * again only events recorded after it). Absent on rows from before it was kept: updatedAt stands in, until
   * the row's next write keeps it here.
   */
  subscriptionChangedAt?: Date;
  /** The first failure since the last success (absent: the last attempt succeeded, or none failed). */
  failingSince?: Date;
  lastSuccessAt?: Date;
  slotId: string;
  /** The last disabling for failing: what its endpoint_disabled alert says. */
  disabling?: EndpointDisabling;
  /** While that alert is owed (not known started): when the sweep starts it if its disabler did not. */
  alertOwedAt?: Date;
}

/** Why and when a failing endpoint was disabled, written with the disabling: its alert is never lost with a crash. */
export interface EndpointDisabling {
  disabledAt: Date;
  failingSince: Date;
  /** The run of the event whose failed attempt disabled it. */
  runId: string;
  lastError: string;
}

/** How long the disabler has to start the alert itself before the sweep does (either start is harmless). */
export const DISABLED_ALERT_GRACE_SECONDS = 60;

/** One use of one of a team's ENDPOINTS_PER_TEAM slots; `key` is the team id. */
interface EndpointSlotRow extends SlotRow {
  endpointId: string;
  released?: true;
}

export const endpointIndexes: IndexSpec[] = [
  { collection: 'endpoints', key: { teamId: 1, createdAt: 1 }, options: { name: 'team_created' } },
  { collection: 'endpoint_slots', key: { key: 1 }, options: { name: 'team' } },
  // Only rows owing an alert carry the field: the sweep reads those, never the others.
  { collection: 'endpoints', key: { alertOwedAt: 1 }, options: { name: 'alert_owed' } },
];

/** A slot whose endpoint is not written yet is held this long (a create in flight), then given back. */
const CREATE_IN_FLIGHT_MS = 60_000;

export type NewEndpoint = Pick<
  EndpointRow,
  '_id' | 'url' | 'eventTypes' | 'description' | 'disabled' | 'rateLimitPerSecond' | 'format' | 'secret'
>;

/** What a PATCH changes; null clears an optional field. */
export type EndpointChange = Partial<Pick<EndpointRow, 'url' | 'eventTypes' | 'disabled' | 'format'>> & {
  description?: string | null;
  rateLimitPerSecond?: number | null;
};

export type EndpointStore = ReturnType<typeof createEndpointStore>;

/** Whether the endpoint, enabled and subscribed to the type, existed when the event happened. */
export const subscribedWhen = (endpoint: EndpointRow, type: TeamEvent['type'], happenedMs: number): boolean =>
  !endpoint.disabled && endpoint.eventTypes.includes(type) && endpoint.createdAt.getTime() <= happenedMs;

/**
 * Who a team event is owed to: subscribedWhen, and not enabled, disabled or given other types since the event was
 * recorded (one enabled again later gets what it missed from its recover; a new secret or description changes
 * nothing owed).
 */
export const owedTeamEvent = (
  endpoint: EndpointRow,
  event: { type: TeamEvent['type']; occurredAt: string },
  recordedAt: Date,
): boolean =>
  subscribedWhen(endpoint, event.type, Date.parse(event.occurredAt)) &&
  (endpoint.subscriptionChangedAt ?? endpoint.updatedAt) <= recordedAt;

/** Whether a change moves what the endpoint subscribes to: its state or its types, as values, not as fields sent. */
function changesSubscription(change: EndpointChange, row: EndpointRow): boolean {
  const types = change.eventTypes;
  const sameTypes =
    types === undefined ||
    (types.length === row.eventTypes.length && types.every((type) => row.eventTypes.includes(type)));
  return !sameTypes || (change.disabled !== undefined && change.disabled !== row.disabled);
}

/**
 * The update a change makes to the row as read: null fields removed, the rest set; a disable or enable says why and
 * what resets. Only a change of what it subscribes to ends what the sweep owes it of earlier events.
 */
function changeUpdate(change: EndpointChange, row: EndpointRow, now: Date): UpdateFilter<EndpointRow> {
  const unset: Partial<Record<keyof EndpointRow, ''>> = {};
  const set: Partial<EndpointRow> = { updatedAt: now };
  for (const [field, value] of Object.entries(change) as [keyof EndpointChange, unknown][]) {
    if (value === null) unset[field] = '';
    else if (value !== undefined) Object.assign(set, { [field]: value });
  }
  if (changesSubscription(change, row)) set.subscriptionChangedAt = now;
  if (change.disabled !== undefined) {
    // Enabled again: the failure streak starts over, so it is not disabled again on its next failure.
    if (change.disabled) set.disabledReason = 'manual';
    else Object.assign(unset, { disabledReason: '', failingSince: '' });
  }
  return { $set: set, ...(Object.keys(unset).length ? { $unset: unset } : {}) };
}

export function createEndpointStore(db: Db) {
  const rows = db.collection<EndpointRow>('endpoints');
  const slots = db.collection<EndpointSlotRow>('endpoint_slots');
  /**
   * A row from before it kept when its subscription changed, about to be written: its updatedAt, which stands in
   * for that time, is kept there first (a new secret or description must not end what is owed), unless a write
   * meanwhile set it.
   */
  const keepSubscriptionTime = async (row: EndpointRow): Promise<void> => {
    if (row.subscriptionChangedAt) return;
    await rows.updateOne(
      { _id: row._id, subscriptionChangedAt: { $exists: false } },
      { $set: { subscriptionChangedAt: row.updatedAt } },
    );
  };

  const listForTeam = (teamId: string): Promise<EndpointRow[]> =>
    rows.find({ teamId }).sort({ createdAt: 1 }).toArray();

  /** The team's endpoint, or undefined (another team's is not found either). */
  const get = async (teamId: string, id: string): Promise<EndpointRow | undefined> => {
    const row = await rows.findOne({ _id: id });
    return row && row.teamId === teamId ? row : undefined;
  };

  return {
    listForTeam,
    get,

    /** By id alone: the delivery activity, which holds an id its own workflow recorded. */
    async getById(id: string): Promise<EndpointRow | undefined> {
      return (await rows.findOne({ _id: id })) ?? undefined;
    },

    /** Several by id in one read (an event's first attempts); the ones removed are absent. */
    async getByIds(ids: string[]): Promise<EndpointRow[]> {
      return rows.find({ _id: { $in: ids } }).toArray();
    },

    /** Registers it under one of the team's `capacity` slots; undefined when every slot is held. */
    async create(
      teamId: string,
      createdBy: string,
      input: NewEndpoint,
      capacity: number,
      now: Date,
    ): Promise<EndpointRow | undefined> {
      const [held, existing] = await Promise.all([
        slots.find({ key: teamId }).toArray(),
        listForTeam(teamId),
      ]);
      const live = new Set(existing.map((row) => row._id));
      const slot = await takeSlot(slots, {
        key: teamId,
        capacity,
        rows: held,
        held: (row) =>
          !row.released &&
          (live.has(row.endpointId) || now.getTime() - row.at.getTime() < CREATE_IN_FLIGHT_MS),
        at: now,
        fields: { endpointId: input._id },
      });
      if (!slot) return undefined;
      // The place's earlier uses are over: only its newest is kept, so a team's rows never grow with its creates.
      for (const use of held)
        if (use.slot === slot.slot && use.n < slot.n) await slots.deleteOne({ _id: use._id });
      const row: EndpointRow = {
        ...input,
        teamId,
        createdBy,
        createdAt: now,
        updatedAt: now,
        subscriptionChangedAt: now,
        slotId: slot._id,
      };
      await rows.insertOne(row);
      return row;
    },

    async update(teamId: string, id: string, change: EndpointChange, now: Date) {
      const row = await get(teamId, id);
      if (!row) return undefined;
      await keepSubscriptionTime(row);
      await rows.updateOne({ _id: id }, changeUpdate(change, row, now));
      return (await rows.findOne({ _id: id })) ?? undefined;
    },

    /**
     * Replaces the secret, keeping the current one as the previous from `now` on; only while the secret read is
     * still the endpoint's (one conditional write). `conflict`: another rotation did first.
     */
    async rotateSecret(teamId: string, id: string, secret: string, now: Date) {
      const row = await get(teamId, id);
      if (!row) return undefined;
      await keepSubscriptionTime(row);
      const previousSecret = { secret: row.secret, rotatedAt: now };
      const result = await rows.updateOne(
        { _id: id, secret: row.secret },
        { $set: { secret, previousSecret, updatedAt: now } },
      );
      if (result.modifiedCount !== 1) return 'conflict' as const;
      return { ...row, secret, previousSecret };
    },

    /** Removes it and gives its slot back (a crash between leaves the slot held until a create finds it free). */
    async remove(teamId: string, id: string): Promise<boolean> {
      const row = await get(teamId, id);
      if (!row) return false;
      await rows.deleteOne({ _id: id });
      await slots.updateOne({ _id: row.slotId } as Filter<EndpointSlotRow>, { $set: { released: true } });
      return true;
    },
    ...failureStreaks(rows),
  };
}

/** An endpoint's failure streak, its disabling for failing, and the alert that disabling owes the operator. */
function failureStreaks(rows: Collection<EndpointRow>) {
  return {
    /** A delivery reached it: its failure streak ends. */
    async recordSuccess(id: string, now: Date): Promise<void> {
      await rows.updateOne({ _id: id }, { $set: { lastSuccessAt: now }, $unset: { failingSince: '' } });
    },

    /**
     * A delivery failed: the streak's start is kept (set if none, as the store has it: another attempt may have
     * started it since this one read the row). Answers the endpoint as it is now, so the caller can tell how long it
     * has been failing.
     */
    async recordFailure(row: EndpointRow, now: Date): Promise<EndpointRow> {
      if (row.failingSince) return row;
      const started = await rows.findOneAndUpdate(
        { _id: row._id, failingSince: { $exists: false } },
        { $set: { failingSince: now } },
        { returnDocument: 'after' },
      );
      return started ?? (await rows.findOne({ _id: row._id })) ?? { ...row, failingSince: now };
    },

    /**
     * A success ended the streak that began at `failingSince` (its attempt read the endpoint before the streak
     * began, so did not end it): the streak begins again now, unless another attempt has changed it since.
     */
    async restartStreak(id: string, failingSince: Date, succeededAt: Date, now: Date): Promise<void> {
      await rows.updateOne(
        { _id: id, failingSince },
        { $set: { failingSince: now }, $max: { lastSuccessAt: succeededAt } },
      );
    },

    /**
     * Disables the endpoint when, as it is now, it is enabled and has failed since `failingBefore` or earlier (a
     * success since an attempt read it ended the streak); true for the one caller that disabled it. With
     * `disabling`, the same write records its alert owed, so a disabler that dies before starting it leaves it to
     * the sweep.
     */
    async disableFailing(
      id: string,
      failingBefore: Date,
      now: Date,
      disabling?: EndpointDisabling,
    ): Promise<boolean> {
      const owed = disabling && {
        disabling,
        alertOwedAt: new Date(now.getTime() + DISABLED_ALERT_GRACE_SECONDS * 1000),
      };
      const disabled = await rows.updateOne(
        { _id: id, disabled: { $ne: true }, failingSince: { $lte: failingBefore } },
        {
          $set: {
            disabled: true,
            disabledReason: 'failing',
            updatedAt: now,
            subscriptionChangedAt: now,
            ...owed,
          },
        },
      );
      return disabled.modifiedCount === 1;
    },

    /** The alert of the disabling at `disabledAt` was started: no longer owed (a later disabling's still is). */
    async disabledAlertStarted(id: string, disabledAt: Date): Promise<void> {
      await rows.updateOne({ _id: id, 'disabling.disabledAt': disabledAt }, { $unset: { alertOwedAt: '' } });
    },

    /**
     * Endpoints whose disabling's alert is owed and past its grace, oldest first, at most `limit`. One owed longer
     * than half the claims' retention (operator alerts off since) is let go: its claim may be gone, and it is news
     * no more.
     */
    owingDisabledAlerts(
      now: Date,
      limit: number,
    ): Promise<(EndpointRow & { disabling: EndpointDisabling })[]> {
      const since = new Date(now.getTime() - RAISED_AGAIN_WITHIN_SECONDS * 1000);
      return rows
        .find({ alertOwedAt: { $gte: since, $lte: now } })
        .sort({ alertOwedAt: 1 })
        .limit(limit)
        .toArray() as Promise<(EndpointRow & { disabling: EndpointDisabling })[]>;
    },
  };
}
