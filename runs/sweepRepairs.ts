// What the sweep finishes through the runs service's own transitions, when the request that began it died:
// - an answer stored whose run never resumed (no device sent it again): found by the question's close missing, the
//   run resumes once through the answer route's transition, then the question closes on every device;
// - a revision won whose status write, events or health signal never landed (no caller met it since): finished,
//   and its outcome goes out.
import type { Client } from '@temporalio/client';
import { createOutcomeEmitter } from '../client/emitter';
import { createHealthSignaler } from '../client/health';
import { createInteractionSignaler } from '../client/interaction';
import type { EpisodeOptions, HealthOptions, InteractionRef } from '../contract/workflows';
import { NotFoundError } from '../domain/errors';
import type { Stores } from '../store';
import { answerInteraction } from './answer';
import { runsContext } from './context';
import { finishStuck } from './transition';

export interface SweepRepairs {
  finishStoredAnswer(ref: InteractionRef): Promise<void>;
  /** True when the run's revision was left won and unfinished, and now is not. */
  finishStuckTransition(runId: string, revision: number): Promise<boolean>;
}

export function sweepRepairs(deps: {
  stores: Pick<
    Stores,
    'runs' | 'runTransitions' | 'events' | 'interactions' | 'actionTokens' | 'teamRemovals' | 'claims'
  >;
  client: Client;
  taskQueue: string;
  healthOptions: HealthOptions;
  /** The worker's own (its callback schedule and timeouts), as every emitter passes them. */
  episodeOptions: EpisodeOptions;
  /** Where a health signal or a close that failed is reported (the sweep replays the close). */
  onError: (runId: string, err: unknown) => void;
}): SweepRepairs {
  const { stores, client, taskQueue } = deps;
  const ctx = runsContext({
    ...stores,
    emitter: createOutcomeEmitter({
      client,
      taskQueue,
      runs: stores.runs,
      options: deps.episodeOptions,
      emitter: 'sweep',
    }),
    // Once, not batched: the resumed run's health hears of it now (its stall clock runs again).
    health: createHealthSignaler({
      client,
      taskQueue,
      options: deps.healthOptions,
      batchMs: 0,
      onError: deps.onError,
    }),
    interactionSignals: createInteractionSignaler(client, taskQueue),
    onEmitError: deps.onError,
  });
  return {
    async finishStoredAnswer(ref) {
      const interaction = await ctx.interactions.get(ref.runId, ref.interactionId);
      if (interaction?.status !== 'answered' || interaction.answer === undefined)
        throw new NotFoundError('no answer is stored for this question');
      const answeredBy = { userId: interaction.answeredBy ?? '', teamId: ref.teamId };
      await answerInteraction(ctx, answeredBy, ref.runId, ref.interactionId, interaction.answer);
    },
    finishStuckTransition: (runId, revision) => finishStuck(ctx, runId, revision),
  };
}
