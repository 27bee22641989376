// notification_prefs: one row per user in a team, and only when that user leaves the default there (own runs
// only, every kind on), so absence means the default. Keyed by (user, team): a user of two teams who chooses
// `own` in one keeps the team opt-in of the other.
import type { Db } from 'mongodb';
import type { PushKind } from '../../domain/push';
import { DEFAULT_BREAK_THROUGH, type HoldPrefs, type QuietHours } from '../../domain/quietHours';
import { randomUUID } from 'node:crypto';
import { isDuplicateKey, type IndexSpec } from '../mongo';

export type NotificationScope = 'own' | 'team';
export type PrefKind = Exclude<PushKind, 'test' | 'digest' | 'answered'>;
export const PREF_KINDS: readonly PrefKind[] = [
  'human_input_requested',
  'usage_parked',
  'run_finished',
  'run_failed',
  'run_cancelled',
];
export type PrefKinds = Record<PrefKind, boolean>;

export interface NotificationPrefs {
  scope: NotificationScope;
  kinds: PrefKinds;
  quietHours?: QuietHours;
  /** Only while it lies ahead. */
  doNotDisturbUntil?: Date;
  /** The kinds that arrive during quiet hours and do-not-disturb. */
  breakThrough: PrefKind[];
}

/** A change to the prefs: what is absent keeps its value; null clears quiet hours or do-not-disturb. */
export interface PrefsChange {
  scope: NotificationScope;
  kinds?: Partial<PrefKinds>;
  quietHours?: QuietHours | null;
  doNotDisturbUntil?: Date | null;
  breakThrough?: PrefKind[];
}

/** A recipient of a push, with what decides whether it reaches them now or waits for their digest. */
export interface Recipient {
  userId: string;
  hold: HoldPrefs;
  /** A team-wide member who is not the run's owner: reached through that scope, so `own` since opts them out. */
  viaTeam?: true;
}

export interface NotificationPrefRow {
  _id: string; // prefKey(userId, teamId)
  userId: string;
  teamId: string;
  scope: NotificationScope;
  /** The kinds this user turned off in this team (absent or empty: every kind on). */
  off?: PrefKind[];
  quietHours?: QuietHours;
  doNotDisturbUntil?: Date;
  /** Absent: DEFAULT_BREAK_THROUGH. */
  breakThrough?: PrefKind[];
  updatedAt: Date;
  /**
   * New at every write (never a count, which a delete and a fresh insert would repeat): a change is written only
   * over the row it read. Absent on rows written before.
   */
  revision?: string;
}

/** Reads-and-writes of one person's prefs tried before a change gives up on others' changes beside it. */
const PREFS_WRITE_TRIES = 10;

export const notificationPrefIndexes: IndexSpec[] = [
  { collection: 'notification_prefs', key: { teamId: 1, scope: 1 }, options: { name: 'team_scope' } },
];

/** Unambiguous whatever the ids hold, and never equal to a bare user id (the pre-migration key). */
export const prefKey = (userId: string, teamId: string): string => JSON.stringify([userId, teamId]);

const allOn = (): PrefKinds => Object.fromEntries(PREF_KINDS.map((kind) => [kind, true])) as PrefKinds;

const DEFAULT_BREAK = DEFAULT_BREAK_THROUGH as PrefKind[];

type HoldFields = Pick<NotificationPrefRow, 'quietHours' | 'doNotDisturbUntil' | 'breakThrough'>;

function prefsOf(
  row: (Pick<NotificationPrefRow, 'scope' | 'off'> & HoldFields) | null,
  now: Date,
): NotificationPrefs {
  const kinds = allOn();
  for (const kind of row?.off ?? []) if (kind in kinds) kinds[kind] = false;
  return {
    scope: row?.scope ?? 'own',
    kinds,
    ...(row?.quietHours ? { quietHours: row.quietHours } : {}),
    ...(row?.doNotDisturbUntil && row.doNotDisturbUntil > now
      ? { doNotDisturbUntil: row.doNotDisturbUntil }
      : {}),
    breakThrough: row?.breakThrough ?? [...DEFAULT_BREAK],
  };
}

const holdOf = (row: HoldFields | undefined): HoldPrefs => ({
  ...(row?.quietHours ? { quietHours: row.quietHours } : {}),
  ...(row?.doNotDisturbUntil ? { doNotDisturbUntil: row.doNotDisturbUntil } : {}),
  breakThrough: row?.breakThrough ?? DEFAULT_BREAK,
});

const sameKinds = (a: readonly string[], b: readonly string[]): boolean =>
  a.length === b.length && a.every((kind) => b.includes(kind));

/**
 * Rows written before prefs were per team were keyed by the bare user id (and only ever held scope team).
 * Each becomes its (user, team) row: upsert first, then delete the old one, so a crash in between leaves a
 * row the next start-up finishes, and a second run finds nothing to do.
 */
export async function migrateNotificationPrefs(db: Db): Promise<number> {
  const prefs = db.collection<NotificationPrefRow>('notification_prefs');
  let migrated = 0;
  for await (const old of prefs.find({ userId: { $exists: false } })) {
    const userId = String(old._id);
    const teamId = String(old.teamId ?? '');
    if (teamId) {
      await prefs.updateOne(
        { _id: prefKey(userId, teamId) },
        {
          $setOnInsert: { userId, teamId, scope: 'team', off: [], updatedAt: old.updatedAt ?? new Date(0) },
        },
        { upsert: true },
      );
    }
    await prefs.deleteOne({ _id: old._id, userId: { $exists: false } });
    migrated++;
  }
  return migrated;
}

export type NotificationPrefStore = ReturnType<typeof createNotificationPrefStore>;

/** The prefs a change leaves: the kinds named set (the others keep their value), the rest as the change says. */
function applyChange(next: NotificationPrefs, change: PrefsChange, now: Date): NotificationPrefs {
  // A body without kinds changes the scope only: the kinds keep what this user chose before.
  next.scope = change.scope;
  for (const kind of PREF_KINDS) next.kinds[kind] = change.kinds?.[kind] ?? next.kinds[kind];
  if (change.quietHours !== undefined) next.quietHours = change.quietHours ?? undefined;
  if (change.doNotDisturbUntil !== undefined)
    next.doNotDisturbUntil =
      change.doNotDisturbUntil && change.doNotDisturbUntil > now ? change.doNotDisturbUntil : undefined;
  if (change.breakThrough)
    next.breakThrough = PREF_KINDS.filter((kind) => change.breakThrough!.includes(kind));
  if (!next.quietHours) delete next.quietHours;
  if (!next.doNotDisturbUntil) delete next.doNotDisturbUntil;
  return next;
}

export function createNotificationPrefStore(db: Db, clock: () => Date = () => new Date()) {
  const prefs = db.collection<NotificationPrefRow>('notification_prefs');
  const store = {
    async get(userId: string, teamId: string, now = clock()): Promise<NotificationPrefs> {
      return prefsOf(await prefs.findOne({ _id: prefKey(userId, teamId) }), now);
    },

    async getScope(userId: string, teamId: string): Promise<NotificationScope> {
      return (await store.get(userId, teamId)).scope;
    },

    /** Removes the person's prefs in the team (they left it); answers whether they were team-wide. */
    async removeMember(userId: string, teamId: string): Promise<{ teamWide: boolean }> {
      const row = await prefs.findOneAndDelete({ _id: prefKey(userId, teamId) });
      return { teamWide: row?.scope === 'team' };
    },

    /**
     * Sets the scope and, when given, the kinds named (the others keep their value), quiet hours, do-not-disturb
     * (null clears either; a time already past clears it too) and the kinds that break through. Back at the
     * default the row is removed. Answers the prefs now in force.
     */
    async set(userId: string, teamId: string, change: PrefsChange, now: Date): Promise<NotificationPrefs> {
      const _id = prefKey(userId, teamId);
      /** Writes the prefs over the row as read (back at the default, removes it); false when it changed since. */
      const writeOver = async (
        row: NotificationPrefRow | null,
        next: NotificationPrefs,
      ): Promise<boolean> => {
        const off = PREF_KINDS.filter((kind) => !next.kinds[kind]);
        const defaultBreak = sameKinds(next.breakThrough, DEFAULT_BREAK);
        const atDefault =
          next.scope === 'own' && !off.length && !next.quietHours && !next.doNotDisturbUntil && defaultBreak;
        const revision = row?.revision ?? { $exists: false as const };
        if (atDefault) return !row || (await prefs.deleteOne({ _id, revision })).deletedCount === 1;
        const written: NotificationPrefRow = {
          _id,
          userId,
          teamId,
          scope: next.scope,
          off,
          ...(next.quietHours ? { quietHours: next.quietHours } : {}),
          ...(next.doNotDisturbUntil ? { doNotDisturbUntil: next.doNotDisturbUntil } : {}),
          ...(defaultBreak ? {} : { breakThrough: next.breakThrough }),
          updatedAt: now,
          revision: randomUUID(),
        };
        if (row) return (await prefs.replaceOne({ _id, revision }, written)).matchedCount === 1;
        try {
          await prefs.insertOne(written);
          return true;
        } catch (err) {
          if (isDuplicateKey(err)) return false;
          throw err;
        }
      };
      // Each write is made over the row as read: a change made beside this one is read again and kept.
      for (let tries = 0; tries < PREFS_WRITE_TRIES; tries++) {
        const row = await prefs.findOne({ _id });
        const next = applyChange(prefsOf(row, now), change, now);
        if (await writeOver(row, next)) return next;
      }
      throw new Error(`the prefs of ${userId} in ${teamId} kept changing beside this change: not written`);
    },
    async setScope(userId: string, teamId: string, scope: NotificationScope, now: Date): Promise<void> {
      await store.set(userId, teamId, { scope }, now);
    },

    /** The team's members who chose team-wide scope (ListTeamWide). */
    async listTeamWide(teamId: string): Promise<string[]> {
      const rows = await prefs.find({ teamId, scope: 'team' }, { projection: { userId: 1 } }).toArray();
      return rows.map((row) => row.userId);
    },

    /**
     * These people in this team, less whoever turned this kind off, each with their quiet hours, do-not-disturb
     * and breakThrough (the defaults for someone with no row): an escalation rung's or a snooze's recipients.
     */
    async recipientsAmong(teamId: string, userIds: string[], kind: PrefKind): Promise<Recipient[]> {
      if (!userIds.length) return [];
      const found = await prefs
        .find({ _id: { $in: userIds.map((userId) => prefKey(userId, teamId)) } })
        .toArray();
      const byUser = new Map(found.map((row) => [row.userId, row]));
      return userIds.flatMap((userId) => {
        const row = byUser.get(userId);
        return row?.off?.includes(kind) ? [] : [{ userId, hold: holdOf(row) }];
      });
    },

    /**
     * Who gets a push of this kind for a run of this owner in this team (the owner unless they turned the kind
     * off, and every team-wide member who did not), each with their quiet hours, do-not-disturb and
     * breakThrough. Two reads, each by an index to the rows it wants: the team-wide members' and the owner's
     * (members who keep to their own runs have rows too, for their quiet hours, and are never read here).
     */
    async listRecipientPrefs(teamId: string, ownerId: string, kind: PrefKind): Promise<Recipient[]> {
      const projection = {
        userId: 1,
        scope: 1,
        off: 1,
        quietHours: 1,
        doNotDisturbUntil: 1,
        breakThrough: 1,
      };
      const [rows, owner] = await Promise.all([
        prefs.find({ teamId, scope: 'team' }, { projection }).toArray(),
        ownerId ? prefs.findOne({ _id: prefKey(ownerId, teamId) }, { projection }) : null,
      ]);
      const recipients = new Map<string, Recipient>();
      if (ownerId && !owner?.off?.includes(kind))
        recipients.set(ownerId, { userId: ownerId, hold: holdOf(owner ?? undefined) });
      for (const row of rows)
        if (row.userId !== ownerId && !row.off?.includes(kind))
          recipients.set(row.userId, { userId: row.userId, hold: holdOf(row), viaTeam: true });
      return [...recipients.values()];
    },
  };
  return store;
}
