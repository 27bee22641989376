// What GET /runs/:id/timeline shows: the run's pauses, each device notified, its receipts, and the answers.
import { deviceEntries, mergeTimeline, pauseEntries, type TimelineEntry } from '../domain/timeline';
import { inputEpisodeId } from '../domain/outcome';
import { mapBounded } from '../platform/concurrency';
import type { InteractionStore } from '../store/interactions';
import type { PushDeliveryStore } from '../store/push/deliveries';
import type { PushReceiptStore } from '../store/push/receipts';

/** The newest pauses a timeline covers, and the devices listed per pause. */
export const TIMELINE_PAUSES = 50;
export const TIMELINE_DEVICES_PER_PAUSE = 200;
/** Per-pause delivery reads in flight at once. */
const READS_IN_FLIGHT = 8;

export type TimelineView = ReturnType<typeof createTimelineView>;

export function createTimelineView(deps: {
  interactions: Pick<InteractionStore, 'listForRun'>;
  pushDeliveries: Pick<PushDeliveryStore, 'listForEpisode'>;
  pushReceipts: Pick<PushReceiptStore, 'listForRun'>;
}) {
  return {
    /** The run's timeline, oldest first; `truncated` when pauses or devices past the bounds were left out. */
    async forRun(runId: string): Promise<{ entries: TimelineEntry[]; truncated: boolean }> {
      const [newest, receipts] = await Promise.all([
        // One past the bound says it was cut.
        deps.interactions.listForRun(runId, TIMELINE_PAUSES + 1),
        deps.pushReceipts.listForRun(runId),
      ]);
      const interactions = newest.slice(0, TIMELINE_PAUSES);
      let truncated = newest.length > TIMELINE_PAUSES;
      const perPause = await mapBounded(interactions, READS_IN_FLIGHT, async (interaction) => {
        const episodeId = inputEpisodeId(runId, interaction._id);
        const read = await deps.pushDeliveries.listForEpisode(episodeId, TIMELINE_DEVICES_PER_PAUSE + 1);
        if (read.length > TIMELINE_DEVICES_PER_PAUSE) truncated = true;
        return read
          .slice(0, TIMELINE_DEVICES_PER_PAUSE)
          .map((d) => ({ ...d, episodeId, interactionId: interaction._id }));
      });
      return {
        entries: mergeTimeline(pauseEntries(interactions), deviceEntries(perPause.flat(), receipts)),
        truncated,
      };
    },
  };
}
