// The push family's pure decisions: which notification kind an outcome maps to, what it says, where it links.
// No Node builtins: the episode workflow imports kindFor.
import type { RunOutcome } from './outcome';
import { clipUnits, headUnits } from './text';

/** The fan-out activity's attempts: the episode workflow's retry policy and the activity's last-attempt check. */
export const FAN_OUT_ATTEMPTS = 5;

/** How long an episode keeps trying the recipients a confirmed fan-out missed (workflows/episode.ts). */
export const MISSED_RECIPIENTS_RETRY_SECONDS = 24 * 3600;

export type PushKind =
  | 'human_input_requested'
  | 'usage_parked'
  | 'run_finished'
  | 'run_failed'
  | 'run_cancelled'
  | 'test'
  | 'digest'
  | 'answered';

/** The kinds an outcome pushes (a test push, a digest and an answered close are made another way). */
export type OutcomePushKind = Exclude<PushKind, 'test' | 'digest' | 'answered'>;

/** A choice a paused run offers, as the pause named it. */
export interface InteractionChoice {
  id: string;
  label: string;
}

/**
 * A choice as one recipient's notification carries it, in the contract's (and the Notifications API's) words: the
 * choice's id as `action`, its label as `title`, and the single-use token that answers with it.
 */
export interface PushAction {
  action: string;
  title: string;
  token: string;
}

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
  /** Human input with choices: each recipient's own, each with a token bound to that person. */
  actions?: PushAction[];
  /** This device's token for POST /notifications/receipts (shown, clicked, the action taken). */
  receipt?: string;
  /**
   * Alerts again though it replaces a notification of its tag (an escalation rung or a snooze pushing the question
   * once more); without it a replacement is silent (a repeated delivery, the answer's close).
   */
  renotify?: true;
  /**
   * A digest's: how many run updates it tells of. A service worker adds up the person's digests still on screen
   * (their shared tag shows one), so a newer one never hides an older one's updates.
   */
  count?: number;
}

/** One recipient's copy of a payload: the choices with that person's action tokens (by choice id). */
export function withActions(
  payload: PushPayload,
  choices: InteractionChoice[],
  tokens: ReadonlyMap<string, string>,
): PushPayload {
  const actions = choices.flatMap((choice) => {
    const token = tokens.get(choice.id);
    return token ? [{ action: choice.id, title: choice.label, token }] : [];
  });
  return actions.length ? { ...payload, actions } : payload;
}

/**
 * kindFor: a usage park gets its own kind; a pause with an empty interaction id is an operator soft-pause and
 * maps to no kind at all; an outcome with an empty subject (run) id is dropped the same way.
 */
export function kindFor(outcome: RunOutcome): OutcomePushKind | undefined {
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
  return clipUnits(flat, limit);
}

/** The most of a final answer a push attempt is given: its body shows BODY_LIMIT characters, flattened. */
const PUSH_ANSWER_UNITS = 4000;

/**
 * The outcome as a push attempt reads it: its final answer's head only. Each attempt's input stays in the episode's
 * history, a day of retries long, and an answer may be a megabyte.
 */
export function forPush(outcome: RunOutcome): RunOutcome {
  const answer = outcome.finalAnswer;
  if (answer === undefined || answer.length <= PUSH_ANSWER_UNITS) return outcome;
  return { ...outcome, finalAnswer: headUnits(answer, PUSH_ANSWER_UNITS).head };
}

export function runDeepLink(studioUrl: string, runId: string): string {
  return `${studioUrl}/runs/${encodeURIComponent(runId)}`;
}

/** Title and body per kind; the human-input body is the interaction's prompt. */
export function renderPush(
  outcome: RunOutcome,
  kind: OutcomePushKind,
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

/**
 * The push that replaces an input request on every device it reached once anyone answered: the same tag and Topic
 * (the request's episode id), saying who answered and, for a choice, which.
 */
export function renderAnswered(input: {
  runId: string;
  runTitle: string;
  episodeId: string;
  answeredBy: string;
  choiceLabel?: string;
  studioUrl: string;
}): PushPayload {
  const title = clip(input.runTitle || 'Your run', 80);
  const who = clip(input.answeredBy, 60);
  const body = input.choiceLabel ? `${who} answered: ${clip(input.choiceLabel, 40)}` : `${who} answered.`;
  return {
    v: 1,
    kind: 'answered',
    title: `${title} was answered`,
    body,
    url: runDeepLink(input.studioUrl, input.runId),
    tag: input.episodeId,
    runId: input.runId,
    episodeId: input.episodeId,
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

/** One push held for a digest, as the digest lists it. */
export interface DigestLine {
  kind: string;
  title: string;
}

/** Listed in a digest's body: the newest first, at most this many (the rest are only counted). */
export const DIGEST_BODY_LINES = 5;

/** A held question answered (or its run gone on) by the time its digest went out: told as such. */
export const DIGEST_QUESTION_CLOSED = 'question_closed';
/** A held park its run left (resumed, or gone on) by the time its digest went out. */
export const DIGEST_PARK_CLOSED = 'park_closed';

/** The kinds of push that tell a run waits (for a person, or past a usage cap), and how each is told once it no longer does. */
export const DIGEST_CLOSED_KIND: Record<string, string> = {
  human_input_requested: DIGEST_QUESTION_CLOSED,
  usage_parked: DIGEST_PARK_CLOSED,
};

const DIGEST_KIND_WORDS: Record<string, [string, string]> = {
  run_finished: ['finished', 'finished'],
  run_failed: ['failed', 'failed'],
  run_cancelled: ['cancelled', 'was cancelled'],
  human_input_requested: ['waiting for input', 'needs your input'],
  usage_parked: ['waiting for input', 'is parked'],
  [DIGEST_QUESTION_CLOSED]: ['no longer waiting', 'no longer needs your input'],
  [DIGEST_PARK_CLOSED]: ['no longer waiting', 'is no longer parked'],
};

/**
 * A digest: how many runs finished, failed, were cancelled or wait for input, then the newest first. Its tag is
 * the person's in the team (the digest workflow's id): one notification on screen, into which the service worker
 * folds each digest still shown (`count` adds up); it links to the studio's run list.
 */
export function renderDigest(input: {
  digestId: string;
  tag: string;
  counts: Record<string, number>;
  /** Newest first. */
  newest: DigestLine[];
  studioUrl: string;
}): PushPayload {
  const total = Object.values(input.counts).reduce((sum, n) => sum + n, 0);
  const grouped = new Map<string, number>();
  for (const [kind, n] of Object.entries(input.counts)) {
    const word = DIGEST_KIND_WORDS[kind]?.[0] ?? kind;
    grouped.set(word, (grouped.get(word) ?? 0) + n);
  }
  const summary = [...grouped].filter(([, n]) => n > 0).map(([word, n]) => `${n} ${word}`);
  const lines = input.newest
    .slice(0, DIGEST_BODY_LINES)
    .map((line) => `${clip(line.title || 'A run', 40)} ${DIGEST_KIND_WORDS[line.kind]?.[1] ?? line.kind}`);
  return {
    v: 1,
    kind: 'digest',
    title: total === 1 ? '1 run update while you were away' : `${total} run updates while you were away`,
    body: clip([summary.join(', '), ...lines].join(' · '), 2 * BODY_LIMIT),
    url: `${input.studioUrl}/`, // the run list
    tag: input.tag,
    runId: '',
    episodeId: input.digestId,
    count: total,
  };
}

/**
 * delivered: 2xx. gone: 404/410, prune. refused: the guard refused the endpoint itself (scheme, allowlist, a
 * private address written in the URL), prune. unresolved: the endpoint's name does not exist (ENOTFOUND) or
 * resolves to an address we may not go to: nothing is sent, and it is counted on the row, pruned only when it
 * lasts (a push service's host does not vanish for one lookup; a DNS sinkhole or a split-horizon mistake must not
 * delete every subscription of a push service in one fan-out). denied: 401/403 from a host that is no known push
 * service: counted like unresolved (anyone's host can answer 403; it says nothing about our identity).
 * rejected: 400/413, this message will never be accepted as is. key_refused: 401/403 from a known push service,
 * our VAPID identity refused for this subscription: it was made under another application server key (counted
 * toward its pruning), or our key is wrong for the whole service (push_config_fault) — the fan-out tells which
 * (delivery/push/fanOut.ts). failed: still failing after retries, or
 * the resolver could not answer: worth another try.
 */
export const PUSH_RESULTS = [
  'delivered',
  'gone',
  'refused',
  'unresolved',
  'denied',
  'rejected',
  'key_refused',
  'failed',
] as const;
export type PushResult = (typeof PUSH_RESULTS)[number];

export interface SendOutcome {
  result: PushResult;
  status?: number;
  /** For operator logs: may name internal addresses or resolver codes. */
  detail?: string;
  attempts: number;
  /** A 429's Retry-After longer than a send waits: the push service's next try is not before it. */
  retryAfterMs?: number;
}

/** The longest a fan-out's next attempt waits for a push service's Retry-After (the episode is owed its push). */
export const FAN_OUT_RETRY_AFTER_CAP_MS = 10 * 60_000;
