// What GET /runs/:id/episodes shows: every recorded episode of a run and each family's claim state.
import { shouldNotify } from '../domain/callback';
import { claimKeys, interactionOfEpisode } from '../domain/outcome';
import type { ClaimState } from '../domain/outcome';
import type { ClaimDescription, ClaimStore } from '../store/claims';
import type { PushDelivery, PushDeliveryStore } from '../store/push/deliveries';
import type { PushHoldStore } from '../store/push/holds';
import { mapBounded } from '../platform/concurrency';
import { answersOf, deviceReceiptView, pushHeldView, receiptKey, receiptsByDevice } from '../operator/views';
import type { DeviceReceiptView, PushHeldView } from '../operator/explanation';
import type { InteractionStore } from '../store/interactions';
import type { PushReceiptStore } from '../store/push/receipts';
import type { EpisodeStore } from '../store/episodes';
import type { CallbackAttemptRow, CallbackAttemptStore } from '../store/callback/attempts';
import type { PageCursor } from '../store/paging';

/** A run's interactions read for who answered (a run pauses a few times; past this, the newest). */
export const MAX_INTERACTIONS_READ = 200;

/** Attempts shown per episode: the schedule's 11 at most, plus rate-limited redeliveries. */
export const MAX_ATTEMPTS_SHOWN = 1000;

/** The fields of an attempt row the episodes view shows, those present: what a launcher sees of an attempt. */
const SUMMARY_FIELDS = [
  'attempt',
  'at',
  'durationMs',
  'result',
  'status',
  'error',
  'retryAfterSeconds',
  'nextWaitSeconds',
  'nextAttemptAt',
  'trigger',
] as const;

/** What a launcher sees of one callback attempt (no Temporal internals). */
export type CallbackAttemptSummary = Pick<CallbackAttemptRow, (typeof SUMMARY_FIELDS)[number]>;

export function attemptSummary(row: CallbackAttemptRow): CallbackAttemptSummary {
  return Object.fromEntries(
    SUMMARY_FIELDS.flatMap((field) => (row[field] === undefined ? [] : [[field, row[field]]])),
  ) as CallbackAttemptSummary;
}

export interface EpisodeSummary {
  episodeId: string;
  kind: string;
  recordedAt: Date;
  families: Record<keyof typeof claimKeys, ClaimDescription>;
  /** Push endpoints the episode reached. */
  pushDeliveries: number;
  /**
   * Each device reached (the first MAX_DEVICES_SHOWN): when it was sent, what its service worker reported (or that
   * nothing came), and when its person answered.
   */
  pushDevices: PushDeviceView[];
  /**
   * An input request's pushes after the question, per device (the first MAX_DEVICES_SHOWN): each rung's
   * (`followUp: "rung:<n>"`), snooze's (`snooze:<id>`) and the close's (`answered`).
   */
  followUpDevices: (PushDeviceView & { followUp: string })[];
  /** Recipients held for their digest instead (quiet hours, do-not-disturb, a burst), and the digest it went in. */
  pushHeld: PushHeldView[];
  /** Every attempt of its completion callback, oldest first (the schedule's and redeliveries), newest 1000. */
  callbackAttempts: CallbackAttemptSummary[];
}

/** Store commands a page of episodes keeps in flight at most: the API's connection pool serves every team. */
export const EPISODE_READS_IN_FLIGHT = 32;
/**
 * Store commands one episode of a page has in flight at most: its three claims, its deliveries, follow-ups (two),
 * receipts (two), holds and callback attempts, read together.
 */
const READS_PER_EPISODE = 10;
const EPISODES_AT_ONCE = Math.max(1, Math.floor(EPISODE_READS_IN_FLIGHT / READS_PER_EPISODE));

/** Devices listed per episode (the count is whole). */
export const MAX_DEVICES_SHOWN = 500;

export type PushDeviceView = { userId: string; subscriptionId: string; sentAt: Date } & DeviceReceiptView;

export type EpisodeView = ReturnType<typeof createEpisodeView>;

export function createEpisodeView(deps: {
  episodes: EpisodeStore;
  claims: ClaimStore;
  pushDeliveries: PushDeliveryStore;
  callbackAttempts: CallbackAttemptStore;
  pushHolds: PushHoldStore;
  pushReceipts: PushReceiptStore;
  interactions: InteractionStore;
}) {
  return {
    /** The callback family's claim of one episode of the run; undefined when the team has no such episode. */
    async callbackClaim(
      teamId: string,
      runId: string,
      episodeId: string,
    ): Promise<{ state: ClaimState; result?: string; stale?: true; owedCallbackAt?: Date } | undefined> {
      const [recorded, claim] = await Promise.all([
        deps.episodes.getForRun(teamId, runId, episodeId),
        deps.claims.describe(claimKeys.callback(episodeId)),
      ]);
      // owedCallbackAt: when an episode that owed its run's callback was recorded (a pause, or an end its
      // launcher left out of `events`, owed none).
      if (recorded)
        return shouldNotify(recorded.outcome) ? { ...claim, owedCallbackAt: recorded.recordedAt } : claim;
      // The record is a view written beside the branches and may be missing; an episode id starts with its run's
      // id (the caller's team's, checked by the route), so a claim under it belongs to this run.
      return episodeId.startsWith(`${runId}:`) && claim.state !== 'absent' ? claim : undefined;
    },

    /** How many attempts of its callback the episode has logged (a redelivery request's view of them). */
    callbackAttemptCount(episodeId: string): Promise<number> {
      return deps.callbackAttempts.countForEpisode(episodeId);
    },

    /**
     * One page of the run's episodes, newest first, each with its newest attempts (one read per episode, on its
     * index). `callbackAttemptsTruncated`: an episode of the page has more than MAX_ATTEMPTS_SHOWN; its oldest are
     * left out. `next`: where the next (older) page starts, when there is one.
     */
    async listForRun(
      teamId: string,
      runId: string,
      page: { limit: number; before?: PageCursor },
    ): Promise<{ episodes: EpisodeSummary[]; callbackAttemptsTruncated: boolean; next?: PageCursor }> {
      const [{ rows, next }, interactions] = await Promise.all([
        deps.episodes.listForRun(teamId, runId, page.limit, page.before),
        deps.interactions.listForRun(runId, MAX_INTERACTIONS_READ),
      ]);
      const answers = answersOf(interactions);
      let callbackAttemptsTruncated = false;
      const episodes = await mapBounded(rows, EPISODES_AT_ONCE, async (row) => {
        const interactionId = interactionOfEpisode(runId, row._id);
        const [families, delivered, read, followUps, receiptRows, held] = await Promise.all([
          Promise.all(
            (Object.keys(claimKeys) as (keyof typeof claimKeys)[]).map(
              async (family) => [family, await deps.claims.describe(claimKeys[family](row._id))] as const,
            ),
          ).then((entries) => Object.fromEntries(entries) as EpisodeSummary['families']),
          deps.pushDeliveries.listForEpisode(row._id, Number.MAX_SAFE_INTEGER),
          // One past the cap says it was cut.
          deps.callbackAttempts.listForEpisode(row._id, MAX_ATTEMPTS_SHOWN + 1),
          interactionId ? deps.pushDeliveries.listFollowUps(row._id, interactionId, MAX_DEVICES_SHOWN) : [],
          deps.pushReceipts.listForEpisode(row._id, interactionId),
          deps.pushHolds.listForEpisode(row._id, MAX_DEVICES_SHOWN),
        ]);
        const receipts = receiptsByDevice(receiptRows);
        const answer = interactionId ? answers.get(interactionId) : undefined;
        const deviceView = (d: PushDelivery & { episodeId: string }): PushDeviceView => ({
          userId: d.userId,
          subscriptionId: d.subscriptionId,
          sentAt: d.at,
          ...deviceReceiptView(receipts.get(receiptKey(d.episodeId, d.subscriptionId)), answer, d.userId),
        });
        const cut = read.length > MAX_ATTEMPTS_SHOWN;
        if (cut) callbackAttemptsTruncated = true;
        return {
          episodeId: row._id,
          kind: row.kind,
          recordedAt: row.recordedAt,
          families,
          pushDeliveries: delivered.length,
          pushDevices: delivered.slice(0, MAX_DEVICES_SHOWN).map(deviceView),
          followUpDevices: followUps.map((d) => ({ followUp: d.followUp, ...deviceView(d) })),
          pushHeld: held.map(pushHeldView),
          callbackAttempts: (cut ? read.slice(1) : read).map(attemptSummary),
        };
      });
      return { episodes, callbackAttemptsTruncated, ...(next ? { next } : {}) };
    },
  };
}
