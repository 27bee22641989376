// Every activity the worker registers, as the workflows call it: its arguments and its result. The workflows
// proxy this interface; activities/ implements it (createActivities is checked against it), so the workflow side
// never imports activity code. Nothing here imports the project above domain/.
import type { CallbackTrigger, DeliveryCategory, PacingHold } from '../domain/callback';
import type { HealthState } from '../domain/health';
import type { OperatorAlert } from '../domain/ops';
import type { ClaimState, RunOutcome } from '../domain/outcome';
import type { RunStatus } from '../domain/runStatus';
import type { EscalationRung } from '../domain/interaction';
import type { TeamEvent } from '../domain/teamEvents';
import type {
  DigestEntry,
  EndpointRecoverInput,
  FollowUpSend,
  HealthOptions,
  InteractionAnswer,
  InteractionPlan,
  InteractionRef,
  InteractionSnooze,
  RecoverCounts,
  RecordedTeamEvent,
  RecoverInput,
  SweepPass,
} from './workflows';

export interface Activities {
  // Claims: the workflow is the holder; the claim outlives Temporal's retention.
  tryMark(key: string, holder: string): Promise<boolean>;
  /** tryMark for each key, in one call: which of them this holder took. */
  tryMarkEach(keys: string[], holder: string): Promise<boolean[]>;
  markDelivered(key: string, holder: string, result?: string): Promise<boolean>;
  /** Keeps a pending claim in hand: for another grace, or for `forSeconds` and a grace (a wait on a timer). */
  renewClaim(key: string, holder: string, forSeconds?: number): Promise<boolean>;
  unmark(key: string, holder: string): Promise<void>;
  wasDelivered(key: string): Promise<boolean>;
  describeClaim(key: string): Promise<{ state: ClaimState; result?: string }>;
  resettleClaim(key: string, result: string): Promise<boolean>;

  /** The episode's record; the first of an episode wins. */
  recordEpisode(outcome: RunOutcome): Promise<void>;

  // Push.
  isStandbyVetoed(runId: string, teamId?: string): Promise<boolean>;
  deliverPush(outcome: RunOutcome): Promise<PushDeliveryResult>;

  // Digests: when the person can be reached now (epoch ms; undefined: now), and one digest's send.
  digestReleaseAt(teamId: string, userId: string): Promise<number | undefined>;
  sendDigest(digest: DigestSend): Promise<DigestSendResult>;
  /** A digest no device took for a day: its holds say it gave up (the episodes view, explain, a metric). */
  giveUpDigest(digest: DigestRef): Promise<void>;

  // Callback: one attempt per call; the schedule is the workflow's.
  callbackAttemptCount(episodeId: string): Promise<number>;
  sendCallback(
    episodeId: string,
    runId: string,
    place?: AttemptPlace,
    teamId?: string,
  ): Promise<CallbackAttempt>;
  /** The attempt log's row of a give-up its attempt could not write (`attempt.unrecordedGiveUp`), written once. */
  recordCallbackGiveUp(
    episodeId: string,
    runId: string,
    place: AttemptPlace,
    attempt: CallbackAttempt,
  ): Promise<void>;

  // Recover: a page of a team's callbacks that gave up in a window, and the recover's progress row.
  gaveUpCallbacks(request: GaveUpRequest): Promise<GaveUpPage>;
  saveRecoverProgress(recover: RecoverInput, counts: RecoverCounts, completed: boolean): Promise<void>;
  /** One slot of the team's redelivery budget for a recover's send of the episode (the same one if asked again). */
  takeRecoverSend(send: RecoverSend): Promise<RecoverSendAdmission>;
  /** The slot back: the send went nowhere (held, or another delivery of the episode was running). */
  returnRecoverSend(send: RecoverSend): Promise<void>;

  // Operator alerts.
  opsAlertSettings(): Promise<AlertRetrySettings>;
  classifyFailedRun(outcome: RunOutcome): Promise<OperatorAlert | undefined>;
  callbackExhaustedAlert(
    outcome: RunOutcome,
    attempts: number,
    lastError: string,
  ): Promise<OperatorAlert | undefined>;
  postOperatorAlert(alert: OperatorAlert, claim?: AlertClaim): Promise<AlertSend>;
  stampOpsMarker(alert: OperatorAlert): Promise<boolean>;

  // Team endpoints: the event recorded (its sequence, the endpoints owed it, the schedule), then one attempt per
  // call of its delivery to one endpoint, or one attempt to each of several endpoints (the first attempts).
  recordTeamEvent(event: TeamEvent): Promise<RecordedTeamEvent>;
  sendEndpointEvent(eventId: string, endpointId: string, place: AttemptPlace): Promise<CallbackAttempt>;
  /** sendEndpointEvent to each endpoint, side by side; the attempts in the order of `sends`. */
  sendEndpointEventToEach(eventId: string, sends: EndpointSend[]): Promise<CallbackAttempt[]>;
  /** The events an endpoint missed in a recover's window (ids, oldest first). */
  endpointMissedEvents(input: EndpointRecoverInput): Promise<string[]>;

  // Run health.
  healthSettings(runId: string, withSaved?: boolean): Promise<HealthSettings>;
  persistedRunStatus(runId: string): Promise<RunStatus | undefined>;
  /** When the run's end was written (epoch ms; by the writer's clock, as its events' writtenAt). */
  runEndedAt(runId: string): Promise<number | undefined>;
  /** The run's newest spend report in the store, whichever process wrote it (read at the run's end). */
  recordedSpend(runId: string): Promise<RecordedSpend | undefined>;
  /** The run's progress events written after `since` (epoch ms), whichever process wrote them (a stall check). */
  recordedProgressSince(runId: string, since: number): Promise<RecordedProgress | undefined>;
  saveHealth(state: HealthState): Promise<void>;
  reapHealth(runId: string): Promise<void>;

  // Interactions (workflows/interaction.ts): each send under its own claim, taken by the workflow.
  /** Marks the interaction's workflow opened (what the sweep checks), then reads when it was asked and its ladder. */
  interactionPlan(ref: InteractionRef, holder: string): Promise<InteractionPlan>;
  /** The replacing push to every device the question reached, saying who answered. */
  closeAnswered(ref: InteractionRef, answer: InteractionAnswer): Promise<FollowUpResult>;
  /** One rung of the ladder, unless the interaction is no longer open when it is read. */
  sendRung(ref: InteractionRef, index: number, rung: EscalationRung): Promise<FollowUpResult>;
  /** A snooze's re-push of the question to its person, unless the interaction is no longer open. */
  sendSnoozed(ref: InteractionRef, snooze: InteractionSnooze): Promise<FollowUpResult>;
  /**
   * A rung or snooze still owed when the answer came, after a try that threw: whether that try reached someone
   * (delivered, a rung's escalation announced) or not (closed). Pushes and posts nothing.
   */
  followUpSentBefore(ref: InteractionRef, due: FollowUpSend): Promise<FollowUpResult>;

  // The sweep.
  sweepOnce(): Promise<SweepPass>;
  sweepReapExpired(): Promise<number>;
}

/**
 * How one of an interaction's sends went: `closed` when the interaction was no longer open (answered, abandoned,
 * its run moved on) and nothing was sent; `held` when every person it was for waits for their digest.
 */
export interface FollowUpResult {
  /** vetoed: a rung not sent while an assistant stands by on the run (the standby veto). */
  result: 'delivered' | 'not_addressable' | 'closed' | 'held' | 'vetoed' | 'failed';
  /** Devices (push) or receivers (webhook) that took it. */
  delivered: number;
  /**
   * A failure worth another try (a receiver's or push service's transient answer); absent on a failure for good.
   * `afterSeconds`: the receiver's Retry-After; `held`: the worker held the attempt back (nothing was sent).
   */
  retry?: { afterSeconds?: number; held?: boolean };
}

/** One endpoint's attempt of an event, and where it sits in that endpoint's schedule. */
export interface EndpointSend {
  endpointId: string;
  place: AttemptPlace;
}

/** A recover's send of one episode's callback, as the team's redelivery budget counts it. */
export interface RecoverSend {
  teamId: string;
  recoverId: string;
  episodeId: string;
}

export type RecoverSendAdmission =
  | { admitted: true }
  /** The budget is spent: a slot frees at `freeAt` (ISO), in retryAfterSeconds. */
  | { admitted: false; retryAfterSeconds: number; freeAt: string };

export interface GaveUpRequest {
  teamId: string;
  /** [since, until), ISO. */
  since: string;
  until: string;
  limit: number;
  /** A give-up re-sent (a redelivery, manual or a recover's, that went out) this recently is skipped. */
  resentWithinSeconds?: number;
  /** The previous page's last give-up (its time, ISO, and row id). */
  after?: { at: string; id: string };
}

export interface GaveUpPage {
  /** The page's callbacks that are still given up (a later delivery or redelivery takes one out). */
  callbacks: { runId: string; episodeId: string; seenAttempts: number }[];
  /** Still given up, but re-sent within the request's resentWithinSeconds: left out of `callbacks`. */
  skipped?: number;
  next?: { at: string; id: string };
}

export interface FanOutResult {
  attempted: number;
  delivered: number;
  /** Skipped because an earlier attempt of the same episode already reached them. */
  alreadyDelivered: number;
  pruned: number;
  failed: number;
  /** Of the failed, those worth another try (5xx, 429, network). */
  retryable: number;
  /**
   * When every retryable send was answered a Retry-After past what a send waits (429), the soonest: the fan-out's
   * next attempt is not made before it. Absent when one failed without asking (the retry policy's backoff then).
   */
  retryAfterMs?: number;
  /** Of the failed, messages a push service refused as such (400, 413): never taken, however often sent again. */
  rejected?: number;
  /**
   * Recipients held for their digest (quiet hours, do-not-disturb, a burst): in their digest's hands, but no
   * success (a fan-out whose sends all failed is released, whoever it held).
   * Absent in results recorded before digests.
   */
  held?: number;
}

export interface DigestRef {
  /** `digest|<workflowId>|<batch>`: its claim key, its deliveries' episode id, what its hold rows are marked with. */
  digestId: string;
  teamId: string;
  userId: string;
}

/**
 * One digest of a person in a team. It sends the person's owed holds, taken from the store at its first send;
 * digests started before that listed their entries here instead (`listed`, `counts`, `episodeIds`).
 */
export interface DigestSend extends DigestRef {
  /** The person's digests share it, so a newer one replaces the earlier. */
  tag: string;
  /** Newest first. */
  listed?: DigestEntry[];
  counts?: Record<string, number>;
  /** Every episode the digest folds in. */
  episodeIds?: string[];
}

/** Not addressable: nothing to send with, nobody to send to, nothing owed, or (a resend) a newer digest went out. */
export type DigestSendResult =
  | {
      addressable: false;
      reason: 'no sink' | 'no subscription' | 'nothing owed' | 'superseded by a newer digest';
    }
  | ({ addressable: true } & Omit<FanOutResult, 'held'>);

export type PushDeliveryResult =
  | {
      addressable: false;
      reason: 'no sink' | 'no recipient' | 'no subscription' | 'no kind' | 'answered' | 'not waiting';
    }
  | ({ addressable: true } & FanOutResult);

export type CallbackAttempt =
  | {
      result: 'delivered';
      /** Absent only where a recover's retried send finds it sent by an earlier attempt (its answer lost). */
      status?: number;
      /** A recover's send whose claim could not be settled delivered (the store away): the recover settles it. */
      unsettledClaim?: string;
      /** A recover's send of a delivery that had given up, whose claim still says so (the store away): it resettles it. */
      unresettledClaim?: string;
    }
  | {
      result: 'retry';
      status?: number;
      retryAfterSeconds?: number;
      detail: string;
      /** Nothing was sent: the worker held it (the team's breaker at the origin is open, or no slot came in time). */
      held?: PacingHold;
      unrecordedGiveUp?: UnrecordedGiveUp;
    }
  | {
      result: 'stop';
      status?: number;
      detail: string;
      unrecordedGiveUp?: UnrecordedGiveUp;
      /** Nothing was sent: the claim the attempt held again before its request (place.claim) is another's. */
      claimedElsewhere?: true;
    };

/**
 * The schedule gave up on this attempt and its row in the attempt log was not written (the store away past the
 * record's deadline): what the row needs besides the outcome, so that it can be written after the attempt.
 */
export interface UnrecordedGiveUp {
  teamId: string;
  /** When the request started (ISO). */
  at: string;
  durationMs: number;
  error: DeliveryCategory | PacingHold;
  /** The attempt's Temporal activity attempt (the row says which ran it). */
  activityAttempt?: number;
}

/** Where an attempt sits in its delivery, so its row in the attempt log says what came next. */
export interface AttemptPlace {
  /** This attempt's number in the caller's own count (1-based): the log's numbering starts looking there. */
  attempt: number;
  /** The schedule's wait after this attempt if it asks for another; absent for the last one. */
  waitIfRetried?: number;
  /** The wait is decided by callbackWaitSeconds' uncapped rule (episodes started with a jitter). */
  scheduleUncapped?: boolean;
  trigger: CallbackTrigger;
  /**
   * The schedule's attempt is not spent if the worker holds it: the workflow waits (heldWaitSeconds) and tries it
   * again. `held`: how often this attempt was held already.
   */
  heldWaits?: { held: number };
  /** A recover's redelivery: it does not go past an open breaker (a manual one, which someone asked for, does). */
  recoverId?: string;
  /**
   * The delivery's claim, held again in the receiver's slot just before the request (it may have gone stale in a
   * backed-up queue and been taken over); another's, nothing is sent (claimedElsewhere). `heldSince` (a first
   * attempt's: when its claim was taken, on the workflow's clock, no later than the take): held again only once
   * half the claim grace has passed since, as before that it cannot have gone stale. Absent (an attempt after a
   * wait): held again whatever the time.
   */
  claim?: { key: string; holder: string; heldSince?: number };
}

/** How an alert workflow retries, from the worker's own config (not from whoever started it). */
export interface AlertRetrySettings {
  /** Give up (settle gave_up) once the next wait would pass this long since the first attempt. */
  retryForMs: number;
  /** Backoff cap: min(600 s, claim grace / 3), so the claim is renewed well before it goes stale. */
  maxWaitMs: number;
}

/** The dispatcher's claim on the alert: postOperatorAlert settles it as soon as the receiver took the alert. */
export interface AlertClaim {
  key: string;
  holder: string;
}

export type AlertSend = 'sent' | 'already_sent';

/** A run's spend as its events recorded it: the cumulative figure, and when it was written (epoch ms). */
export interface RecordedSpend {
  spent: number;
  writtenAt: number;
}

/** When the first and the newest of a run's progress events since a time were written (epoch ms). */
export interface RecordedProgress {
  first: number;
  newest: number;
}

/** Run health's settings: the worker's config and the run's budget as persisted. */
export interface HealthSettings {
  options: HealthOptions;
  budgetLimit?: number;
  /** Asked for by an execution started afresh: the state its run's last execution saved, if any. */
  saved?: HealthState;
}
