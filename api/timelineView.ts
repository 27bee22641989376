// What GET /runs/:id/timeline shows: the run's pauses, each device notified, its receipts, the rungs, the answers.
import { ESCALATION_MAX_RUNGS, interactionClaimKeys, questionOpen, runWaitsOn } from '../domain/interaction';
import {
  deviceEntries,
  mergeTimeline,
  pauseEntries,
  rungEntries,
  type TimelineEntry,
  type TimelineRungClaim,
  type TimelineRungStep,
} from '../domain/timeline';
import { inputEpisodeId } from '../domain/outcome';
import type { InteractionChoice } from '../domain/push';
import type { Run } from '../domain/run';
import type { ClaimReader } from '../store/claims';
import type { EscalationPolicyStore } from '../store/escalationPolicies';
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

/** The question a paused run waits on: its prompt, and the choices its answer is one of (absent: any text). */
export interface OpenQuestion {
  interactionId: string;
  prompt: string;
  choices?: InteractionChoice[];
}

export function createTimelineView(deps: {
  interactions: Pick<InteractionStore, 'listForRun'>;
  pushDeliveries: Pick<PushDeliveryStore, 'listForEpisode'>;
  pushReceipts: Pick<PushReceiptStore, 'listForEpisode'>;
  claims: Pick<ClaimReader, 'byKeys'>;
  escalationPolicies: Pick<EscalationPolicyStore, 'get'>;
}) {
  /** The settled rungs of these pauses: one read by key (every rung each pause may have), whatever was sent. */
  async function rungsOf(
    run: Pick<Run, 'teamId' | 'escalation'>,
    interactionIds: string[],
  ): Promise<TimelineEntry[]> {
    const keys = interactionIds.flatMap((id) =>
      Array.from({ length: ESCALATION_MAX_RUNGS }, (_, index) => interactionClaimKeys.rung(id, index)),
    );
    const claims: TimelineRungClaim[] = (await deps.claims.byKeys(keys))
      .filter((row) => row.delivered)
      .map((row) => {
        const [, interactionId, index] = row._id.split('|');
        return { interactionId, index: Number(index), settledAt: row.sent_at, result: row.result };
      });
    if (!claims.length) return [];
    const ladder: TimelineRungStep[] =
      run.escalation?.rungs ?? (await deps.escalationPolicies.get(run.teamId))?.rungs ?? [];
    return rungEntries(claims, ladder);
  }

  return {
    /**
     * The run's timeline, oldest first; `truncated` when pauses or devices past the bounds were left out; and the
     * question the run waits on, if any (what the run page answers).
     */
    async forRun(
      run: Pick<Run, '_id' | 'teamId' | 'escalation' | 'status' | 'pause'>,
    ): Promise<{ entries: TimelineEntry[]; truncated: boolean; question?: OpenQuestion }> {
      const runId = run._id;
      // One past the bound says it was cut.
      const newest = await deps.interactions.listForRun(runId, TIMELINE_PAUSES + 1);
      // A question abandoned is a pause that was refused (a concurrent transition won): never asked. Unless the
      // run waits on it all the same (the pause's write landed, its acknowledgement was lost).
      const interactions = newest
        .slice(0, TIMELINE_PAUSES)
        .filter((i) => i.status !== 'abandoned' || runWaitsOn(run, i._id));
      let truncated = newest.length > TIMELINE_PAUSES;
      const perPause = await mapBounded(interactions, READS_IN_FLIGHT, async (interaction) => {
        const episodeId = inputEpisodeId(runId, interaction._id);
        const [read, receipts] = await Promise.all([
          deps.pushDeliveries.listForEpisode(episodeId, TIMELINE_DEVICES_PER_PAUSE + 1),
          deps.pushReceipts.listForEpisode(episodeId),
        ]);
        if (read.length > TIMELINE_DEVICES_PER_PAUSE) truncated = true;
        const devices = read
          .slice(0, TIMELINE_DEVICES_PER_PAUSE)
          .map((d) => ({ ...d, episodeId, interactionId: interaction._id }));
        return { devices, receipts };
      });
      const rungs = await rungsOf(
        run,
        interactions.map((interaction) => interaction._id),
      );
      const waitedOn = interactions.find((i) => questionOpen(run, i));
      return {
        entries: mergeTimeline(
          pauseEntries(interactions),
          perPause.flatMap((pause) => deviceEntries(pause.devices, pause.receipts)),
          rungs,
        ),
        truncated,
        ...(waitedOn
          ? {
              question: {
                interactionId: waitedOn._id,
                prompt: waitedOn.prompt,
                ...(waitedOn.choices?.length ? { choices: waitedOn.choices } : {}),
              },
            }
          : {}),
      };
    },
  };
}
