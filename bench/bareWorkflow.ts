// The episodes benchmark's baseline: a bare workflow with the episode workflow's shape and number of activities
// (one, then two branches of three), each activity doing nothing but note when it ran; and the escalation
// benchmark's: a pause at its barest (the question's activity, the rung's timer, the rung's activity). Bench-only: it is bundled
// from here with its own workflowsPath for its own worker and task queue, never registered by worker.ts.
import { proxyActivities, sleep } from '@temporalio/workflow';

export interface BareActivities {
  /** Does nothing; the benchmark notes when step 0 (the first activity) and step 2 (where a push goes) start. */
  noop(workflowId: string, step: number): Promise<void>;
}

// The same options as the episode workflow's quick activities.
const { noop } = proxyActivities<BareActivities>({
  startToCloseTimeout: '30 seconds',
  retry: {
    initialInterval: '1 second',
    backoffCoefficient: 2,
    maximumInterval: '1 minute',
    maximumAttempts: 20,
  },
});

/** recordEpisode; then (tryMark → deliverPush → markDelivered) ∥ (tryMark → sendCallback → markDelivered). */
export async function bareEpisodeWorkflow(id: string): Promise<string> {
  await noop(id, 0);
  const branch = async (first: number): Promise<void> => {
    for (let step = first; step < first + 3; step++) await noop(id, step);
  };
  await Promise.all([branch(1), branch(4)]);
  return id;
}

/** The steps a bare pause's activities note: where the question's push goes, and the rung's. */
export const QUESTION_STEP = 99;
export const RUNG_STEP = 100;

/**
 * A pause at its barest: one activity in place of the question's push and, from the start, the first rung's timer;
 * then one activity in place of the rung's push. Any design that pushes the question and keeps the rung on a
 * durable timer does this (ours times the rung from the question's record, not from its push).
 */
export async function bareLadderWorkflow(id: string, rungSeconds: number): Promise<void> {
  await Promise.all([noop(id, QUESTION_STEP), sleep(rungSeconds * 1000)]);
  await noop(id, RUNG_STEP);
}
