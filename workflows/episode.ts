// One outcome episode: a run paused or ended. The workflow decides; activities do the I/O.
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { RunOutcome } from '../domain/outcome';

const { recordEpisode } = proxyActivities<Activities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export interface EpisodeResult {
  episodeId: string;
}

export async function episodeWorkflow(outcome: RunOutcome): Promise<EpisodeResult> {
  await recordEpisode(outcome);
  return { episodeId: outcome.episodeId };
}
