// escalation_policies: one row per team, `_id` the team id: the rungs an open interaction climbs while nobody
// answers, and where `via: webhook` rungs post (with the secret they are signed with, shown once when made).
import type { Db } from 'mongodb';
import type { EscalationPolicy, EscalationRung } from '../domain/interaction';
import type { Run } from '../domain/run';

export interface EscalationPolicyRow extends EscalationPolicy {
  _id: string;
  /** whsec_…: signs the webhook rungs; made with the first webhookUrl and kept across later changes. */
  webhookSecret?: string;
  /** The secret a rotation replaced: rungs are signed with it too for CALLBACK_SECRET_OVERLAP_SECONDS. */
  previousSecret?: { secret: string; rotatedAt: Date };
  updatedAt: Date;
  updatedBy: string;
}

export type EscalationPolicyStore = ReturnType<typeof createEscalationPolicyStore>;

export function createEscalationPolicyStore(db: Db) {
  const rows = db.collection<EscalationPolicyRow>('escalation_policies');
  return {
    async get(teamId: string): Promise<EscalationPolicyRow | null> {
      return rows.findOne({ _id: teamId });
    },

    /**
     * Replaces the webhook secret `current` with `next`, keeping `current` as the previous one; false when the
     * secret is no longer `current` (another rotation won).
     */
    async rotateSecret(teamId: string, current: string, next: string, at: Date): Promise<boolean> {
      const result = await rows.updateOne(
        { _id: teamId, webhookSecret: current },
        { $set: { webhookSecret: next, previousSecret: { secret: current, rotatedAt: at } } },
      );
      return result.modifiedCount === 1;
    },

    /** The ladder a run's question climbs: the launch's own, else its team's (read only then), else none. */
    async ladderFor(run: Pick<Run, 'teamId' | 'escalation'>): Promise<EscalationRung[]> {
      if (run.escalation) return run.escalation.rungs;
      const policy = await rows.findOne({ _id: run.teamId }, { projection: { rungs: 1 } });
      return policy?.rungs ?? [];
    },

    /**
     * Replaces the team's policy; the webhook secret is kept, or `newSecret` taken when there was none: made by one
     * conditional write, so first PUTs at once keep one secret and only the one that made it is told. The secret
     * goes last: a PUT cut before it made none, and its retry makes and tells it (made first, a PUT cut after it
     * left a secret nobody was ever told). Until then the URL has no secret, and its webhook rungs are not
     * addressable. A secret made whose answer was lost on its way is still never told (no route shows it again).
     */
    async put(
      teamId: string,
      policy: EscalationPolicy,
      by: string,
      now: Date,
      newSecret: () => string,
    ): Promise<{ row: EscalationPolicyRow; secretCreated: boolean }> {
      const row = await rows.findOneAndUpdate(
        { _id: teamId },
        {
          $set: {
            rungs: policy.rungs,
            ...(policy.webhookUrl !== undefined ? { webhookUrl: policy.webhookUrl } : {}),
            updatedAt: now,
            updatedBy: by,
          },
          ...(policy.webhookUrl === undefined ? { $unset: { webhookUrl: '' as const } } : {}),
        },
        { upsert: true, returnDocument: 'after' },
      );
      if (!row) throw new Error(`the escalation policy of ${teamId} was not written`);
      if (policy.webhookUrl === undefined || row.webhookSecret) return { row, secretCreated: false };
      const webhookSecret = newSecret();
      const made = await rows.updateOne(
        { _id: teamId, webhookSecret: { $exists: false } },
        { $set: { webhookSecret } },
      );
      if (made.modifiedCount === 1) return { row: { ...row, webhookSecret }, secretCreated: true };
      // Another PUT made it meanwhile: that one is told it. This one answers its own write, with the stored secret.
      const stored = await rows.findOne({ _id: teamId }, { projection: { webhookSecret: 1 } });
      return { row: { ...row, webhookSecret: stored?.webhookSecret }, secretCreated: false };
    },
  };
}
