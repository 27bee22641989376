// The run status machine:
//   running → paused(human_input | usage_park | operator) → running → finished | failed | cancelled
// Pure: callers read the run, ask here whether the operation is legal, then write conditionally on the status
// they read, so a concurrent transition loses instead of overwriting.
import { ConflictError } from './errors';

export const RUN_STATUSES = ['running', 'paused', 'finished', 'failed', 'cancelled'] as const;
export type RunStatus = (typeof RUN_STATUSES)[number];

export const TERMINAL_STATUSES: readonly RunStatus[] = ['finished', 'failed', 'cancelled'];

export type PauseReason = 'human_input' | 'usage_park' | 'operator';

export type RunOperation =
  | 'pause' // ask a human
  | 'park' // usage cap reached
  | 'soft_pause' // operator
  | 'answer' // a human answered: resumes a human_input pause
  | 'resume' // resumes a usage park or an operator soft-pause
  | 'complete'
  | 'fail'
  | 'cancel';

export class IllegalTransitionError extends ConflictError {
  override name = 'IllegalTransitionError';
}

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

/** The status an operation leads to from (status, pauseReason), or an IllegalTransitionError saying why not. */
export function nextStatus(
  status: RunStatus,
  pauseReason: PauseReason | undefined,
  op: RunOperation,
): RunStatus {
  const refuse = (why: string): never => {
    throw new IllegalTransitionError(
      `cannot ${op.replace('_', '-')} a ${describe(status, pauseReason)} run: ${why}`,
    );
  };
  if (isTerminal(status)) refuse('the run has ended');
  switch (op) {
    case 'pause':
    case 'park':
    case 'soft_pause':
    case 'complete':
      if (status !== 'running') refuse('it is not running');
      return op === 'complete' ? 'finished' : 'paused';
    case 'answer':
      if (status !== 'paused' || pauseReason !== 'human_input') refuse('it is not waiting for a human');
      return 'running';
    case 'resume':
      if (status !== 'paused') refuse('it is not paused');
      if (pauseReason === 'human_input') refuse('it waits for an answer to its interaction');
      return 'running';
    case 'fail':
      return 'failed';
    case 'cancel':
      return 'cancelled';
  }
}

function describe(status: RunStatus, pauseReason: PauseReason | undefined): string {
  return status === 'paused' && pauseReason ? `paused (${pauseReason})` : status;
}

export function pauseReasonFor(op: 'pause' | 'park' | 'soft_pause'): PauseReason {
  return op === 'pause' ? 'human_input' : op === 'park' ? 'usage_park' : 'operator';
}
