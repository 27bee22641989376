// Run health as a pure state machine, driven by the run's observed events and the clock. The run-health
// workflow feeds it; nothing here does I/O, so the same code is deterministic under replay.
//
//   active    liveness advancing, current node recorded          fires budget_warning, budget_exceeded
//   paused    an intentional wait: no stall; only node_started,   fires nothing (usage still counts; its
//             run_resumed or a terminal event moves it             budget alerts come when it is active again)
//   stalled   no liveness for stallAfter: stall once per episode; fires stall, then stall_recovered
//             the next observed event of any kind clears it
//   terminal  the run ended; reaped after a delay                (the run_failed alert is the episode's)

export type HealthPhase = 'active' | 'paused' | 'stalled' | 'terminal';

export interface ObservedEvent {
  type: string;
  data?: Record<string, unknown>;
  /** When the process observed it (epoch ms); a batch arrives later than its events happened. */
  at?: number;
  /** When the service wrote it (epoch ms): a transition's time, also when the sweep tells it again. */
  writtenAt?: number;
  /** A transition's: the run revision it won, which orders status changes whatever each process's clock says. */
  revision?: number;
}

export interface HealthState {
  runId: string;
  teamId: string;
  phase: HealthPhase;
  currentNode?: string;
  /** Workflow time (ms) of the last event that counts as progress. */
  lastLivenessAt: number;
  /** Cumulative spend, as the latest usage event reported it. */
  spent: number;
  budgetLimit?: number;
  budgetWarned: boolean;
  budgetExceeded: boolean;
  /** Stall episodes so far: each gets its own stall (and stall_recovered) alert key. */
  stallSeq: number;
  terminalAt?: number;
  terminalStatus?: 'finished' | 'failed' | 'cancelled';
  /** When the latest status change health applied was written (by its process's clock). */
  statusWrittenAt?: number;
  /** The run revision of the latest status change health applied that carried one. */
  statusRevision?: number;
  /**
   * The round's alerts while they are handed off (saved with the state first): an execution that fails before
   * they all are leaves them for the next one, which hands them off again (their keys dedupe what went).
   */
  handingOff?: { alerts: HealthAlert[]; at: number };
}

export const HEALTH_ALERT_KINDS = ['stall', 'stall_recovered', 'budget_warning', 'budget_exceeded'] as const;
export type HealthAlertKind = (typeof HEALTH_ALERT_KINDS)[number];

export interface HealthAlert {
  kind: HealthAlertKind;
  /** The alert's own episode key; its claim is ops|<key>, so each alert goes out once. */
  episodeKey: string;
  severity: 'warning' | 'error';
  summary: string;
  detail: Record<string, unknown>;
}

/** Never progress: the manager's own twin, and a workspace ticker that would make a hung run look alive. */
export const NOT_PROGRESS = new Set(['run_health', 'run_workspace_checkpoint']);

const PAUSING = new Set(['human_input_requested', 'run_paused']);
const TERMINAL: Record<string, HealthState['terminalStatus']> = {
  run_finished: 'finished',
  run_failed: 'failed',
  run_cancelled: 'cancelled',
};

/** A pause, a resume or an end: what an observer never holds back in a batch. */
export function changesStatus(type: string): boolean {
  return PAUSING.has(type) || type === 'run_resumed' || Object.hasOwn(TERMINAL, type);
}

/**
 * The workflow time an event counts at: when it was observed, never before the last progress (batches of other
 * processes interleave) nor after now (another process's clock may run ahead); its arrival when it carries none.
 */
export function observedAt(event: ObservedEvent, state: HealthState, now: number): number {
  if (typeof event.at !== 'number' || !Number.isFinite(event.at)) return now;
  return Math.min(now, Math.max(state.lastLivenessAt, event.at));
}

export const BUDGET_WARNING_RATIO = 0.8;

export function initialHealth(
  init: { runId: string; teamId: string; budgetLimit?: number },
  now: number,
): HealthState {
  return {
    runId: init.runId,
    teamId: init.teamId,
    phase: 'active',
    lastLivenessAt: now,
    spent: 0,
    ...(init.budgetLimit !== undefined ? { budgetLimit: init.budgetLimit } : {}),
    budgetWarned: false,
    budgetExceeded: false,
    stallSeq: 0,
  };
}

function budgetAlerts(state: HealthState): { state: HealthState; alerts: HealthAlert[] } {
  const alerts: HealthAlert[] = [];
  const limit = state.budgetLimit;
  if (limit === undefined || limit <= 0) return { state, alerts };
  let next = state;
  const detail = { spent: state.spent, limit };
  if (!next.budgetWarned && next.spent >= BUDGET_WARNING_RATIO * limit) {
    next = { ...next, budgetWarned: true };
    alerts.push({
      kind: 'budget_warning',
      episodeKey: `health:${state.runId}:budget_warning`,
      severity: 'warning',
      summary: `Run ${state.runId} has spent ${Math.round((state.spent / limit) * 100)}% of its budget`,
      detail,
    });
  }
  if (!next.budgetExceeded && next.spent >= limit) {
    next = { ...next, budgetExceeded: true };
    alerts.push({
      kind: 'budget_exceeded',
      episodeKey: `health:${state.runId}:budget_exceeded`,
      severity: 'error',
      summary: `Run ${state.runId} exceeded its budget (${state.spent} of ${limit})`,
      detail,
    });
  }
  return { state: next, alerts };
}

/**
 * A run that ends while paused: the budget alerts its spend while paused earned (held for its resume, which will
 * not come) are owed now. None for any other event or phase.
 */
export function budgetOwedAtPausedEnd(
  state: HealthState,
  event: ObservedEvent,
): { state: HealthState; alerts: HealthAlert[] } {
  if (state.phase !== 'paused' || !Object.hasOwn(TERMINAL, event.type)) return { state, alerts: [] };
  return budgetAlerts(state);
}

export interface ObserveOptions {
  /**
   * Paused fires nothing: a usage event while paused counts its spend, and the budget alerts it earned come with
   * the next event that makes the run active. Off for histories recorded before (they alerted while paused).
   */
  quietWhilePaused?: boolean;
  /**
   * An event type ends the run only if it is one of TERMINAL's own keys: `constructor`, a valid event name, read
   * as an end through the object's prototype. Off for histories recorded before (they replay as they ran).
   */
  ownEventTypesOnly?: boolean;
}

/** Applies one observed event at workflow time `now`. */
export function observe(
  state: HealthState,
  event: ObservedEvent,
  now: number,
  options: ObserveOptions = {},
): { state: HealthState; alerts: HealthAlert[] } {
  if (state.phase === 'terminal' || NOT_PROGRESS.has(event.type)) return { state, alerts: [] };
  const alerts: HealthAlert[] = [];
  let next: HealthState = state;
  if (state.phase === 'stalled') {
    alerts.push({
      kind: 'stall_recovered',
      episodeKey: `health:${state.runId}:stall_recovered:${state.stallSeq}`,
      severity: 'warning',
      summary: `Run ${state.runId} shows progress again (${event.type})`,
      detail: { event: event.type, silentForMs: now - state.lastLivenessAt },
    });
    next = { ...next, phase: 'active' };
  }

  const terminal =
    !options.ownEventTypesOnly || Object.hasOwn(TERMINAL, event.type) ? TERMINAL[event.type] : undefined;
  if (terminal)
    return { state: { ...next, phase: 'terminal', terminalAt: now, terminalStatus: terminal }, alerts };

  let resumed = false;
  if (next.phase === 'paused') {
    // Only these end an intentional wait; anything else leaves the paused state untouched.
    if (event.type === 'node_started' || event.type === 'run_resumed') {
      next = { ...next, phase: 'active' };
      resumed = true;
    } else if (event.type === 'usage' && options.quietWhilePaused) {
      if (typeof event.data?.spent === 'number') next = { ...next, spent: event.data.spent };
      return { state: next, alerts };
    } else if (event.type !== 'usage') return { state: next, alerts };
  } else if (PAUSING.has(event.type)) {
    return { state: { ...next, phase: 'paused', lastLivenessAt: now }, alerts };
  }

  next = { ...next, lastLivenessAt: now };
  if (event.type === 'node_started' && typeof event.data?.node === 'string')
    next = { ...next, currentNode: event.data.node };
  if (event.type === 'usage' && typeof event.data?.spent === 'number') {
    const budget = budgetAlerts({ ...next, spent: event.data.spent });
    next = budget.state;
    alerts.push(...budget.alerts);
  } else if (resumed && options.quietWhilePaused) {
    // What was spent while paused, alerted now that the run is active again.
    const budget = budgetAlerts(next);
    next = budget.state;
    alerts.push(...budget.alerts);
  }
  return { state: next, alerts };
}

/**
 * An event a stalled run's health counted already: written no later than the run's last progress (a transition
 * the sweep tells again, its row's settle lost). It says nothing about the run since the stall, so it does not
 * recover it; an end still ends it.
 */
export function countedBeforeStall(state: HealthState, event: ObservedEvent): boolean {
  return (
    state.phase === 'stalled' &&
    typeof event.writtenAt === 'number' &&
    event.writtenAt <= state.lastLivenessAt &&
    !Object.hasOwn(TERMINAL, event.type)
  );
}

/**
 * Spend in an event a stalled run's health passes over (countedBeforeStall: written before the run's last progress,
 * told after the stall): it says nothing of the run since, but the spend it carries is the run's, alerted against
 * the budget. Undefined when it carries no more than health counted.
 */
export function spendCountedBeforeStall(
  state: HealthState,
  event: ObservedEvent,
): { state: HealthState; alerts: HealthAlert[] } | undefined {
  const spent = event.data?.spent;
  if (event.type !== 'usage' || typeof spent !== 'number' || spent <= state.spent) return undefined;
  return budgetAlerts({ ...state, spent });
}

/**
 * A pause or a resume written before the latest status change health applied, told after it (two processes, the
 * first one's signal late; or the sweep telling a transition again): the run has moved on since, so applying it
 * would undo a newer change (a late pause would leave a running run paused, never to stall). An end still ends it.
 */
export function toldOutOfOrder(state: HealthState, event: ObservedEvent): boolean {
  return (
    changesStatus(event.type) && !Object.hasOwn(TERMINAL, event.type) && writtenBeforeStatus(state, event)
  );
}

/**
 * toldOutOfOrder by the run's revisions, which order status changes exactly (two processes' clocks may disagree by
 * more than the time between a pause and a resume): undefined when the event or the state has none to compare.
 */
export function toldOutOfOrderByRevision(state: HealthState, event: ObservedEvent): boolean | undefined {
  if (!changesStatus(event.type) || Object.hasOwn(TERMINAL, event.type)) return false;
  if (typeof event.revision !== 'number' || state.statusRevision === undefined) return undefined;
  return event.revision < state.statusRevision;
}

/** Written before the latest status change health applied (both by their processes' clocks). */
const writtenBeforeStatus = (state: HealthState, event: ObservedEvent): boolean =>
  typeof event.writtenAt === 'number' &&
  state.statusWrittenAt !== undefined &&
  event.writtenAt < state.statusWrittenAt;

/**
 * Progress written before the pause health applied, told after it (another process's batch, or its late signal):
 * the run has paused since, so it does not make the run active again (a paused run made active would stall).
 */
export function progressBeforePause(state: HealthState, event: ObservedEvent): boolean {
  return state.phase === 'paused' && event.type === 'node_started' && writtenBeforeStatus(state, event);
}

/**
 * Spend written before the run's end, told after it (an API process's batch, the end reported at once by a runner):
 * counted, with the budget alerts it earned. Undefined for any other event or phase. `byWriteTime: false` counts
 * any spend told after the end: the API takes spend only while the run is not ended, so it was written before the
 * end, whatever the two processes' clocks wrote down.
 */
export function usageBeforeEnd(
  state: HealthState,
  event: ObservedEvent,
  { byWriteTime = true } = {},
): { state: HealthState; alerts: HealthAlert[] } | undefined {
  const spent = event.data?.spent;
  if (state.phase !== 'terminal' || event.type !== 'usage' || typeof spent !== 'number') return undefined;
  if (byWriteTime && !writtenBeforeStatus(state, event)) return undefined;
  return budgetAlerts({ ...state, spent: Math.max(state.spent, spent) });
}

/**
 * A spend report lower than the spend counted: told out of order (another process's batch, written earlier).
 * Spend is cumulative, so it says nothing new of it; taken as is it would lower the count, and the budget alerts a
 * pause holds back for its resume would never come.
 */
export function lowersSpend(state: HealthState, event: ObservedEvent): boolean {
  const spent = event.data?.spent;
  return event.type === 'usage' && typeof spent === 'number' && spent < state.spent;
}

/** The state with a status change's write time noted (toldOutOfOrder reads it). */
export function noteStatusWritten(state: HealthState, event: ObservedEvent): HealthState {
  if (!changesStatus(event.type)) return state;
  let next = state;
  if (typeof event.revision === 'number' && (state.statusRevision ?? -1) < event.revision)
    next = { ...next, statusRevision: event.revision };
  if (typeof event.writtenAt !== 'number') return next;
  if (state.statusWrittenAt !== undefined && state.statusWrittenAt >= event.writtenAt) return next;
  return { ...next, statusWrittenAt: event.writtenAt };
}

/** When an active run stalls if nothing arrives: undefined in every other phase. */
export function stallDueAt(state: HealthState, stallAfterMs: number): number | undefined {
  return state.phase === 'active' ? state.lastLivenessAt + stallAfterMs : undefined;
}

/** The stall timer fired with the run still active: one stall alert for this stall episode. */
export function fireStall(state: HealthState, now: number): { state: HealthState; alerts: HealthAlert[] } {
  const stallSeq = state.stallSeq + 1;
  return {
    state: { ...state, phase: 'stalled', stallSeq },
    alerts: [
      {
        kind: 'stall',
        episodeKey: `health:${state.runId}:stall:${stallSeq}`,
        severity: 'error',
        summary: `Run ${state.runId} has shown no progress for ${Math.round((now - state.lastLivenessAt) / 1000)}s`,
        detail: {
          currentNode: state.currentNode ?? null,
          lastProgressAt: new Date(state.lastLivenessAt).toISOString(),
        },
      },
    ],
  };
}
