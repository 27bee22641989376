// One run's health, fed by 'observe' signals from every process that sees the run's events (the API's event
// route and engine operations, the runner CLI). Durable timers raise stalls even across worker restarts; each
// alert goes through the operator dispatcher under its own claim; continue-as-new keeps the history bounded.
import { condition, continueAsNew, patched, setHandler, workflowInfo } from '@temporalio/workflow';
import {
  fireStall,
  initialHealth,
  observe,
  stallDueAt,
  type HealthState,
  type ObservedEvent,
} from '../domain/health';
import { healthAlert } from '../domain/ops';
import { observeSignal, type HealthInput } from '../contract/workflows';
import { quickCalls } from './common';
import { sendOperatorAlert } from './operatorAlert';

/**
 * Marks histories whose settings come from the worker (config and the persisted run) and whose paused runs
 * fire no budget alerts; older histories replay with the first signaller's input and the old paused rule.
 */
export const HEALTH_SETTINGS_PATCH = 'health-settings-from-worker';

/** How often a run that keeps reporting usage has its settings (its budget) read again. */
const SETTINGS_REFRESH_MS = 60_000;

/** Signals handled before the history is handed to a fresh run. */
const SIGNALS_PER_RUN = 500;

export async function runHealthWorkflow(input: HealthInput): Promise<HealthState> {
  const quick = quickCalls();
  let { options } = input;
  let state = input.state ?? initialHealth(input, Date.now());
  const fromWorker = patched(HEALTH_SETTINGS_PATCH);
  let settingsAt = 0;
  const refreshSettings = async (): Promise<void> => {
    const settings = await quick.healthSettings(state.runId);
    options = settings.options;
    const { budgetLimit: _old, ...rest } = state;
    state = settings.budgetLimit === undefined ? rest : { ...rest, budgetLimit: settings.budgetLimit };
    settingsAt = Date.now();
  };
  if (fromWorker) await refreshSettings();
  const inbox: ObservedEvent[] = [];
  setHandler(observeSignal, (event) => void inbox.push(event));
  let handled = 0;

  for (;;) {
    if (state.phase === 'terminal') {
      const reapAt = (state.terminalAt ?? Date.now()) + options.reapAfterSeconds * 1000;
      await condition(() => false, Math.max(1, reapAt - Date.now()));
      await quick.reapHealth(state.runId);
      return state;
    }

    const due = stallDueAt(state, options.stallAfterSeconds * 1000);
    const arrived =
      due === undefined
        ? (await condition(() => inbox.length > 0), true)
        : await condition(() => inbox.length > 0, Math.max(1, due - Date.now()));

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
        const result = observe(state, inbox.shift()!, Date.now(), { quietWhilePaused: fromWorker });
        state = result.state;
        alerts.push(...result.alerts);
        handled++;
      }
    } else {
      // A stall is about to fire. A blocking wait found in flight (the pause signal was lost or is late)
      // cancels it: the run is waiting on purpose.
      const persisted = await quick.persistedRunStatus(state.runId);
      if (persisted === 'paused') state = { ...state, phase: 'paused' };
      else if (persisted && persisted !== 'running') {
        state = { ...state, phase: 'terminal', terminalAt: Date.now(), terminalStatus: persisted };
      } else if (inbox.length === 0) {
        const result = fireStall(state, Date.now());
        state = result.state;
        alerts.push(...result.alerts);
      }
    }

    // The twin first, so the API shows what the alerts are about as soon as they arrive.
    await quick.saveHealth(state);
    if (options.opsAlerts) {
      const at = new Date(Date.now()).toISOString();
      // Each alert retries in its own workflow: the health loop waits only for its start, never its delivery.
      for (const alert of alerts)
        await sendOperatorAlert(quick, healthAlert(alert, state.runId, state.teamId, at), false);
    }

    if (
      inbox.length === 0 &&
      state.phase !== 'terminal' &&
      (handled >= SIGNALS_PER_RUN || workflowInfo().continueAsNewSuggested)
    ) {
      await continueAsNew<typeof runHealthWorkflow>({ ...input, state });
    }
  }
}
