// team_removals: who a team admin removed from the team, and when. Identity comes from tokens, so a person who left
// still holds what they were given as a member; what was minted for them before this time (a notification's action
// tokens) answers nothing. One row per (person, team), by key: a second removal moves the time on.
import type { Db } from 'mongodb';
import { prefKey } from './push/notificationPrefs';

export interface TeamRemovalRow {
  /** JSON [userId, teamId], as a prefs row's key. */
  _id: string;
  userId: string;
  teamId: string;
  removedAt: Date;
  /** The admin who removed them. */
  removedBy: string;
}

/** The same key as the person's prefs row in the team. */
const removalKey = prefKey;

export type TeamRemovalStore = ReturnType<typeof createTeamRemovalStore>;

export function createTeamRemovalStore(db: Db) {
  const rows = db.collection<TeamRemovalRow>('team_removals');
  return {
    async record(teamId: string, userId: string, removedBy: string, at: Date): Promise<void> {
      await rows.updateOne(
        { _id: removalKey(userId, teamId) },
        { $set: { userId, teamId, removedAt: at, removedBy } },
        { upsert: true },
      );
    },

    /** Whether the person was removed from the team at or after `since` (what was theirs then is not now). */
    async removedSince(teamId: string, userId: string, since: Date): Promise<boolean> {
      const row = await rows.findOne({ _id: removalKey(userId, teamId) }, { projection: { removedAt: 1 } });
      return row !== null && row.removedAt >= since;
    },
  };
}
