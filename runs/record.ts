// Writes outside the status machine's transitions: a new run (run_started), the progress events of a running one,
// and a new callback secret.
import { randomBytes } from 'node:crypto';
import type { CallbackEvent, Run } from '../domain/run';
import { ConflictError } from '../domain/errors';
import { IllegalTransitionError, isTerminal } from '../domain/runStatus';
import { loadRun, newId, type Caller, type RunsContext } from './context';
import { observe, recordEvents } from './events';

export interface NewRun {
  title?: string;
  callback?: { url: string; secret?: string; events?: CallbackEvent[] };
  budget?: { limit: number };
  watchedIssueIds?: string[];
  escalation?: Run['escalation'];
}

/** Event types the runs service writes itself; a progress report may not forge them. */
export const RESERVED_EVENT_TYPES = new Set([
  'run_started',
  'human_input_requested',
  'run_paused',
  'run_resumed',
  'run_finished',
  'run_failed',
  'run_cancelled',
]);

export function newCallbackSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

/** Launches a run; returns it with the callback secret, which the caller sees this once. */
export async function createRun(ctx: RunsContext, caller: Caller, input: NewRun): Promise<Run> {
  const at = ctx.now();
  const run: Run = {
    _id: newId('run'),
    teamId: caller.teamId,
    ownerId: caller.userId,
    title: input.title ?? 'Untitled run',
    status: 'running',
    revision: 0,
    pauseCount: 0,
    watchedIssueIds: input.watchedIssueIds ?? [],
    ...(input.callback
      ? {
          callback: {
            url: input.callback.url,
            secret: input.callback.secret ?? newCallbackSecret(),
            ...(input.callback.events ? { events: input.callback.events } : {}),
          },
        }
      : {}),
    ...(input.budget ? { budget: input.budget } : {}),
    ...(input.escalation ? { escalation: input.escalation } : {}),
    checkpoint: { status: 'running', at },
    createdAt: at,
    updatedAt: at,
  };
  await ctx.runs.insert(run);
  await recordEvents(ctx, run, [{ type: 'run_started' }], at);
  return run;
}

/**
 * A new callback secret for the run, returned this once; the one it replaces keeps signing beside it for the
 * overlap (signingSecrets). A second rotation ends the first one's overlap: only the latest previous secret is
 * kept. Another rotation of the same run at the same moment makes this a conflict.
 */
export async function rotateCallbackSecret(ctx: RunsContext, caller: Caller, runId: string): Promise<string> {
  const run = await loadRun(ctx, caller, runId);
  if (!run.callback) throw new ConflictError('the run has no callback URL');
  const secret = newCallbackSecret();
  if (!(await ctx.runs.rotateCallbackSecret(run._id, run.callback.secret, secret, ctx.now())))
    throw new ConflictError('the callback secret changed while it was rotated; rotate again');
  return secret;
}

/** A progress event from the engine (node_started, usage, run_workspace_checkpoint, ...). */
export async function recordProgress(
  ctx: RunsContext,
  caller: Caller,
  runId: string,
  type: string,
  data: Record<string, unknown>,
) {
  const run = await loadRun(ctx, caller, runId);
  const refused = (status: string) => new IllegalTransitionError(`cannot record events on a ${status} run`);
  if (isTerminal(run.status)) throw refused(run.status);
  const at = ctx.now();
  const items = [{ type, data }];
  const [event] = await ctx.events.append(run, items, at);
  // The run may have ended since it was read: an event after its end is taken back and refused, as above (the
  // end writes its status before its events, so one read now that finds it running orders this event first).
  const now = await ctx.runs.waitingOf(run.teamId, run._id);
  if (!now || isTerminal(now.status)) {
    await ctx.events.remove(run._id, event._id);
    throw refused(now?.status ?? 'removed');
  }
  await observe(ctx, run, items, at);
  return event;
}
