// The push family's pure decisions: which notification kind an outcome maps to, what it says, where it links.
// No Node builtins: the episode workflow imports kindFor.
import type { RunOutcome } from './outcome';

/** The fan-out activity's attempts: the episode workflow's retry policy and the activity's last-attempt check. */
export const FAN_OUT_ATTEMPTS = 5;

export type PushKind =
  'human_input_requested' | 'usage_parked' | 'run_finished' | 'run_failed' | 'run_cancelled' | 'test';

/** The contract's Web Push payload (encrypted aes128gcm, VAPID-signed). */
export interface PushPayload {
  v: 1;
  kind: PushKind;
  title: string;
  body: string;
  url: string;
  /** The episode id: a repeated delivery replaces the notification instead of stacking. */
  tag: string;
  runId: string;
  episodeId: string;
}

/**
 * kindFor: a usage park gets its own kind; a pause with an empty interaction id is an operator soft-pause and
 * maps to no kind at all; an outcome with an empty subject (run) id is dropped the same way.
 */
export function kindFor(outcome: RunOutcome): PushKind | undefined {
  if (!outcome.runId) return undefined;
  switch (outcome.kind) {
    case 'run_paused':
      if (outcome.pause?.reason === 'usage_park') return outcome.pause.wall ? 'usage_parked' : undefined;
      return outcome.pause?.interactionId ? 'human_input_requested' : undefined;
    case 'run_finished':
    case 'run_failed':
    case 'run_cancelled':
      return outcome.kind;
  }
}

const BODY_LIMIT = 180;

function clip(text: string, limit = BODY_LIMIT): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= limit ? flat : `${flat.slice(0, limit - 1)}…`;
}

export function runDeepLink(studioUrl: string, runId: string): string {
  return `${studioUrl}/runs/${encodeURIComponent(runId)}`;
}

/** Title and body per kind; the human-input body is the interaction's prompt. */
export function renderPush(
  outcome: RunOutcome,
  kind: Exclude<PushKind, 'test'>,
  studioUrl: string,
  interactionPrompt?: string,
): PushPayload {
  const title = clip(outcome.title || 'Your run', 80);
  const text: Record<typeof kind, [string, string]> = {
    human_input_requested: [
      `${title} needs your input`,
      interactionPrompt ?? 'A run is waiting for your answer.',
    ],
    usage_parked: [
      `${title} is parked`,
      `Paused at the ${outcome.pause?.wall ?? 'usage'} cap. Raise the cap or resume the run.`,
    ],
    run_finished: [`${title} finished`, outcome.finalAnswer || 'The run finished.'],
    run_failed: [`${title} failed`, outcome.error?.message || outcome.error?.code || 'The run failed.'],
    run_cancelled: [`${title} was cancelled`, 'The run was cancelled.'],
  };
  const [heading, body] = text[kind];
  return {
    v: 1,
    kind,
    title: heading,
    body: clip(body),
    url: runDeepLink(studioUrl, outcome.runId),
    tag: outcome.episodeId,
    runId: outcome.runId,
    episodeId: outcome.episodeId,
  };
}

export function renderTestPush(studioUrl: string, userId: string, nonce: string): PushPayload {
  const episodeId = `test:${userId}:${nonce}`;
  return {
    v: 1,
    kind: 'test',
    title: 'Flow test notification',
    body: 'Notifications from Flow reach this device.',
    url: `${studioUrl}/`,
    tag: episodeId,
    runId: '',
    episodeId,
  };
}
