// What every runs operation shares: the stores and signalers passed in, the clock, and the caller's run.
import { randomUUID } from 'node:crypto';
import type { OutcomeEmitter } from '../client/emitter';
import type { HealthSignaler } from '../client/health';
import type { InteractionSignaler } from '../client/interaction';
import { NotFoundError } from '../domain/errors';
import type { Run } from '../domain/run';
import type { Metrics } from '../platform/metrics';
import type { ActionTokenStore } from '../store/actionTokens';
import type { TeamRemovalStore } from '../store/teamRemovals';
import type { EventStore } from '../store/events';
import type { InteractionStore } from '../store/interactions';
import type { RunStore } from '../store/runs';
import type { ClaimStore } from '../store/claims';
import type { RunTransitionStore } from '../store/runTransitions';

export interface Caller {
  userId: string;
  teamId: string;
  /** The token's `"roles": ["admin"]`: a team admin (the team's escalation policy). */
  admin?: boolean;
}

export interface RunsServiceDeps {
  runs: RunStore;
  runTransitions: RunTransitionStore;
  events: EventStore;
  interactions: InteractionStore;
  /** The notification actions' tokens (answerWithToken). */
  actionTokens: ActionTokenStore;
  /** Who left a team: a token minted for them before answers nothing. */
  teamRemovals: Pick<TeamRemovalStore, 'removedSince'>;
  emitter: OutcomeEmitter;
  /** Pause → answer is observed where the answer is first stored; absent: not recorded. */
  metrics?: Pick<Metrics, 'pauseAnswered'>;
  /**
   * An answered interaction's workflow is told (it closes the question on every device, stops its ladder), and a
   * snooze too; undefined where no one listens (some tests). A failed signal is replayed by the sweep.
   */
  interactionSignals?: Pick<InteractionSignaler, 'answered' | 'snoozed'>;
  /** Whether a question's close is settled: a repeated answer signals only while it is not. */
  claims: Pick<ClaimStore, 'wasDelivered'>;
  /** Run health sees every event the service writes; undefined where no one watches (some tests). */
  health?: HealthSignaler;
  now?: () => Date;
  /**
   * Where a step after the operation's outcome that failed is reported (an emit, a health signal, taking back a
   * refused answer); the operation answers as it would have.
   */
  onEmitError?: (runId: string, err: unknown) => void;
}

/** The deps with the clock decided once. */
export type RunsContext = Omit<RunsServiceDeps, 'now'> & { now: () => Date };

export function runsContext(deps: RunsServiceDeps): RunsContext {
  return { ...deps, now: deps.now ?? (() => new Date()) };
}

/** An event as an operation writes it; its id is derived where it is appended. */
export type EventItem = { type: string; data?: Record<string, unknown> };

export const newId = (prefix: string): string => `${prefix}_${randomUUID().replace(/-/g, '')}`;

/** The caller's team's run, or a 404: a run of another team does not exist for the caller. */
export async function loadRun(ctx: RunsContext, caller: Caller, runId: string): Promise<Run> {
  const run = await ctx.runs.getForTeam(caller.teamId, runId);
  if (!run) throw new NotFoundError('run not found');
  return run;
}
