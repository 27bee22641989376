// notification_prefs: a row exists only when a user leaves the default, so absence means "own runs only".
import type { Db } from 'mongodb';
import type { IndexSpec } from './mongo';

export type NotificationScope = 'own' | 'team';

export interface NotificationPrefRow {
  _id: string; // user id
  teamId: string;
  scope: 'team';
  updatedAt: Date;
}

export const notificationPrefIndexes: IndexSpec[] = [
  { collection: 'notification_prefs', key: { teamId: 1, scope: 1 }, options: { name: 'team_scope' } },
];

export type NotificationPrefStore = ReturnType<typeof createNotificationPrefStore>;

export function createNotificationPrefStore(db: Db) {
  const prefs = db.collection<NotificationPrefRow>('notification_prefs');
  return {
    async getScope(userId: string, teamId: string): Promise<NotificationScope> {
      return (await prefs.countDocuments({ _id: userId, teamId }, { limit: 1 })) ? 'team' : 'own';
    },

    async setScope(userId: string, teamId: string, scope: NotificationScope, now: Date): Promise<void> {
      if (scope === 'own') {
        await prefs.deleteOne({ _id: userId });
        return;
      }
      await prefs.updateOne({ _id: userId }, { $set: { teamId, scope, updatedAt: now } }, { upsert: true });
    },

    /** The team's members who chose team-wide scope (ListTeamWide). */
    async listTeamWide(teamId: string): Promise<string[]> {
      const rows = await prefs.find({ teamId, scope: 'team' }, { projection: { _id: 1 } }).toArray();
      return rows.map((row) => row._id);
    },
  };
}
