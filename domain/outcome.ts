// The outcome spine: one pure function over the persisted run, called by every emitter (the API process and
// the runner CLI), so the same run always yields the same outcome and the same per-episode id.
import { callbackWanted, type Run, type RunError } from './run';
import type { EscalationRung } from './interaction';
import type { PauseReason, RunStatus } from './runStatus';

export const OUTCOME_KINDS = ['run_paused', 'run_finished', 'run_failed', 'run_cancelled'] as const;
export type OutcomeKind = (typeof OUTCOME_KINDS)[number];

export interface RunOutcome {
  version: 1;
  /** The per-episode id: the episode workflow's id and the push family's claim key. */
  episodeId: string;
  kind: OutcomeKind;
  runId: string;
  teamId: string;
  ownerId: string;
  title: string;
  status: RunStatus;
  pause?: {
    reason: PauseReason;
    seq: number;
    /** '' for an operator soft-pause or a usage park: no human is asked anything. */
    interactionId: string;
    wall?: string;
  };
  finalAnswer?: string;
  error?: RunError;
  /** The launcher asked for a completion callback (its URL and secret stay in the run, out of history). */
  callbackRequested: boolean;
  /** ISO time of the pause or the end. */
  occurredAt: string;
}

/** The episode of a pause for a human: its interaction's; also the tag and Topic of every push about it. */
export const inputEpisodeId = (runId: string, interactionId: string): string =>
  `${runId}:input:${interactionId}`;

/** The interaction a human-input episode asked about, else undefined. */
export function interactionOfEpisode(runId: string, episodeId: string): string | undefined {
  const prefix = inputEpisodeId(runId, '');
  return episodeId.startsWith(prefix) ? episodeId.slice(prefix.length) : undefined;
}

/**
 * The per-episode id. Each pause is its own episode, keyed by what it waits on; the terminal outcome is one
 * episode per run whatever its status:
 *   <runId>:input:<interactionId>        a pause for a human
 *   <runId>:park:<wall>:<pauseSeq>       a usage park (the sequence tells two parks at one wall apart)
 *   <runId>:soft-pause:<pauseSeq>        an operator soft-pause
 *   <runId>:end                          finished, failed or cancelled
 * Returns undefined for a running run: it owes no outcome.
 */
export function runOutcomeEventId(run: Run): string | undefined {
  return episodeOfStatus(run._id, run);
}

/** runOutcomeEventId of a run read only for its status and pause. */
export function episodeOfStatus(runId: string, run: Pick<Run, 'status' | 'pause'>): string | undefined {
  switch (run.status) {
    case 'running':
      return undefined;
    case 'paused': {
      const pause = run.pause;
      if (!pause) return undefined;
      if (pause.reason === 'human_input') return inputEpisodeId(runId, pause.interactionId ?? '');
      if (pause.reason === 'usage_park') return `${runId}:park:${pause.wall ?? ''}:${pause.seq}`;
      return `${runId}:soft-pause:${pause.seq}`;
    }
    default:
      return `${runId}:end`;
  }
}

const KIND_BY_STATUS: Record<RunStatus, OutcomeKind | undefined> = {
  running: undefined,
  paused: 'run_paused',
  finished: 'run_finished',
  failed: 'run_failed',
  cancelled: 'run_cancelled',
};

/**
 * Builds the outcome from the run as persisted. A caller's body error would suggest "failed", but the persisted
 * status always decides the kind: a run that resumed owes nothing, a run whose body carried an error but that
 * was cancelled or finished meanwhile is cancelled or finished. The body error only fills in a failed run's
 * missing error.
 */
export function buildRunOutcome(run: Run, bodyError?: RunError): RunOutcome | undefined {
  const kind = KIND_BY_STATUS[run.status];
  const episodeId = runOutcomeEventId(run);
  if (!kind || !episodeId) return undefined;
  const pause =
    run.status === 'paused' && run.pause
      ? {
          reason: run.pause.reason,
          seq: run.pause.seq,
          interactionId: run.pause.interactionId ?? '',
          ...(run.pause.wall !== undefined ? { wall: run.pause.wall } : {}),
        }
      : undefined;
  const occurredAt = (run.status === 'paused' ? run.pause?.at : run.endedAt) ?? run.updatedAt;
  return {
    version: 1,
    episodeId,
    kind,
    runId: run._id,
    teamId: run.teamId,
    ownerId: run.ownerId,
    title: run.title,
    status: run.status,
    ...(pause ? { pause } : {}),
    ...(run.status === 'finished' && run.finalAnswer !== undefined ? { finalAnswer: run.finalAnswer } : {}),
    ...(run.status === 'failed' ? { error: run.error ?? bodyError } : {}),
    callbackRequested: callbackWanted(run),
    occurredAt: new Date(occurredAt).toISOString(),
  };
}

/** How long a settled claim (and what it dedupes: deliveries, attempts, team events) is kept. */
export const CLAIM_RETENTION_SECONDS = 30 * 24 * 3600;
/**
 * What is older than this is not raised or handed off again, only let go (or given up): its claims, which would
 * dedupe what went, may be gone before a retry of it settles.
 */
export const RAISED_AGAIN_WITHIN_SECONDS = CLAIM_RETENTION_SECONDS / 2;

/**
 * The rungs of a question asked at `askedAtMs` that fell due longer ago than anything is raised again: settled long
 * ago, their claims maybe reaped, never sent again (by index in the policy).
 */
export function lapsedRungs(rungs: EscalationRung[], askedAtMs: number, nowMs: number): number[] {
  const lapsedBefore = nowMs - RAISED_AGAIN_WITHIN_SECONDS * 1000;
  return rungs.flatMap((rung, index) => (askedAtMs + rung.afterSeconds * 1000 < lapsedBefore ? [index] : []));
}

/** Claim keys: the push family claims the episode id itself; the others prefix it so they never collide. */
export const claimKeys = {
  push: (episodeId: string) => episodeId,
  callback: (episodeId: string) => `cb|${episodeId}`,
  ops: (episodeId: string) => `ops|${episodeId}`,
};

export type ClaimFamily = keyof typeof claimKeys;

/** A claim as its family sees it: none yet, held by a holder at work, or settled for good. */
export type ClaimState = 'absent' | 'pending' | 'delivered';

const CALLBACK_CLAIM_PREFIX = claimKeys.callback('');
const OPS_CLAIM_PREFIX = claimKeys.ops('');

/** The family a claim key belongs to (claimKeys read backwards): prefixed keys, else the push family's. */
export function claimFamily(key: string): ClaimFamily {
  if (key.startsWith(CALLBACK_CLAIM_PREFIX)) return 'callback';
  if (key.startsWith(OPS_CLAIM_PREFIX)) return 'ops';
  return 'push';
}

/** A run's episode id as runOutcomeEventId makes it (run ids have neither `:` nor `|`). */
const EPISODE_ID = /^([^:|]+):(?:end$|input:|park:|soft-pause:)/;

/**
 * The run and episode a family's claim key is for (claimKeys read backwards); undefined for every other key (a
 * rung's, a close's, a digest's, a run-health alert's).
 */
export function episodeOfClaimKey(key: string): { runId: string; episodeId: string } | undefined {
  const family = claimFamily(key);
  const episodeId = key.slice(claimKeys[family]('').length);
  const runId = EPISODE_ID.exec(episodeId)?.[1];
  return runId === undefined ? undefined : { runId, episodeId };
}
