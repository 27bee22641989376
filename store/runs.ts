// runs: one document per run. Reads are team-scoped for the API; the outcome emitters and the sweep read
// without a tenant filter (they act for the system, not for a caller).
import type { Collection, Db, Filter } from 'mongodb';
import { listedAnswer, type Run } from '../domain/run';
import type { SweepRef } from '../domain/sweep';
import type { RunStatus } from '../domain/runStatus';
import type { IndexSpec, RetiredIndex } from './mongo';
import { inPages, pageNewestFirst, type Page, type PageCursor } from './paging';

export const runIndexes: IndexSpec[] = [
  // listForTeam: a team's runs newest first, a page at a time (_id breaks ties in createdAt).
  { collection: 'runs', key: { teamId: 1, createdAt: -1, _id: -1 }, options: { name: 'team_created' } },
  // listNotifiableRefs: runs that changed inside the sweep's lookback window.
  { collection: 'runs', key: { updatedAt: 1, _id: 1 }, options: { name: 'updated_at' } },
];

/** Replaced by team_created (it could not serve the tie-break on _id). */
export const retiredRunIndexes: RetiredIndex[] = [{ collection: 'runs', name: 'team_recent' }];

/**
 * What a listing reads of a run: not its final answer nor answers still staged (1 MB each), nor the lists only its
 * own page shows (listedRun), nor secrets.
 */
const LISTED = {
  finalAnswer: 0,
  pendingAnswers: 0,
  escalation: 0,
  watchedIssueIds: 0,
  assistantWatchers: 0,
  'callback.secret': 0,
  'callback.previousSecret': 0,
};

const NOTIFIABLE: RunStatus[] = ['paused', 'finished', 'failed', 'cancelled'];
/**
 * What the sweep reads of a run: all an outcome needs but its final answer (up to 1 MB, read only for the runs
 * that owe an episode: finalAnswersOf), not its checkpoint, answers still staged nor secrets.
 */
const SWEEP_REF = {
  checkpoint: 0,
  finalAnswer: 0,
  pendingAnswers: 0,
  'callback.secret': 0,
  'callback.previousSecret': 0,
};

export type RunStore = ReturnType<typeof createRunStore>;

/** A caller's and the system's reads: one run, a team's listing, the sweep's window. */
function createRunReads(runs: Collection<Run>) {
  /** The final answers of these runs (those that have one), by run id: what the listings leave out. */
  async function finalAnswersOf(runIds: string[]): Promise<Map<string, string>> {
    if (!runIds.length) return new Map();
    const rows = await runs
      .find({ _id: { $in: runIds }, finalAnswer: { $exists: true } }, { projection: { finalAnswer: 1 } })
      .toArray();
    return new Map(rows.map((row) => [row._id, row.finalAnswer!]));
  }

  return {
    /** A caller's view: another team's run does not exist. */
    async getForTeam(teamId: string, runId: string): Promise<Run | null> {
      return runs.findOne({ _id: runId, teamId });
    },

    /** What a run waits on now (its status and pause), read alone: a question's push asks it before each send. */
    async waitingOf(teamId: string, runId: string): Promise<Pick<Run, 'status' | 'pause'> | null> {
      return runs.findOne({ _id: runId, teamId }, { projection: { _id: 0, status: 1, pause: 1 } });
    },

    /** waitingOf for each of a team's runs, in one read; a run not found is left out. */
    async waitingOfEach(
      teamId: string,
      runIds: string[],
    ): Promise<Map<string, Pick<Run, 'status' | 'pause'>>> {
      if (!runIds.length) return new Map();
      const rows = await runs
        .find({ _id: { $in: runIds }, teamId }, { projection: { status: 1, pause: 1 } })
        .toArray();
      return new Map(rows.map(({ _id, status, pause }) => [_id, { status, pause }]));
    },

    /** The system's view (outcome emitters, sweep, delivery): no tenant filter. */
    async getById(runId: string): Promise<Run | null> {
      return runs.findOne({ _id: runId });
    },

    /**
     * A team's runs, newest first: `limit` of them from `before` on, each with its final answer's listing in place
     * of the answer (up to 1 MB each); a run ended before listings were written has its answer read apart, once.
     */
    async listForTeam(teamId: string, limit: number, before?: PageCursor): Promise<Page<Run>> {
      const page = await pageNewestFirst(runs, { teamId }, 'createdAt', limit, before, LISTED);
      const unlisted = page.rows
        .filter((run) => run.status === 'finished' && !run.listing)
        .map((run) => run._id);
      if (!unlisted.length) return page;
      const answers = await finalAnswersOf(unlisted);
      const listings = new Map([...answers].map(([runId, answer]) => [runId, listedAnswer(answer)]));
      // Written back (an ended run's answer never changes), so each such run is read whole once more at most;
      // a write that fails is tried again by the next listing that shows the run.
      if (listings.size)
        await runs
          .bulkWrite(
            [...listings].map(([_id, listing]) => ({
              updateOne: { filter: { _id, status: 'finished' as const }, update: { $set: { listing } } },
            })),
            { ordered: false },
          )
          .catch(() => undefined);
      return {
        ...page,
        rows: page.rows.map((run) => ({ ...run, listing: listings.get(run._id) ?? run.listing })),
      };
    },

    /**
     * Paused or ended runs changed since `since`, in pages of `pageSize`, without their checkpoint: one cursor,
     * so each page after the first costs one getMore round trip. Unordered on purpose: FerretDB v1 sorts in
     * memory (the whole window is read and held before the first page), while an unsorted cursor streams; on
     * MongoDB the `updated_at` index serves the range either way. The cursor's batches hold one run more than a
     * page, so a listing whose last page is exactly full still ends in its last batch instead of an empty getMore:
     * n runs cost at most max(1, ceil(n / pageSize)) round trips.
     */
    listNotifiableRefs(since: Date, pageSize: number): AsyncGenerator<SweepRef[]> {
      const cursor = runs.find(
        { updatedAt: { $gte: since }, status: { $in: NOTIFIABLE } },
        { projection: SWEEP_REF, batchSize: pageSize + 1 },
      );
      return inPages(cursor as AsyncIterable<SweepRef>, pageSize);
    },

    /** Of these runs, the paused or ended ones not changed since `before` (outside the sweep's window), as listed. */
    async notifiableRefsBefore(runIds: string[], before: Date): Promise<SweepRef[]> {
      if (!runIds.length) return [];
      const listed = await runs
        .find(
          { _id: { $in: runIds }, updatedAt: { $lt: before }, status: { $in: NOTIFIABLE } },
          { projection: SWEEP_REF },
        )
        .toArray();
      return listed as SweepRef[];
    },

    finalAnswersOf,
  };
}

/** Assistants watching a run (their watch vetoes the pause's notification). */
function createRunWatchers(runs: Collection<Run>) {
  /** The run's copy of a watch dropped, touching nothing else. */
  const dropWatcher = async (teamId: string, runId: string, assistantId: string): Promise<void> => {
    await runs.updateOne({ _id: runId, teamId }, { $pull: { assistantWatchers: assistantId } });
  };
  return {
    /**
     * An assistant's watch begins: the run carries it so the sweep sees the veto. False when the team has no such
     * run, or (with `max`) when it carries that many others.
     */
    async addWatcher(teamId: string, runId: string, assistantId: string, max?: number): Promise<boolean> {
      // Held already, or a place left: never past `max`, whatever races.
      const room =
        max === undefined
          ? {}
          : {
              $or: [
                { assistantWatchers: assistantId },
                { [`assistantWatchers.${max - 1}`]: { $exists: false } },
              ],
            };
      const result = await runs.updateOne(
        { _id: runId, teamId, ...room },
        { $addToSet: { assistantWatchers: assistantId } },
      );
      return result.matchedCount === 1;
    },

    /**
     * An assistant's watch ends. A run paused on a question not known to have reached anyone (the veto may have held
     * it back, or its push failed) is touched too (updatedAt), so the question, however old, is back in the sweep's
     * window and owed again. Returns whether it was: a question that reached someone is not replayed (once its
     * claims expired, a replay would push it, and start its ladder, again).
     */
    async removeWatcher(teamId: string, runId: string, assistantId: string, now: Date): Promise<boolean> {
      const heldBack = await runs.updateOne(
        {
          _id: runId,
          teamId,
          status: 'paused',
          'pause.reason': 'human_input',
          'pause.offered': { $ne: true },
        },
        { $pull: { assistantWatchers: assistantId }, $set: { updatedAt: now } },
      );
      if (heldBack.matchedCount === 1) return true;
      await dropWatcher(teamId, runId, assistantId);
      return false;
    },

    dropWatcher,

    /** The run's question reached someone (a device, or a digest): a watch's end owes it no replay. */
    async noteQuestionOffered(teamId: string, runId: string, interactionId: string): Promise<void> {
      await runs.updateOne(
        { _id: runId, teamId, status: 'paused', 'pause.interactionId': interactionId },
        { $set: { 'pause.offered': true } },
      );
    },
  };
}

/** Status transitions and the answers a complete hands to the caller finishing it. */
function createRunTransitions(runs: Collection<Run>) {
  return {
    /**
     * Applies a transition decided on (status, revision): the run moves to revision + 1. The caller won the
     * revision first (run_transitions), so this write is never contested; the filter makes a repeat of it (a
     * retry, or a caller finishing a transition whose writer died) a no-op. Returns the updated run, or null
     * when the run is no longer at that revision.
     */
    async transition(
      runId: string,
      expected: { status: RunStatus; revision: number },
      set: Partial<Run>,
      unset: (keyof Run)[] = [],
    ): Promise<Run | null> {
      const update: Record<string, unknown> = { $set: { ...set, revision: expected.revision + 1 } };
      if (unset.length) update.$unset = Object.fromEntries(unset.map((k) => [k, '']));
      // The update and the run as it left it, in one command.
      return runs.findOneAndUpdate(
        { _id: runId, status: expected.status, ...atRevision(expected.revision) },
        update,
        { returnDocument: 'after' },
      );
    },

    /**
     * A complete's answer, put where a caller finishing its transition can read it (see Run.pendingAnswers), by
     * the transition that won `revision`: only while the run is still there and no one gave the token up. False:
     * the transition was taken over (giveUpAnswer) or the run moved on.
     */
    async stageAnswer(runId: string, revision: number, token: string, answer: string): Promise<boolean> {
      const result = await runs.updateOne(
        { _id: runId, ...atRevision(revision), [`pendingAnswers.${token}`]: { $exists: false } },
        { $set: { [`pendingAnswers.${token}`]: answer } },
      );
      return result.modifiedCount === 1;
    },

    /**
     * Gives up the answer of the transition that won `revision` and never staged it (its writer died between
     * the two): a null in its place, so a late stageAnswer of it fails. True: the token is given up (now or
     * before); false: the answer is staged, or the run moved on.
     */
    async giveUpAnswer(runId: string, revision: number, token: string): Promise<boolean> {
      const key = `pendingAnswers.${token}`;
      const result = await runs.updateOne(
        { _id: runId, ...atRevision(revision), [key]: { $exists: false } },
        { $set: { [key]: null } },
      );
      if (result.modifiedCount === 1) return true;
      const run = await runs.findOne({ _id: runId, ...atRevision(revision) }, { projection: { [key]: 1 } });
      return run?.pendingAnswers?.[token] === null;
    },
  };
}

/** What delivery writes back on a run: the rotated callback secret, the operator alert marker. */
function createRunMarks(runs: Collection<Run>) {
  return {
    /**
     * Replaces the run's callback secret with `next`, keeping `current` as the previous one from `at` on; only while
     * `current` is still the run's secret (one conditional write). False: another rotation did first.
     */
    async rotateCallbackSecret(runId: string, current: string, next: string, at: Date): Promise<boolean> {
      const result = await runs.updateOne(
        { _id: runId, 'callback.secret': current },
        {
          $set: {
            'callback.secret': next,
            'callback.previousSecret': { secret: current, rotatedAt: at },
          },
        },
      );
      return result.modifiedCount === 1;
    },

    /** The operator transition marker: which confirmed operator alerts this run has had. */
    async stampOpsMarker(runId: string, episodeKey: string, at: Date): Promise<void> {
      await runs.updateOne(
        { _id: runId },
        { $addToSet: { opsAlerted: episodeKey }, $set: { opsAlertedAt: at } },
      );
    },
  };
}

export function createRunStore(db: Db) {
  const runs: Collection<Run> = db.collection<Run>('runs');
  return {
    async insert(run: Run): Promise<void> {
      await runs.insertOne(run);
    },

    ...createRunReads(runs),
    ...createRunWatchers(runs),
    ...createRunTransitions(runs),
    ...createRunMarks(runs),
  };
}

/** A filter on a run's revision; revision 0 is also a run written before revisions were kept (no field). */
function atRevision(revision: number): Filter<Run> {
  return { revision: revision === 0 ? { $in: [0, null] } : revision } as Filter<Run>;
}
