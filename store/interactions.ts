// interactions: what a paused run asks a human, and the answer that resumes it.
import type { Db } from 'mongodb';
import type { EscalationRung } from '../domain/interaction';
import type { InteractionChoice } from '../domain/push';
import type { IndexSpec } from './mongo';
import { inPages } from './paging';

export interface Interaction {
  _id: string;
  runId: string;
  teamId: string;
  prompt: string;
  /** What a notification offers to answer with (at most 3); the answer is then a choice's id. */
  choices?: InteractionChoice[];
  status: 'pending' | 'answered' | 'abandoned';
  answer?: string;
  createdAt: Date;
  answeredAt?: Date;
  /** The user whose answer was taken. */
  answeredBy?: string;
  /** The escalation ladder as it was when the question was asked (keepLadder): every execution climbs this one. */
  ladder?: EscalationRung[];
}

/** What the sweep reads of an answered interaction to replay its close. */
export type AnsweredInteraction = Pick<Interaction, '_id' | 'runId' | 'teamId' | 'answeredBy' | 'answeredAt'>;

export const interactionIndexes: IndexSpec[] = [
  { collection: 'interactions', key: { runId: 1, createdAt: 1 }, options: { name: 'run_interactions' } },
  // answeredSince: the sweep's replay of answered closes that never ran.
  { collection: 'interactions', key: { answeredAt: 1 }, options: { name: 'answered_at' } },
];

export type InteractionStore = ReturnType<typeof createInteractionStore>;

export function createInteractionStore(db: Db) {
  const interactions = db.collection<Interaction>('interactions');
  return {
    async insert(interaction: Interaction): Promise<void> {
      await interactions.insertOne(interaction);
    },

    async get(runId: string, interactionId: string): Promise<Interaction | null> {
      return interactions.findOne({ _id: interactionId, runId });
    },

    /**
     * Records the answer once: false when the interaction was already answered. The engine calls it only for
     * the interaction its run is paused on, which may read "abandoned" when the pause's write landed but its
     * acknowledgement was lost (the pause then abandons it): the run waits on it all the same, so it is taken.
     */
    async recordAnswer(
      interactionId: string,
      answer: string,
      now: Date,
      answeredBy: string,
    ): Promise<boolean> {
      const result = await interactions.updateOne(
        { _id: interactionId, status: { $in: ['pending', 'abandoned'] } },
        { $set: { status: 'answered', answer, answeredAt: now, answeredBy } },
      );
      return result.modifiedCount === 1;
    },

    /**
     * Takes back the answer this caller stored at `at` (its run moved on another way before it resumed on it):
     * the question as it was, `status` again. Another answer, stored since, is left alone.
     */
    async withdrawAnswer(
      interactionId: string,
      status: Interaction['status'],
      at: Date,
      answeredBy: string,
    ): Promise<void> {
      await interactions.updateOne(
        { _id: interactionId, status: 'answered', answeredAt: at, answeredBy },
        { $set: { status }, $unset: { answer: '', answeredAt: '', answeredBy: '' } },
      );
    },

    /** The run's newest interactions, newest first, at most `limit` (the views: who answered, when). */
    async listForRun(runId: string, limit: number): Promise<Interaction[]> {
      return interactions.find({ runId }).sort({ createdAt: -1 }).limit(limit).toArray();
    },

    /**
     * Interactions answered since `since`, in pages of `pageSize` (the sweep's window): one cursor, a batch per
     * page, so a caller that found what it looks for stops reading.
     */
    answeredSince(since: Date, pageSize: number): AsyncGenerator<AnsweredInteraction[]> {
      const cursor = interactions.find(
        { answeredAt: { $gte: since } },
        { projection: { runId: 1, teamId: 1, answeredBy: 1, answeredAt: 1 }, batchSize: pageSize + 1 },
      );
      return inPages<AnsweredInteraction>(cursor, pageSize);
    },

    /**
     * The ladder the question climbs: the one kept with it, else `rungs`, kept from now on. Its rungs' claims are
     * keyed by their place in it, so a later execution that read a changed policy would skip one rung and send
     * another twice.
     */
    async keepLadder(interactionId: string, rungs: EscalationRung[]): Promise<EscalationRung[]> {
      const kept = await interactions.updateOne(
        { _id: interactionId, ladder: { $exists: false } },
        { $set: { ladder: rungs } },
      );
      if (kept.modifiedCount === 1) return rungs;
      const found = await interactions.findOne({ _id: interactionId }, { projection: { ladder: 1 } });
      return found?.ladder ?? rungs;
    },

    /** A pause whose run moved on before it was saved leaves no pending question behind. */
    async abandon(interactionId: string): Promise<void> {
      await interactions.updateOne(
        { _id: interactionId, status: 'pending' },
        { $set: { status: 'abandoned' } },
      );
    },
  };
}
