// notification_prefs: one row per user in a team, and only when that user leaves the default there (own runs
// only, every kind on), so absence means the default. Keyed by (user, team): a user of two teams who chooses
// `own` in one keeps the team opt-in of the other.
import type { Db } from 'mongodb';
import type { PushKind } from '../domain/push';
import type { IndexSpec } from './mongo';

export type NotificationScope = 'own' | 'team';
export type PrefKind = Exclude<PushKind, 'test'>;
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
}

export interface NotificationPrefRow {
  _id: string; // prefKey(userId, teamId)
  userId: string;
  teamId: string;
  scope: NotificationScope;
  /** The kinds this user turned off in this team (absent or empty: every kind on). */
  off?: PrefKind[];
  updatedAt: Date;
}

export const notificationPrefIndexes: IndexSpec[] = [
  { collection: 'notification_prefs', key: { teamId: 1, scope: 1 }, options: { name: 'team_scope' } },
];

/** Unambiguous whatever the ids hold, and never equal to a bare user id (the pre-migration key). */
export const prefKey = (userId: string, teamId: string): string => JSON.stringify([userId, teamId]);

const allOn = (): PrefKinds => Object.fromEntries(PREF_KINDS.map((kind) => [kind, true])) as PrefKinds;

function prefsOf(row: Pick<NotificationPrefRow, 'scope' | 'off'> | null): NotificationPrefs {
  const kinds = allOn();
  for (const kind of row?.off ?? []) if (kind in kinds) kinds[kind] = false;
  return { scope: row?.scope ?? 'own', kinds };
}

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

export function createNotificationPrefStore(db: Db) {
  const prefs = db.collection<NotificationPrefRow>('notification_prefs');
  const store = {
    async get(userId: string, teamId: string): Promise<NotificationPrefs> {
      return prefsOf(await prefs.findOne({ _id: prefKey(userId, teamId) }));
    },

    async getScope(userId: string, teamId: string): Promise<NotificationScope> {
      return (await store.get(userId, teamId)).scope;
    },

    /**
     * Sets the scope and, when given, the kinds named (the others keep their value). Back at the default the
     * row is removed. Answers the prefs now in force.
     */
    async set(
      userId: string,
      teamId: string,
      change: { scope: NotificationScope; kinds?: Partial<PrefKinds> },
      now: Date,
    ): Promise<NotificationPrefs> {
      const _id = prefKey(userId, teamId);
      // A body without kinds changes the scope only: the kinds keep what this user chose before.
      const next = await store.get(userId, teamId);
      next.scope = change.scope;
      for (const kind of PREF_KINDS) next.kinds[kind] = change.kinds?.[kind] ?? next.kinds[kind];
      const off = PREF_KINDS.filter((kind) => !next.kinds[kind]);
      if (next.scope === 'own' && !off.length) await prefs.deleteOne({ _id });
      else
        await prefs.replaceOne(
          { _id },
          { userId, teamId, scope: next.scope, off, updatedAt: now },
          { upsert: true },
        );
      return next;
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
     * Who gets a push of this kind for a run of this owner in this team: the owner unless they turned the kind
     * off, and every team-wide member who did not. One query whatever the team size.
     */
    async listRecipients(teamId: string, ownerId: string, kind: PrefKind): Promise<string[]> {
      const rows = await prefs
        .find(
          { teamId, $or: [{ scope: 'team' }, { userId: ownerId }] },
          { projection: { userId: 1, scope: 1, off: 1 } },
        )
        .toArray();
      const owner = rows.find((row) => row.userId === ownerId);
      const recipients = new Set<string>();
      if (ownerId && !owner?.off?.includes(kind)) recipients.add(ownerId);
      for (const row of rows)
        if (row.scope === 'team' && !row.off?.includes(kind)) recipients.add(row.userId);
      return [...recipients];
    },
  };
  return store;
}
