// An answer stored whose run never resumed: the request that stored it died before the run's transition, and no
// device sent it again. The sweep, which finds the question's close missing, finishes it here through the answer
// route's own transition: the run resumes once, then the question closes on every device.
import type { Client } from '@temporalio/client';
import { createOutcomeEmitter } from '../client/emitter';
import { createHealthSignaler } from '../client/health';
import { createInteractionSignaler } from '../client/interaction';
import type { HealthOptions, InteractionRef } from '../contract/workflows';
import { NotFoundError } from '../domain/errors';
import type { Stores } from '../store';
import { answerInteraction } from './answer';
import { runsContext } from './context';

export function storedAnswerFinisher(deps: {
  stores: Pick<Stores, 'runs' | 'runTransitions' | 'events' | 'interactions' | 'actionTokens'>;
  client: Client;
  taskQueue: string;
  healthOptions: HealthOptions;
  /** Where a health signal or a close that failed is reported (the sweep replays the close). */
  onError: (runId: string, err: unknown) => void;
}): (ref: InteractionRef) => Promise<void> {
  const { stores, client, taskQueue } = deps;
  const ctx = runsContext({
    ...stores,
    emitter: createOutcomeEmitter({ client, taskQueue, runs: stores.runs, emitter: 'sweep' }),
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
  return async (ref) => {
    const interaction = await ctx.interactions.get(ref.runId, ref.interactionId);
    if (interaction?.status !== 'answered' || interaction.answer === undefined)
      throw new NotFoundError('no answer is stored for this question');
    const answeredBy = { userId: interaction.answeredBy ?? '', teamId: ref.teamId };
    await answerInteraction(ctx, answeredBy, ref.runId, ref.interactionId, interaction.answer);
  };
}
