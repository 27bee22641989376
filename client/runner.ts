// The runner pods' emitter: a runner reports a queue message's delivery disposition; only a final one emits the
// run's outcome, read under the message's tenant identity and built by the same buildRunOutcome as the API,
// so the API and a runner reporting one episode start one workflow.
import type { EmitResult, OutcomeEmitter } from './emitter';
import type { HealthSignaler } from './health';

/** The message will not be delivered again: the run's outcome is settled. */
export const FINAL_DISPOSITIONS = ['ack', 'dead_letter', 'cancelled'] as const;
/** The message goes back to the queue: another delivery may still change the run's outcome. */
export const NON_FINAL_DISPOSITIONS = ['nack', 'retry', 'requeue', 'deferred'] as const;

export type Disposition = (typeof FINAL_DISPOSITIONS)[number] | (typeof NON_FINAL_DISPOSITIONS)[number];

export function isDisposition(value: string): value is Disposition {
  return (FINAL_DISPOSITIONS as readonly string[]).concat(NON_FINAL_DISPOSITIONS).includes(value);
}

export function isFinal(disposition: Disposition): boolean {
  return (FINAL_DISPOSITIONS as readonly string[]).includes(disposition);
}

export type RunnerEmitResult = { emitted: false; reason: string } | ({ emitted: true } & EmitResult);

/**
 * Emits the run's outcome for a final disposition. With a health signaler, the runner's view of the run's end
 * reaches its health workflow too (the API never saw it when the run ended on a runner pod), with when the end was
 * written: spend written before it and told after it is still counted.
 */
export async function emitFromRunner(
  emitter: OutcomeEmitter,
  message: { runId: string; teamId: string; disposition: Disposition },
  health?: HealthSignaler,
): Promise<RunnerEmitResult> {
  if (!isFinal(message.disposition)) {
    return { emitted: false, reason: `disposition ${message.disposition} is not final` };
  }
  const result = await emitter.emitRunOutcome(message.runId, undefined, message.teamId);
  if (!result)
    return { emitted: false, reason: 'the run owes no outcome (unknown to this team, or running)' };
  if (health && result.kind !== 'run_paused') {
    const writtenAt = Date.parse(result.occurredAt);
    // The outcome went out whatever health answers: a refused end is held for its retries (the CLI's flush at
    // exit tries it again), and the run's stall check reads the run's end from the store meanwhile.
    await health
      .observe({ _id: message.runId, teamId: message.teamId }, [{ type: result.kind, writtenAt }])
      .catch(() => undefined);
  }
  return { emitted: true, ...result };
}
