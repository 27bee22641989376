// The persisted run, as every part of the system reads it.
import type { EscalationPolicy } from './interaction';
import type { PauseReason, RunStatus } from './runStatus';
import { headUnits } from './text';

export interface RunPause {
  reason: PauseReason;
  /** 1 for the run's first pause, 2 for the second, ...: tells two parks at the same wall apart. */
  seq: number;
  /** The interaction a human must answer; absent for a usage park or an operator soft-pause. */
  interactionId?: string;
  /** The usage cap that parked the run. */
  wall?: string;
  at: Date;
  /**
   * The question's push reached someone (a device, or a digest that holds it): a watch that ends later owes it no
   * replay. Absent on pauses from before it was noted (a watch's end replays those, as it did).
   */
  offered?: true;
}

export interface RunError {
  code: string;
  message: string;
}

export interface Run {
  _id: string;
  teamId: string;
  ownerId: string;
  title: string;
  status: RunStatus;
  /** Transitions applied so far (absent on runs created before it was kept: 0). */
  revision?: number;
  /** The current pause while status is paused; kept after resume as the last pause (for history). */
  pause?: RunPause;
  pauseCount: number;
  /**
   * events: the ends the launcher wants a callback for; absent, all of them. previousSecret: the secret a rotation
   * replaced, and when; callbacks carry its signature too for a while (signingSecrets).
   */
  callback?: {
    url: string;
    secret: string;
    events?: CallbackEvent[];
    previousSecret?: { secret: string; rotatedAt: Date };
  };
  budget?: { limit: number };
  /** The launch's own escalation ladder, in place of the team's (its webhook rungs post to the team's URL). */
  escalation?: Pick<EscalationPolicy, 'rungs'>;
  watchedIssueIds: string[];
  /**
   * Assistants with an active watch on the run (the watches collection is the authority; this copy lets the sweep
   * see the standby veto in the run it lists, with no read of its own). At most ASSISTANT_WATCHERS_PER_RUN.
   */
  assistantWatchers?: string[];
  finalAnswer?: string;
  /** What a listing of runs shows of the final answer (written with it): its head, whole when short enough. */
  listing?: ListedAnswer;
  /**
   * Answers of complete operations not yet applied, by the token their transition row names: the row never holds
   * the answer, so a caller finishing a transition whose writer died reads it here; null: given up, its writer
   * died before staging it. The status write clears them all.
   */
  pendingAnswers?: Record<string, string | null>;
  error?: RunError;
  /** The engine checkpoint, saved together with the status it belongs to. */
  checkpoint?: { status: RunStatus; at: Date; node?: string };
  /** Episode keys of the operator alerts confirmed for this run (stamped only off a delivered claim). */
  opsAlerted?: string[];
  opsAlertedAt?: Date;
  createdAt: Date;
  updatedAt: Date;
  endedAt?: Date;
}

/** A final answer's characters a listing of runs shows (GET /runs/:id has it whole). */
export const FINAL_ANSWER_LISTED_CHARS = 1000;

export interface ListedAnswer {
  finalAnswer: string;
  finalAnswerTruncated?: true;
}

/** The answer as a listing shows it: its first FINAL_ANSWER_LISTED_CHARS characters, never half a surrogate pair. */
export function listedAnswer(answer: string): ListedAnswer {
  const { head, cut } = headUnits(answer, FINAL_ANSWER_LISTED_CHARS);
  return cut ? { finalAnswer: head, finalAnswerTruncated: true } : { finalAnswer: head };
}

/** A pause as the API shows it: without what only the service reads (`offered`). */
function shownPause({ offered: _offered, ...shown }: RunPause): Omit<RunPause, 'offered'> {
  return shown;
}

/** The run as the API shows it: never the callback secret. */
export function publicRun(run: Run): Record<string, unknown> {
  const { _id, callback, pause, pendingAnswers: _pending, listing: _listing, ...rest } = run;
  return {
    id: _id,
    ...rest,
    pause: run.status === 'paused' && pause ? shownPause(pause) : undefined,
    callback: callback
      ? { url: callback.url, ...(callback.events ? { events: callback.events } : {}) }
      : undefined,
  };
}

/** An error message's characters a listing of runs shows. */
export const ERROR_MESSAGE_LISTED_CHARS = 1000;

/**
 * A run in a listing, a few KB however large the run: its final answer and error message cut to their heads
 * (`finalAnswerTruncated`, `errorMessageTruncated` when cut), without the lists only its own page shows (its
 * escalation ladder, watched issues and assistant watchers). GET /runs/:id has them whole.
 */
export function listedRun(run: Run): Record<string, unknown> {
  const {
    finalAnswer: _answer,
    escalation: _ladder,
    watchedIssueIds: _issues,
    assistantWatchers: _watchers,
    ...shown
  } = publicRun(run);
  const message = run.error && headUnits(run.error.message, ERROR_MESSAGE_LISTED_CHARS);
  return {
    ...shown,
    ...run.listing,
    ...(run.error && message
      ? {
          error: { ...run.error, message: message.head },
          ...(message.cut ? { errorMessageTruncated: true } : {}),
        }
      : {}),
  };
}

/** The ends a launcher can ask a callback for (launch body callback.events; all by default). */
/** Assistants that may watch one run at once: the run carries their ids, and every run read carries the run. */
export const ASSISTANT_WATCHERS_PER_RUN = 100;

export const CALLBACK_EVENTS = ['run.finished', 'run.failed', 'run.cancelled'] as const;
export type CallbackEvent = (typeof CALLBACK_EVENTS)[number];

/** The callback event of each end. */
export const CALLBACK_EVENT_OF: Partial<Record<RunStatus, CallbackEvent>> = {
  finished: 'run.finished',
  failed: 'run.failed',
  cancelled: 'run.cancelled',
};

/**
 * Whether the run's launcher wants a callback for the run as it stands: it asked for one and, for an end, did not
 * filter that end out. A paused run answers as the launcher asked (shouldNotify keeps pauses out).
 */
export function callbackWanted(run: Pick<Run, 'status' | 'callback'>): boolean {
  if (!run.callback) return false;
  const event = CALLBACK_EVENT_OF[run.status];
  return !event || !run.callback.events || run.callback.events.includes(event);
}
