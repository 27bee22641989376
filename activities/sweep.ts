// The reconciliation sweep: replays the episodes whose start never happened (emitter crashed, Temporal was
// unreachable) or whose family released its claim. Claims are pre-checked a page at a time before any run
// is loaded; starts are idempotent by workflow id.
import type { Client } from '@temporalio/client';
import { startEpisode } from '../client/emitter';
import { buildRunOutcome } from '../domain/outcome';
import { owedEpisode, type SweepFamilies } from '../domain/sweep';
import type { ClaimStore } from '../store/claims';
import type { PushDeliveryStore } from '../store/pushDeliveries';
import type { RunStore } from '../store/runs';
import type { EpisodeOptions } from '../workflows/episode';

export interface SweepDeps {
  runs: RunStore;
  claims: ClaimStore;
  pushDeliveries: PushDeliveryStore;
  client: Client;
  taskQueue: string;
  episodeOptions: EpisodeOptions;
  families: SweepFamilies;
  lookbackSeconds: number;
  pageSize: number;
  now: () => Date;
}

export interface SweepReport {
  scanned: number;
  unsettled: number;
  started: number;
  reaped: number;
}

export function createSweepActivities(deps: SweepDeps) {
  return {
    async sweepOnce(): Promise<SweepReport> {
      const report: SweepReport = { scanned: 0, unsettled: 0, started: 0, reaped: 0 };
      const since = new Date(deps.now().getTime() - deps.lookbackSeconds * 1000);
      for await (const page of deps.runs.listNotifiableRefs(since, deps.pageSize)) {
        report.scanned += page.length;
        const owed = page.flatMap((ref) => owedEpisode(ref, deps.families) ?? []);
        const marked = await deps.claims.markedAmong(owed.flatMap((episode) => episode.keys));
        const unsettled = owed.filter((episode) => episode.keys.some((key) => !marked.has(key)));
        report.unsettled += unsettled.length;
        for (const run of await deps.runs.getManyById(unsettled.map((episode) => episode.runId))) {
          const outcome = buildRunOutcome(run);
          // The run may have moved on since the page was read; its new episode is the emitter's to start.
          if (!outcome || !unsettled.some((episode) => episode.episodeId === outcome.episodeId)) continue;
          if (
            await startEpisode(deps.client, deps.taskQueue, outcome, deps.episodeOptions, 'ALLOW_DUPLICATE')
          ) {
            report.started++;
          }
        }
      }
      // TTL indexes do this where the server has them (not FerretDB v1); harmless where they do.
      report.reaped = (await deps.claims.reapExpired()) + (await deps.pushDeliveries.reapExpired(deps.now()));
      return report;
    },
  };
}
