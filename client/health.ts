// Feeds run-health workflows: every process that observes a run's events signals them here, starting the
// run's health workflow on its first event.
import type { Client } from '@temporalio/client';
import type { Config } from '../config';
import { changesStatus, type ObservedEvent } from '../domain/health';
import { TypedSearchAttributes } from '@temporalio/common';
import { runAttributes } from '../contract/searchAttributes';
import { teamPriority } from './priority';
import { unlessAlreadyStarted, withinCallDeadline } from './startUnlessRunning';
import {
  healthWorkflowId,
  observeManySignal,
  workflowTypes,
  type HealthInput,
  type HealthOptions,
  type Workflows,
} from '../contract/workflows';
import { firstCodePoints } from '../domain/text';

/** A run as an observer knows it: the runner CLI knows only its id and team. */
export interface ObservedRun {
  _id: string;
  teamId: string;
  budget?: { limit: number };
}

/** Events held for one run before they go at once: a batch stays one modest signal. */
export const MAX_EVENTS_PER_BATCH = 500;
/** Runs a process holds events for; past it, a run's events go unbatched, as they come. */
export const MAX_RUNS_HELD = 1_000;
/** Tries of a run's newest events before they are dropped (reported): about 20 minutes of Temporal away. */
export const MAX_SEND_TRIES = 20;
const RUN_STARTED = 'run_started';
/** The longest wait before a failed batch goes again. */
const RETRY_MAX_MS = 60_000;
/** How long flushAll goes on trying what fails at exit, and how far apart. */
const FLUSH_ALL_WITHIN_MS = 10_000;
const FLUSH_ALL_RETRY_MS = 1_000;

/** The window a process holds a run's events: HEALTH_BATCH_MS, at most a quarter of the stall time. */
export function healthBatchMs(config: Pick<Config, 'healthBatchMs' | 'stallAfterSeconds'>): number {
  return Math.min(config.healthBatchMs, config.stallAfterSeconds * 250);
}

export function healthOptions(
  config: Pick<Config, 'stallAfterSeconds' | 'healthReapSeconds' | 'opsAlertWebhookUrl'>,
): HealthOptions {
  return {
    stallAfterSeconds: config.stallAfterSeconds,
    reapAfterSeconds: config.healthReapSeconds,
    opsAlerts: config.opsAlertWebhookUrl !== undefined,
  };
}

/** The longest node name health keeps (its twin shows the current node): a window's batch stays a modest signal. */
export const MAX_NODE_CHARS = 200;

/**
 * What health reads of an event, bounded, taken as it is observed: the rest (a final answer, a prompt, a long node
 * name) neither waits in a batch nor reaches its history.
 */
function forHealth({ type, data, at, writtenAt, revision }: ObservedEvent): ObservedEvent {
  const node = data?.node;
  const spent = data?.spent;
  return {
    type,
    data: {
      ...(typeof node === 'string' ? { node: firstCodePoints(node, MAX_NODE_CHARS) } : {}),
      ...(typeof spent === 'number' ? { spent } : {}),
    },
    ...(at !== undefined ? { at } : {}),
    ...(writtenAt !== undefined ? { writtenAt } : {}),
    ...(revision !== undefined ? { revision } : {}),
  };
}

export interface BatchClock {
  now(): number;
  /** Calls `fire` once after `ms`; the answer cancels it. */
  setTimer(fire: () => void, ms: number): () => void;
}

const systemClock: BatchClock = {
  now: () => Date.now(),
  setTimer(fire, ms) {
    const timer = setTimeout(fire, ms);
    timer.unref();
    return () => clearTimeout(timer);
  },
};

interface Held {
  run: ObservedRun;
  events: ObservedEvent[];
  cancelTimer: () => void;
  /** Tries that failed of the oldest events held (0: none failed): how long the next try waits. */
  failures: number;
  /** Tries that failed of the newest events held: they are dropped after their own MAX_SEND_TRIES, not the oldest's. */
  newestFailures: number;
}

/** A batch queued behind one that failed: held with it for its next try, not sent. */
class HeldBehindFailure extends Error {
  constructor() {
    super('held behind a batch that failed, for its next try');
  }
}

/**
 * A failed batch's events with what was held since, in the order they were observed, at most a batch: every
 * status change, the newest spend (a total: the budget crossing) and the newest of the rest (the latest progress).
 */
function mergeBounded(failed: ObservedEvent[], since: ObservedEvent[]): ObservedEvent[] {
  const merged = [...failed, ...since].sort((a, b) => (a.at ?? 0) - (b.at ?? 0));
  const newestSpend = [...merged].reverse().find((e) => e.type === 'usage');
  const always = (e: ObservedEvent) => changesStatus(e.type) || e === newestSpend;
  let room = MAX_EVENTS_PER_BATCH - merged.filter(always).length;
  const kept = merged.reverse().filter((e) => always(e) || room-- > 0);
  return kept.reverse();
}

/**
 * Holds each run's events for `windowMs` from the first, then sends them as one batch; a status change (pause,
 * resume, end) sends what is held at once, and its caller waits for it, as one that fills a batch does. A run's
 * batches go one after another, in order. A batch that fails (Temporal away) is reported to `onError` (or its
 * caller) and held again for another try, a window doubling to a minute later, up to MAX_SEND_TRIES: a lost
 * batch would lose a budget crossing, and a status change's re-tell by the sweep carries only its own events.
 */
export function createEventBatcher(deps: {
  windowMs: number;
  send: (run: ObservedRun, events: ObservedEvent[]) => Promise<void>;
  onError: (runId: string, err: unknown) => void;
  clock?: BatchClock;
}) {
  const clock = deps.clock ?? systemClock;
  const held = new Map<string, Held>();
  const sending = new Map<string, Promise<void>>();

  /**
   * Sends after the run's batch in flight, if any; the run's chain is forgotten once it is idle. Behind a batch that
   * failed and waits for its next try, it waits with it (after it), and its caller is told it failed.
   */
  function sendInOrder(run: ObservedRun, events: ObservedEvent[]): Promise<void> {
    const previous = sending.get(run._id) ?? Promise.resolve();
    const sent = previous.then(() => {
      const failed = held.get(run._id);
      if (!failed?.failures) return deps.send(run, events);
      failed.events = mergeBounded(failed.events, events);
      failed.newestFailures = 0;
      throw new HeldBehindFailure();
    });
    const settled = sent.then(
      () => undefined,
      () => undefined,
    );
    sending.set(run._id, settled);
    void settled.then(() => sending.get(run._id) === settled && sending.delete(run._id));
    return sent;
  }

  /** The run's batch held, one made that goes in `ms` if none is. */
  function holding(run: ObservedRun, ms: number): Held {
    let batch = held.get(run._id);
    if (!batch) {
      const cancelTimer = clock.setTimer(
        () => void flush(run._id).catch((err) => deps.onError(run._id, err)),
        ms,
      );
      batch = { run, events: [], cancelTimer, failures: 0, newestFailures: 0 };
      held.set(run._id, batch);
    }
    batch.run = run;
    return batch;
  }

  /**
   * Sends the events; failed, they are held again for their next try (none past their newest's last, nor past the
   * bound). `failures` counts the oldest's tries, `newestFailures` the newest's.
   */
  function sendOrHoldAgain(
    run: ObservedRun,
    events: ObservedEvent[],
    { failures, newestFailures }: Pick<Held, 'failures' | 'newestFailures'>,
  ): Promise<void> {
    return sendInOrder(run, events).catch((err: unknown) => {
      if (err instanceof HeldBehindFailure) throw err;
      const tries = failures + 1;
      const newestTries = newestFailures + 1;
      if (newestTries < MAX_SEND_TRIES && (held.has(run._id) || held.size < MAX_RUNS_HELD)) {
        const waitMs = Math.min(Math.max(deps.windowMs, 1000) * 2 ** (tries - 1), RETRY_MAX_MS);
        const batch = holding(run, waitMs);
        // Events held since this send are newer still: their tries stay theirs.
        if (!batch.events.length) batch.newestFailures = newestTries;
        batch.events = mergeBounded(events, batch.events);
        batch.failures = Math.max(batch.failures, tries);
      }
      throw err;
    });
  }

  function flush(runId: string): Promise<void> {
    const batch = held.get(runId);
    if (!batch) return sending.get(runId) ?? Promise.resolve();
    held.delete(runId);
    batch.cancelTimer();
    return sendOrHoldAgain(batch.run, batch.events, batch);
  }

  return {
    async observe(run: ObservedRun, events: ObservedEvent[]): Promise<void> {
      const at = clock.now();
      const stamped = events.map((event) => ({ ...event, at }));
      // Unbatched (or past the bound), a run's events go at once, unless some failed and wait for their next try.
      if (!held.has(run._id) && (deps.windowMs === 0 || held.size >= MAX_RUNS_HELD)) {
        await sendOrHoldAgain(run, stamped, { failures: 0, newestFailures: 0 });
        return;
      }
      const batch = holding(run, deps.windowMs);
      batch.events.push(...stamped);
      batch.newestFailures = 0;
      const full = batch.events.length >= MAX_EVENTS_PER_BATCH;
      // Events waiting for a failed batch's next try wait with it, bounded, however many come meanwhile.
      if (events.some((e) => changesStatus(e.type)) || (full && !batch.failures)) await flush(run._id);
      else if (full) batch.events = mergeBounded([], batch.events);
      // A new run's first event starts its health workflow: it goes now (its caller not kept waiting), so a process
      // that dies within the window leaves no run unwatched.
      else if (events.some((e) => e.type === RUN_STARTED))
        void flush(run._id).catch((err) => deps.onError(run._id, err));
    },

    /**
     * Sends everything held and waits for every batch in flight (a process about to exit). A batch that fails is
     * tried again a second later, for as long as `withinMs` allows: held, it would be lost with the process.
     */
    async flushAll(withinMs = FLUSH_ALL_WITHIN_MS): Promise<void> {
      const until = clock.now() + withinMs;
      // The whole of it: a send that hangs (Temporal partitioned, not refusing) is not waited for past it.
      let stopClock!: () => void;
      const timeUp = new Promise<void>((resolve) => (stopClock = clock.setTimer(resolve, withinMs)));
      try {
        for (;;) {
          const runIds = [...held.keys()];
          const round = Promise.all(
            runIds.map((runId) => flush(runId).catch((err) => deps.onError(runId, err))),
          ).then(() => Promise.all(sending.values()));
          await Promise.race([round, timeUp]);
          const left = until - clock.now();
          if (!held.size || left <= 0) return;
          await Promise.race([
            new Promise<void>((resolve) => clock.setTimer(resolve, Math.min(FLUSH_ALL_RETRY_MS, left))),
            timeUp,
          ]);
        }
      } finally {
        stopClock();
      }
    },
  };
}

export type HealthSignaler = ReturnType<typeof createHealthSignaler>;

/**
 * The start arguments (options, budget) are only read by health histories from before the worker took its own
 * settings; they are still passed so a worker not yet upgraded keeps working.
 */
export function createHealthSignaler(deps: {
  client: Client;
  taskQueue: string;
  options: HealthOptions;
  /** healthBatchMs(config); 0: each call's events go at once. */
  batchMs: number;
  onError: (runId: string, err: unknown) => void;
  clock?: BatchClock;
}) {
  const send = async (run: ObservedRun, events: ObservedEvent[]): Promise<void> => {
    const input: HealthInput = {
      runId: run._id,
      teamId: run.teamId,
      ...(run.budget ? { budgetLimit: run.budget.limit } : {}),
      options: deps.options,
    };
    await unlessAlreadyStarted(() =>
      withinCallDeadline(deps.client, () =>
        deps.client.workflow.signalWithStart<Workflows['runHealthWorkflow'], [ObservedEvent[]]>(
          workflowTypes.health,
          {
            workflowId: healthWorkflowId(run._id),
            taskQueue: deps.taskQueue,
            args: [input],
            signal: observeManySignal,
            signalArgs: [events],
            priority: teamPriority(run.teamId),
            typedSearchAttributes: new TypedSearchAttributes(runAttributes(run._id, run.teamId)),
            // A run whose health was reaped after it ended (completed) does not get a new one from a late event;
            // one whose health failed or was terminated does, or nothing would watch the run again.
            workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
          },
        ),
      ),
    );
  };
  const batcher = createEventBatcher({
    windowMs: deps.batchMs,
    send,
    onError: deps.onError,
    clock: deps.clock,
  });
  return {
    ...batcher,
    observe: (run: ObservedRun, events: ObservedEvent[]) => batcher.observe(run, events.map(forHealth)),
  };
}
