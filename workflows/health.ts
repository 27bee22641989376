// One run's health, fed by 'observe' signals from every process that sees the run's events (the API's event
// route and engine operations, the runner CLI). Durable timers raise stalls even across worker restarts; each
// alert goes through the operator dispatcher under its own claim; continue-as-new keeps the history bounded.
import { condition, continueAsNew, patched, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import {
  budgetOwedAtPausedEnd,
  countedBeforeStall,
  fireStall,
  initialHealth,
  lowersSpend,
  noteStatusWritten,
  observe,
  observedAt,
  progressBeforePause,
  stallDueAt,
  toldOutOfOrder,
  toldOutOfOrderByRevision,
  spendCountedBeforeStall,
  usageBeforeEnd,
  type HealthAlert,
  type HealthState,
  type ObservedEvent,
} from '../domain/health';
import { healthAlert } from '../domain/ops';
import { RAISED_AGAIN_WITHIN_SECONDS } from '../domain/outcome';
import { teamEventFromHealthAlert } from '../domain/teamEvents';
import { observeManySignal, observeSignal, type HealthInput } from '../contract/workflows';
import { quickCalls, quickCallsOutlastingOutages, type QuickCalls } from './common';
import { sendOperatorAlert } from './operatorAlert';
import { handOffTeamEvent } from './teamEvent';

/**
 * Marks histories whose settings come from the worker (config and the persisted run) and whose paused runs
 * fire no budget alerts; older histories replay with the first signaller's input and the old paused rule.
 */
export const HEALTH_SETTINGS_PATCH = 'health-settings-from-worker';

/**
 * Marks histories fed in batches: an event counts at the time its process observed it, the stall timer is not
 * restarted by every signal, continue-as-new counts signals, not events, and only a run's real end events end it
 * (not `constructor`, read through the prototype of the table of ends).
 */
export const HEALTH_BATCHES_PATCH = 'health-fed-in-batches';

/** Marks histories in which each health alert also raises its team event (the team's endpoints hear of it). */
export const HEALTH_TEAM_EVENTS_PATCH = 'health-alerts-raise-team-events';

/**
 * Marks histories in which a store call that failed past its quick retries (a store outage of about a quarter of an
 * hour) is made again after a wait, one minute doubling to an hour, for a day. Before, it failed the execution: a
 * stall found during the outage and the team event of any alert raised then were lost, and the run went unwatched
 * until its next event (which the signaller refused to start a new execution for, until the same change).
 */
export const HEALTH_STORE_OUTAGES_OUTLASTED_PATCH = 'health-store-calls-outlast-outages';

/**
 * Marks histories of an execution started afresh for a run whose last execution closed without the run's end
 * (failed, or terminated): it goes on from the state that one saved. Before, it began again from nothing: its
 * first stall reused a delivered alert's key (stall:1) and was never sent, and a stalled run never recovered.
 */
export const HEALTH_RESUMES_SAVED_STATE_PATCH = 'health-resumes-saved-state';

/**
 * Marks histories in which a stalled run's event written no later than its last progress (a transition told again
 * by the sweep after its row's settle was lost) recovers nothing. Before, it raised a false stall_recovered. Only
 * such an event reaches the check: other histories replay unchanged.
 */
export const HEALTH_COUNTED_EVENTS_PATCH = 'health-counted-events-recover-nothing';

/**
 * Marks histories in which a run that ended while paused raised the budget alerts its spend while paused earned
 * (they wait for the run's resume, which then never came). Before, they were never sent. Only such an end reaches
 * the check: other histories replay unchanged.
 */
export const HEALTH_BUDGET_AT_PAUSED_END_PATCH = 'health-budget-alerted-at-paused-end';

/**
 * Marks histories in which a pause or resume written before the latest status change applied, told after it
 * (toldOutOfOrder), is passed over. Before, a pause told late after its resume left a running run paused, and it
 * never stalled. Only such an event reaches the check: other histories replay unchanged.
 */
export const HEALTH_STATUS_IN_WRITE_ORDER_PATCH = 'health-status-changes-in-write-order';

/**
 * Marks histories in which progress written before the pause health applied, told after it (progressBeforePause),
 * is passed over. Before, it made the paused run active, and it stalled. Only such an event reaches the check.
 */
export const HEALTH_PROGRESS_BEFORE_PAUSE_PATCH = 'health-progress-before-pause-passed-over';

/**
 * Marks histories in which a stall that came due waits one batch window (options.batchGraceMs) for progress an API
 * process observed before it but still holds. Before, it fired, and that progress then raised a recovery. Only a
 * stall about to fire, with a window in the worker's settings, reaches it.
 */
export const HEALTH_STALL_WAITS_FOR_HELD_BATCH_PATCH = 'health-stall-waits-for-a-held-batch';

/**
 * Marks histories in which an ended run with a budget it has not exceeded takes spend told after its end until it
 * is reaped, and spend written before the end (usageBeforeEnd) is counted and alerted against the budget. Before, an
 * ended run passed every later event over, and a budget it crossed was never alerted. Reached at every end of such
 * a run (batched histories only).
 */
export const HEALTH_USAGE_BEFORE_END_PATCH = 'health-usage-before-end-counted';

/**
 * Marks histories in which spend told after the run's end is counted whatever its write time says: the API took it
 * only while the run was not ended, and the write times of two processes' clocks (the spend's, the end's) need not
 * agree. Before, spend from a process whose clock ran ahead of the end's was passed over, its budget alerts lost.
 * Only such spend, with alerts to raise, reaches it.
 */
export const HEALTH_LATE_SPEND_ANY_CLOCK_PATCH = 'health-late-spend-counted-whatever-its-clock';

/**
 * Marks histories in which spend told to a stalled run, written before its last progress (a process's late batch),
 * is alerted against the budget while it still recovers nothing. Before, the whole event was passed over, spend
 * included, and a crossing it carried was never alerted. Only such spend, with alerts to raise, reaches it.
 */
export const HEALTH_STALLED_SPEND_COUNTED_PATCH = 'health-stalled-spend-counted';

/**
 * Marks histories of an execution started afresh from a saved state whose round's alerts were being handed off
 * when the last execution failed (a store away past its day of retries): they are handed off again, their claims
 * and event ids deduping what went. Before, they were lost: the state said alerted. Only such a resume reaches it.
 */
export const HEALTH_HANDS_OFF_SAVED_ALERTS_PATCH = 'health-hands-off-saved-alerts';

/**
 * Marks histories in which a spend report lower than the spend counted (told out of order by two processes) keeps
 * the count: taken as is, it lowered it, and the budget alerts held back while paused were lost at the resume.
 */
export const HEALTH_SPEND_NEVER_LOWERS_PATCH = 'health-spend-never-lowers';

/**
 * Marks histories in which a stall check that found the run ended in the store notes when that end was written, as
 * the end's own event would: spend written before it, told after (Temporal away, the batch held), is then counted
 * against the budget. Before, it was passed over with every later event. Only such a stall check reaches it.
 */
export const HEALTH_FOUND_END_WRITTEN_AT_PATCH = 'health-found-end-notes-when-written';

/**
 * Marks histories in which a pause or resume was ordered by the run's revision where its write time said otherwise
 * (two API processes' clocks apart by more than the time between the two): a resume written by a process whose
 * clock runs behind was passed over as told late, leaving a running run paused, never to stall. Only such a
 * disagreement reaches it.
 */
export const HEALTH_STATUS_BY_REVISION_PATCH = 'health-status-changes-by-revision';

/**
 * Marks histories in which an ended run with a budget it has not exceeded reads, once, the spend its events
 * recorded: spend an API process wrote but never told (it died holding it in its batch, or gave up on Temporal) is
 * counted and alerted against the budget. Before, the run waited for it until reaped, and the alert was lost.
 */
export const HEALTH_RECORDED_SPEND_AT_END_PATCH = 'health-recorded-spend-read-at-end';

/**
 * Marks histories in which a stall about to fire first reads the run's progress written since the last it heard:
 * progress an API process wrote within the stall time but could not tell (Temporal away, its batch held for
 * retries) puts the stall off to the newest; progress written only after it leaves the stall owed. Before,
 * every run busy through an outage longer than its stall time raised a stall, then a recovery once its batch came.
 * Reached at every stall check (batched histories only).
 */
export const HEALTH_STALL_READS_RECORDED_PROGRESS_PATCH = 'health-stall-reads-recorded-progress';

/** A status change written before the latest one applied: by the run's revisions where both have one. */
function toldLate(state: HealthState, event: ObservedEvent): boolean {
  const byTime = toldOutOfOrder(state, event);
  const byRevision = toldOutOfOrderByRevision(state, event);
  return byRevision !== undefined && byRevision !== byTime && patched(HEALTH_STATUS_BY_REVISION_PATCH)
    ? byRevision
    : byTime;
}

/**
 * A batched event health passes over, with what it still counts (spend, and the budget alerts it earned): written
 * before what health applied since (the last progress of a run stalled since, a later status change, a pause), or
 * spend told after the run's end. Undefined: the event is observed. The patch checks come in their order of old.
 */
function passedOver(
  state: HealthState,
  event: ObservedEvent,
): { state: HealthState; alerts: HealthAlert[] } | undefined {
  const none = { state, alerts: [] };
  if (countedBeforeStall(state, event) && patched(HEALTH_COUNTED_EVENTS_PATCH)) {
    const spend = spendCountedBeforeStall(state, event);
    return spend?.alerts.length && patched(HEALTH_STALLED_SPEND_COUNTED_PATCH) ? spend : none;
  }
  if (toldLate(state, event) && patched(HEALTH_STATUS_IN_WRITE_ORDER_PATCH)) return none;
  if (progressBeforePause(state, event) && patched(HEALTH_PROGRESS_BEFORE_PAUSE_PATCH)) return none;
  let late = usageBeforeEnd(state, event);
  const anyClock = late ? undefined : usageBeforeEnd(state, event, { byWriteTime: false });
  if (anyClock?.alerts.length && patched(HEALTH_LATE_SPEND_ANY_CLOCK_PATCH)) late = anyClock;
  return late?.alerts.length && patched(HEALTH_USAGE_BEFORE_END_PATCH) ? late : undefined;
}

/** A stall check found the run ended in the store: terminal, with when its end was written (batched histories). */
async function foundEnded(
  quick: QuickCalls,
  state: HealthState,
  status: NonNullable<HealthState['terminalStatus']>,
  batched: boolean,
): Promise<HealthState> {
  const ended: HealthState = { ...state, phase: 'terminal', terminalAt: Date.now(), terminalStatus: status };
  if (!batched || !patched(HEALTH_FOUND_END_WRITTEN_AT_PATCH)) return ended;
  const endedAt = await quick.runEndedAt(state.runId);
  return endedAt === undefined
    ? ended
    : { ...ended, statusWrittenAt: Math.max(ended.statusWrittenAt ?? 0, endedAt) };
}

/** How often a run that keeps reporting usage has its settings (its budget) read again. */
const SETTINGS_REFRESH_MS = 60_000;

/** Signals handled before the history is handed to a fresh run (events, in histories before batches). */
const SIGNALS_PER_RUN = 500;

/**
 * A stall timer armed for the due time it saw and left running as progress moves that time on (a timer per
 * signal would cost an action per signal); one that fires early is armed again for the due time as it is then.
 */
function stallTimer() {
  let armed: { fired: boolean } | undefined;
  return {
    arm(due: number | undefined): void {
      if (due === undefined || armed) return;
      const timer = { fired: false };
      armed = timer;
      void sleep(Math.max(1, due - Date.now())).then(() => void (timer.fired = true));
    },
    fired: (): boolean => armed?.fired ?? false,
    disarmIfFired(): void {
      if (armed?.fired) armed = undefined;
    },
  };
}

/**
 * An ended run waits until it is reaped. Spend written before the end may still be on its way (an API process's
 * batch), or never come (that process died): a run with a budget it has not exceeded reads, once, the spend its
 * events recorded, and wakes for spend told later. Answers whether spend arrived (false: reaped).
 * Other late events wait unread, as before.
 */
async function lateSpendOrReaped(
  state: HealthState,
  options: HealthInput['options'],
  batched: boolean,
  inbox: ObservedEvent[],
  quick: QuickCalls,
  /** Whether this execution read the spend its run's events recorded (once). */
  spendRead: { done: boolean },
): Promise<boolean> {
  const untilReapMs = Math.max(
    1,
    (state.terminalAt ?? Date.now()) + options.reapAfterSeconds * 1000 - Date.now(),
  );
  const takesLateSpend =
    batched &&
    state.budgetLimit !== undefined &&
    !state.budgetExceeded &&
    patched(HEALTH_USAGE_BEFORE_END_PATCH);
  if (takesLateSpend && !spendRead.done && patched(HEALTH_RECORDED_SPEND_AT_END_PATCH)) {
    spendRead.done = true;
    const recorded = await quick.recordedSpend(state.runId);
    if (recorded && recorded.spent > state.spent)
      inbox.push({ type: 'usage', data: { spent: recorded.spent }, writtenAt: recorded.writtenAt });
  }
  const spendArrived =
    takesLateSpend && (await condition(() => inbox.some((e) => e.type === 'usage'), untilReapMs));
  if (spendArrived) return true;
  if (!takesLateSpend) await condition(() => false, untilReapMs);
  await quick.reapHealth(state.runId);
  return false;
}

/**
 * The round's alerts, each to its own operator-alert workflow (the loop waits only for its start, never its
 * delivery), then each to the team's endpoints as a team event. Answers the state without them.
 */
async function handOff(quick: QuickCalls, state: HealthState, opsAlerts: boolean): Promise<HealthState> {
  const { handingOff } = state;
  if (!handingOff) return state;
  const { alerts } = handingOff;
  const at = new Date(handingOff.at).toISOString();
  if (opsAlerts)
    for (const alert of alerts)
      await sendOperatorAlert(quick, healthAlert(alert, state.runId, state.teamId, at), false);
  // Only rounds that raised an alert reach the patch check: histories recorded before replay unchanged.
  if (alerts.length && patched(HEALTH_TEAM_EVENTS_PATCH))
    for (const [order, alert] of alerts.entries())
      await handOffTeamEvent(quick, teamEventFromHealthAlert(alert, state.runId, state.teamId, at, order));
  return withoutHandOff(state);
}

function withoutHandOff(state: HealthState): HealthState {
  const { handingOff: _handedOff, ...rest } = state;
  return rest;
}

export async function runHealthWorkflow(input: HealthInput): Promise<HealthState> {
  const quick = quickCallsOutlastingOutages(quickCalls(), () =>
    patched(HEALTH_STORE_OUTAGES_OUTLASTED_PATCH),
  );
  let { options } = input;
  let state = input.state ?? initialHealth(input, Date.now());
  const fromWorker = patched(HEALTH_SETTINGS_PATCH);
  const batched = patched(HEALTH_BATCHES_PATCH);
  let settingsAt = 0;
  // Only an execution started afresh (not continued as new) asks for the state its run's last one saved.
  let askSaved = input.state === undefined;
  const refreshSettings = async (): Promise<void> => {
    const settings = await quick.healthSettings(state.runId, askSaved);
    // Only a fresh execution that found a saved state reaches the patch check: other histories replay unchanged.
    if (askSaved && settings.saved && patched(HEALTH_RESUMES_SAVED_STATE_PATCH)) state = settings.saved;
    askSaved = false;
    options = settings.options;
    const { budgetLimit: _old, ...rest } = state;
    state = settings.budgetLimit === undefined ? rest : { ...rest, budgetLimit: settings.budgetLimit };
    settingsAt = Date.now();
  };
  if (fromWorker) await refreshSettings();
  // Resumed from a state saved while its alerts were handed off: the last execution may have failed doing it. Only
  // recent ones: the claims that dedupe what went are kept 30 days. Any other is dropped, never handed off later.
  if (state.handingOff) {
    const recent = Date.now() - state.handingOff.at < RAISED_AGAIN_WITHIN_SECONDS * 1000;
    state =
      recent && patched(HEALTH_HANDS_OFF_SAVED_ALERTS_PATCH)
        ? await handOff(quick, state, options.opsAlerts)
        : withoutHandOff(state);
  }
  const inbox: ObservedEvent[] = [];
  let signals = 0;
  setHandler(observeSignal, (event) => void (inbox.push(event), signals++));
  setHandler(observeManySignal, (events) => void (inbox.push(...events), signals++));
  let handled = 0;
  const timer = stallTimer();
  /** The stall's due time whose grace was waited (each due time waits it once). */
  let graceWaitedFor: number | undefined;
  const spendRead = { done: false };

  for (;;) {
    let arrived: boolean;
    if (state.phase === 'terminal') {
      if (!(await lateSpendOrReaped(state, options, batched, inbox, quick, spendRead))) return state;
      arrived = true;
    } else if (batched) {
      const due = stallDueAt(state, options.stallAfterSeconds * 1000);
      timer.arm(due);
      await condition(() => inbox.length > 0 || timer.fired());
      timer.disarmIfFired();
      // Fired before the due time progress has moved it to (or in a phase without one): armed again.
      if (inbox.length === 0 && (due === undefined || Date.now() < due)) continue;
      arrived = inbox.length > 0;
      // A stall came due: progress an API process observed before it but still holds in its batch is waited for,
      // once per due time (events that are no progress arriving meanwhile must not put the stall off for ever).
      if (
        !arrived &&
        due !== graceWaitedFor &&
        options.batchGraceMs &&
        patched(HEALTH_STALL_WAITS_FOR_HELD_BATCH_PATCH)
      ) {
        graceWaitedFor = due;
        arrived = await condition(() => inbox.length > 0, options.batchGraceMs);
      }
    } else {
      const due = stallDueAt(state, options.stallAfterSeconds * 1000);
      arrived =
        due === undefined
          ? (await condition(() => inbox.length > 0), true)
          : await condition(() => inbox.length > 0, Math.max(1, due - Date.now()));
    }

    const alerts = [];
    if (arrived) {
      // A run still reporting usage gets its budget read again now and then (newer facts win).
      if (
        fromWorker &&
        Date.now() - settingsAt > SETTINGS_REFRESH_MS &&
        inbox.some((e) => e.type === 'usage')
      )
        await refreshSettings();
      while (inbox.length) {
        let event = inbox.shift()!;
        // Only a lower report reaches the patch check: other histories replay unchanged.
        if (lowersSpend(state, event) && patched(HEALTH_SPEND_NEVER_LOWERS_PATCH))
          event = { ...event, data: { ...event.data, spent: state.spent } };
        const skipped = batched ? passedOver(state, event) : undefined;
        if (skipped) {
          state = skipped.state;
          alerts.push(...skipped.alerts);
          handled++;
          continue;
        }
        const owed = fromWorker ? budgetOwedAtPausedEnd(state, event) : undefined;
        if (owed?.alerts.length && patched(HEALTH_BUDGET_AT_PAUSED_END_PATCH)) {
          state = owed.state;
          alerts.push(...owed.alerts);
        }
        const at = batched ? observedAt(event, state, Date.now()) : Date.now();
        const result = observe(state, event, at, {
          quietWhilePaused: fromWorker,
          ownEventTypesOnly: batched,
        });
        state = noteStatusWritten(result.state, event);
        alerts.push(...result.alerts);
        handled++;
      }
    } else {
      // A stall is about to fire. A blocking wait found in flight (the pause signal was lost or is late)
      // cancels it: the run is waiting on purpose.
      const persisted = await quick.persistedRunStatus(state.runId);
      if (persisted === 'paused') state = { ...state, phase: 'paused' };
      else if (persisted && persisted !== 'running') {
        state = await foundEnded(quick, state, persisted, batched);
      } else if (inbox.length === 0) {
        const recorded =
          batched && patched(HEALTH_STALL_READS_RECORDED_PROGRESS_PATCH)
            ? await quick.recordedProgressSince(state.runId, state.lastLivenessAt)
            : undefined;
        // Progress written within the stall time of the last heard (its process could not tell it yet): the run
        // was not silent, it goes on from the newest. Written later, the silence was real: the stall is owed.
        const due = stallDueAt(state, options.stallAfterSeconds * 1000);
        if (recorded && due !== undefined && recorded.first < due)
          state = { ...state, lastLivenessAt: Math.max(state.lastLivenessAt, recorded.newest) };
        else if (inbox.length === 0) {
          const result = fireStall(state, Date.now());
          state = result.state;
          alerts.push(...result.alerts);
        }
      }
    }

    // The twin first, so the API shows what the alerts are about as soon as they arrive; with them, so a failure
    // before they are all handed off leaves them to the next execution.
    if (alerts.length) state = { ...state, handingOff: { alerts, at: Date.now() } };
    await quick.saveHealth(state);
    state = await handOff(quick, state, options.opsAlerts);

    if (
      inbox.length === 0 &&
      state.phase !== 'terminal' &&
      ((batched ? signals : handled) >= SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested)
    ) {
      await continueAsNew<typeof runHealthWorkflow>({ ...input, state });
    }
  }
}
