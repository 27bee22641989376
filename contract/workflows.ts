// The workflows as both sides of Temporal know them: type names, ids, signatures (arguments and results), options
// and the signal. The worker registers the functions (workflows/index.ts); a client starts one by its name here and
// types the call with its signature, so it loads no workflow code. Nothing here imports the project above domain/,
// and nothing here may touch Node builtins: workflow code imports it too.
import type { SignalDefinition } from '@temporalio/common';
import { DEFAULT_CALLBACK_RETRY_SECONDS, type PacingHold } from '../domain/callback';
import type { HealthState, ObservedEvent } from '../domain/health';
import type { EscalationRung } from '../domain/interaction';
import type { OperatorAlert } from '../domain/ops';
import type { RunOutcome } from '../domain/outcome';
import type { TeamEvent } from '../domain/teamEvents';

/**
 * The workflow types the worker registers (the functions workflows/index.ts exports, each of the signature
 * `Workflows` gives its name, which the type check there holds): a client starts one by name,
 * `start<Workflows['episodeWorkflow']>(workflowTypes.episode, …)`; a unit test holds these names to the exports.
 */
export const workflowTypes = {
  episode: 'episodeWorkflow',
  health: 'runHealthWorkflow',
  operatorAlert: 'operatorAlertWorkflow',
  callbackRedeliver: 'callbackRedeliverWorkflow',
  callbackRecover: 'callbackRecoverWorkflow',
  sweep: 'sweepWorkflow',
  digest: 'digestWorkflow',
  digestResend: 'digestResendWorkflow',
  interaction: 'interactionWorkflow',
  teamEvent: 'teamEventWorkflow',
  endpointRecover: 'endpointRecoverWorkflow',
} as const satisfies Record<string, keyof Workflows>;

/** Every workflow's signature, by the type name it is registered under. */
export interface Workflows {
  episodeWorkflow(outcome: RunOutcome, options?: EpisodeOptions): Promise<EpisodeResult>;
  runHealthWorkflow(input: HealthInput): Promise<HealthState>;
  operatorAlertWorkflow(alert: OperatorAlert): Promise<BranchResult>;
  callbackRedeliverWorkflow(input: RedeliverInput): Promise<RedeliverResult>;
  callbackRecoverWorkflow(input: RecoverInput): Promise<RecoverCounts>;
  sweepWorkflow(): Promise<SweepReport>;
  digestWorkflow(input: DigestInput): Promise<DigestResult>;
  digestResendWorkflow(digest: DigestResend): Promise<number>;
  interactionWorkflow(
    input: InteractionRef,
    plan?: InteractionPlan,
    carried?: InteractionCarried,
  ): Promise<InteractionResult>;
  teamEventWorkflow(event: TeamEvent, recorded?: RecordedTeamEvent): Promise<TeamEventResult>;
  endpointRecoverWorkflow(input: EndpointRecoverInput): Promise<EndpointRecoverResult>;
}

/**
 * What every process that sees a run's events sends its run-health workflow: the one definition, the object
 * `defineSignal` would build, written out so that clients need not load @temporalio/workflow.
 */
export const observeSignal = { type: 'signal', name: 'observe' } as SignalDefinition<
  [ObservedEvent],
  'observe'
>;

/** The events one process observed of a run within a short window, in order, as one signal. */
export const observeManySignal = { type: 'signal', name: 'observeMany' } as SignalDefinition<
  [ObservedEvent[]],
  'observeMany'
>;

/** The episode workflow's id is the episode id itself, so a second start of one episode is refused. */
export const episodeWorkflowId = (episodeId: string): string => episodeId;

/**
 * A team event as recorded: its sequence, the endpoints subscribed to it when it happened, and the schedule. The
 * raiser that recorded it hands it to the event's workflow, which then need not record it again.
 */
export interface RecordedTeamEvent {
  sequence: number;
  endpointIds: string[];
  /** The callback family's schedule (CALLBACK_RETRY_SECONDS and its jitter) and one attempt's start-to-close. */
  retrySeconds: number[];
  retryJitter: number;
  attemptSeconds: number;
}

/** One team event's deliveries to the team's endpoints: the event's id, so a second raise of it is one delivery. */
export const teamEventWorkflowId = (eventId: string): string => `team-event|${eventId}`;

/** How one team event's deliveries ended: its sequence, and per endpoint subscribed when it happened. */
export interface TeamEventResult {
  eventId: string;
  sequence: number;
  deliveries: Record<string, BranchResult>;
}

/** An endpoint's recover: one at a time per endpoint (a second while one runs is the API's 409). */
export const endpointRecoverWorkflowId = (endpointId: string): string => `endpoint-recover|${endpointId}`;

/** What an endpoint missed in [since, until) (ISO), sent again: at most maxSends. */
export interface EndpointRecoverInput {
  teamId: string;
  endpointId: string;
  since: string;
  until: string;
  maxSends: number;
  /** Sends per execution before it continues as new (default ENDPOINT_RECOVER_SENDS_PER_EXECUTION). */
  sendsPerExecution?: number;
  /** Each send's start-to-close: the receiver's timeout and a margin (absent, in histories before it: a minute). */
  attemptSeconds?: number;
  /** Carried by continue-as-new: the events still to send, and the counts so far. */
  remaining?: string[];
  progress?: { found: number; delivered: number };
}

export interface EndpointRecoverResult {
  /** Events of the window it subscribes to, from after its creation, whose last attempt did not deliver. */
  found: number;
  delivered: number;
  failed: number;
}

/** One run-health workflow per run. */
export const healthWorkflowId = (runId: string): string => `health:${runId}`;

/** A router decision error's dispatch: the alert's claim key, so repeated reports meet the same workflow. */
export const operatorAlertWorkflowId = (episodeKey: string): string => `ops|${episodeKey}`;

/**
 * A redelivery of an episode's callback. One id per episode, a new execution per redelivery: Temporal runs at
 * most one running execution of an id in a namespace, so a second redelivery while one runs is refused at its
 * start (the API's 409) whichever API process asks; a closed one may be followed by another.
 */
export const callbackRedeliverWorkflowId = (episodeId: string): string => `cb-redeliver|${episodeId}`;

/**
 * A recover of a team's callbacks that gave up: one id per team, so a second recover while one runs is refused
 * at its start (the API's 409); a closed one may be followed by another.
 */
export const callbackRecoverWorkflowId = (teamId: string): string => `recover|${teamId}`;

/**
 * One digest workflow per person in a team: the pushes held for them (quiet hours, do-not-disturb, a burst) wait
 * there for one push when they can be reached. Started with signal-with-start by whoever holds a push.
 */
export const digestWorkflowId = (teamId: string, userId: string): string => `digest|${teamId}|${userId}`;

/**
 * The id of a person's `sent`th digest of the execution chain that began with run `firstRunId`: the whole run id,
 * unique per chain (a run id's head is not: Temporal's time-ordered ids share it within a minute).
 */
export const digestSendId = (workflowId: string, firstRunId: string, sent: number): string =>
  `digest|${workflowId}|${firstRunId}.${sent}`;

/**
 * A digest that missed some of the person's devices tries them again in a workflow of its own, one per digest: the
 * n-th digest of the person's chain of executions (named by its first run id, as the digest's id is).
 */
export const digestResendWorkflowId = (firstExecutionRunId: string, n: number): string =>
  `digest-resend|${firstExecutionRunId}.${n}`;

/** The digest a resend sends again: its id (its holds, its deliveries) and the tag its pushes replace each other by. */
export interface DigestResend {
  digestId: string;
  teamId: string;
  userId: string;
  tag: string;
}

/** A push held for a person: signal-with-start of their digest workflow. */
export const digestEntrySignal = { type: 'signal', name: 'digestEntry' } as SignalDefinition<
  [DigestEntry],
  'digestEntry'
>;

/** The person changed quiet hours or do-not-disturb: their digest re-reads when it may go out. */
export const prefsChangedSignal = { type: 'signal', name: 'prefsChanged' } as SignalDefinition<
  [],
  'prefsChanged'
>;

/** A digest lists at most this many held pushes (the newest); the rest are counted by kind. */
export const DIGEST_MAX_LISTED = 20;

export interface DigestEntry {
  episodeId: string;
  runId: string;
  /** The push kind it would have been. */
  kind: string;
  title: string;
  /** When it was held, ISO. */
  at: string;
  /** When the person can be reached for it, ISO. */
  releaseAt: string;
  /** quiet: quiet hours or do-not-disturb (re-read when the prefs change); burst: PUSH_BURST_LIMIT reached. */
  reason: 'quiet' | 'burst';
  /** The prefs may have changed untold since it was held (the sweep's offers): the digest reads them again. */
  rereadPrefs?: true;
}

/**
 * What a digest has gathered and not sent yet. A digest that takes its holds from the store counts its entries
 * (`pending`) and keeps the lists empty; one started before kept every entry here.
 */
export interface DigestBatch {
  /** Every episode held in it (its hold rows are `<episodeId>|<userId>`). */
  episodeIds: string[];
  /** The newest DIGEST_MAX_LISTED entries, newest first. */
  listed: DigestEntry[];
  /** Every entry by kind. */
  counts: Record<string, number>;
  /** Entries signalled since the last send. */
  pending?: number;
  /** Epoch ms: the latest release of its burst entries, and of its quiet ones (re-read on prefsChanged). */
  burstUntil: number;
  quietUntil: number;
}

export interface DigestInput {
  teamId: string;
  userId: string;
  /** Carried over by continue-as-new. */
  batch?: DigestBatch;
  sent?: number;
  /** A prefs change the last execution had not read yet (absent: none, or an execution from before it was carried). */
  prefsChanged?: boolean;
}

export interface DigestResult {
  /** Digests this execution chain sent. */
  sent: number;
}

/**
 * One workflow per interaction: started when the pause is emitted (its escalation rungs on durable timers), and
 * signalled with start by the answer (the close on every device) and by a snooze (the person's re-push), so
 * whichever comes first, or alone, finds it.
 */
export const interactionWorkflowId = (interactionId: string): string => `interaction|${interactionId}`;

export interface InteractionRef {
  runId: string;
  teamId: string;
  interactionId: string;
}

/**
 * When an interaction was asked (epoch ms) and the ladder it climbs while open (none when it is not): read by
 * the workflow's first task, or carried by the pause's start so that task arms its timers without a store call.
 */
export interface InteractionPlan {
  open: boolean;
  askedAtMs: number;
  rungs: EscalationRung[];
  /**
   * The rungs (by index) due so long ago that what deduped them may be reaped: each was settled then, and is
   * never sent again (a question open for a month, then snoozed, starts a new execution).
   */
  lapsedRungs?: number[];
  /** A webhook rung that failed is tried again after each of these waits (CALLBACK_RETRY_SECONDS), jittered. */
  webhookRetrySeconds: number[];
}

/** Who answered, and when (ISO): the answer path's signal-with-start. */
export interface InteractionAnswer {
  answeredBy: string;
  at: string;
}

export const interactionAnsweredSignal = { type: 'signal', name: 'interactionAnswered' } as SignalDefinition<
  [InteractionAnswer],
  'interactionAnswered'
>;

/** A person snoozed the input request (a notification action): pushed again SNOOZE_SECONDS after `at`. */
export interface InteractionSnooze {
  /** The snooze's own id (its token's hash): a repeated signal is one snooze. */
  snoozeId: string;
  userId: string;
  at: string;
}

export const interactionSnoozedSignal = { type: 'signal', name: 'interactionSnoozed' } as SignalDefinition<
  [InteractionSnooze],
  'interactionSnoozed'
>;

/** What an interaction's workflow did: the rungs it sent, the snoozes it re-pushed, and whether it closed. */
export interface InteractionResult {
  rungsSent: number[];
  snoozesSent: number;
  closed: boolean;
}

/** A rung or a snooze of an interaction, as its workflow queues it. */
export type FollowUpSend =
  { what: 'rung'; index: number; rung: EscalationRung } | { what: 'snooze'; snooze: InteractionSnooze };

/** A rung or a snooze an interaction's execution owes, where it stands in its retry schedule. */
export type InteractionDue = {
  atMs: number;
  /** The attempts it spent, the holds it waited, when it first fell due. */
  attempt: number;
  holds: number;
  firstAtMs: number;
  /** Its claim is kept while it waits to be tried again (to settle if the answer comes first). */
  claimKept: boolean;
  /**
   * Devices an earlier try reached while another's push service failed: it was sent, so it settles `delivered`
   * whether its retries reach the rest or not. Absent: none.
   */
  reached?: number;
  /**
   * A try of it threw (past its activity's retries): it may have reached someone before (its push went, then its
   * announce failed), so an answer that comes first asks what it reached before settling it. Absent: none threw.
   */
  threw?: true;
} & FollowUpSend;

/**
 * What an execution that continues as new hands the next: the sends it still owes, what it did so far, and the
 * holder its kept claims are held by (the next execution settles or retries them as the same holder).
 */
export interface InteractionCarried {
  queue: InteractionDue[];
  result: InteractionResult;
  holder: string;
}

/** The sweep the schedule of a task queue starts. */
export const sweepWorkflowId = (taskQueue: string): string => `sweep:${taskQueue}`;

/** How one family's branch of an episode (or an operator alert's dispatch) ended. */
export type BranchResult =
  'delivered' | 'not_addressable' | 'released' | 'claimed_elsewhere' | 'vetoed' | 'not_owed' | 'gave_up';

export interface EpisodeResult {
  episodeId: string;
  push: BranchResult;
  callback: BranchResult;
  ops: BranchResult;
}

export interface EpisodeOptions {
  /** Waits between callback attempts (CALLBACK_RETRY_SECONDS): n waits → n + 1 attempts. */
  callbackRetrySeconds: number[];
  /**
   * A released push is tried again after this (SWEEP_INTERVAL_SECONDS) while a sibling branch still runs, when the
   * sweep cannot replay the episode yet. Absent in histories started before it: the sweep's default.
   */
  releasedRetrySeconds?: number;
  /**
   * One callback attempt's start-to-close: the receiver's own timeout (CALLBACK_TIMEOUT_SECONDS) plus room for the
   * run's read and the resolver, so a worker lost mid-attempt is noticed that soon. Absent in histories started
   * before it: one minute.
   */
  callbackAttemptSeconds?: number;
  /**
   * Each wait of the callback schedule is drawn within ± this fraction of itself (CALLBACK_RETRY_JITTER: ±10 %),
   * and the schedule's own waits stand whatever their length (a receiver's Retry-After only lengthens one, up to
   * an hour). Absent in histories started before it: the waits exactly as listed, each capped at an hour.
   */
  callbackRetryJitter?: number;
}

/**
 * What a callback attempt may take beyond the receiver's timeout: the reads before the request, the wait for a
 * slot, the resolver, the writes after the answer (activities/callback's AFTER_REQUEST_MS, 16 s, and room for the
 * reads; a unit test keeps them within it).
 */
export const CALLBACK_ATTEMPT_MARGIN_SECONDS = 30;

/** How far each wait of the callback schedule may move either way, as a fraction of it. */
export const CALLBACK_RETRY_JITTER = 0.1;

/** What the config's defaults start an episode with (a unit test keeps the two equal). */
export const DEFAULT_EPISODE_OPTIONS: EpisodeOptions = {
  callbackRetrySeconds: [...DEFAULT_CALLBACK_RETRY_SECONDS],
  releasedRetrySeconds: 120,
  callbackAttemptSeconds: 10 + CALLBACK_ATTEMPT_MARGIN_SECONDS,
  callbackRetryJitter: CALLBACK_RETRY_JITTER,
};

/**
 * What an episode started without options runs with. The emitters and the sweep always pass theirs; this stays
 * what such a start always meant (the schedule of about 13 minutes), so a history started that way replays.
 */
export const EPISODE_OPTIONS_WHEN_ABSENT: EpisodeOptions = {
  callbackRetrySeconds: [20, 60, 180, 540],
  releasedRetrySeconds: 120,
  callbackAttemptSeconds: 30, // the timeout's default and the margin of the time
};

export interface HealthOptions {
  stallAfterSeconds: number;
  /** How long terminal state is kept before it is reaped. */
  reapAfterSeconds: number;
  /** Whether alerts go out at all (OPS_ALERT_WEBHOOK_URL set). */
  opsAlerts: boolean;
  /**
   * How long a stall due waits for progress an API process still holds in its batch (HEALTH_BATCH_MS, bounded by
   * the stall time). Absent (settings before it, a signaller's input): none.
   */
  batchGraceMs?: number;
}

export interface HealthInput {
  runId: string;
  teamId: string;
  /** Read by histories before HEALTH_SETTINGS_PATCH only: now the run document's budget counts. */
  budgetLimit?: number;
  /** Read by histories before HEALTH_SETTINGS_PATCH only: now the worker's own config counts. */
  options: HealthOptions;
  /** Carried over by continue-as-new. */
  state?: HealthState;
}

export interface RedeliverInput {
  runId: string;
  teamId: string;
  episodeId: string;
  /**
   * The episode's logged attempts when the request was decided: more by the time this runs means another
   * delivery ended in between (the request came while it was in flight).
   */
  seenAttempts?: number;
  /** A recover's redelivery (its id): it does not go past the team's open breaker at the receiver. */
  recoverId?: string;
  /**
   * The attempt's start-to-close, as an episode's (the receiver's timeout and a margin). Absent (started before
   * it): one minute, which a receiver given 52 s or more never had the time of.
   */
  attemptSeconds?: number;
}

export interface RedeliverResult {
  /**
   * delivered or failed: how the attempt went; not_settled: the episode's own delivery is not over; superseded:
   * another delivery ended after the request was decided (nothing sent); held: the worker held the attempt (the
   * team's breaker at the receiver is open, or no slot came in time), nothing was sent and the claim is as it was.
   */
  result: 'delivered' | 'failed' | 'not_settled' | 'superseded' | 'held';
  status?: number;
  detail?: string;
  held?: PacingHold;
}

export interface RecoverInput {
  /** The recover's own id (its progress row, what GET /callbacks/recover/:id names). */
  recoverId: string;
  teamId: string;
  /** The window the callbacks gave up in, [since, until), ISO. */
  since: string;
  until: string;
  /**
   * The most it sends (CALLBACK_RECOVER_MAX when the API started it); past it, it stops and says so. Absent
   * (recovers started before it existed): no bound.
   */
  maxSends?: number;
  /** A give-up re-sent this recently is skipped (CALLBACK_RECOVER_RESEND_AFTER_SECONDS); absent: none is. */
  resendAfterSeconds?: number;
  /** Its redeliveries' attempt start-to-close (RedeliverInput.attemptSeconds). */
  attemptSeconds?: number;
  /** Carried over by continue-as-new: where the next page starts, and the totals so far. */
  after?: { at: string; id: string };
  progress?: RecoverCounts;
}

/** A recover's progress. The optional counts are absent from progress written before they existed (read as 0). */
export interface RecoverCounts {
  /** Callbacks that gave up in the window and had not been delivered since. */
  found: number;
  /** Of those, the ones re-sent (a redelivery, manual or a recover's) within resendAfterSeconds: not sent again. */
  skipped?: number;
  /** Of those, the ones a redelivery sent (delivered + failed). */
  sent: number;
  delivered: number;
  failed: number;
  /** Of those, the ones the worker held (nothing sent): still given up, for a later recover. */
  held?: number;
  /** It sent maxSends and stopped with callbacks left to send. */
  stoppedAtMax?: boolean;
  /** While it waits for a slot of the team's redelivery budget: when one frees (ISO). */
  waitingForBudgetUntil?: string;
}

/** One sweep pass: runs listed in the window, episodes found with a claim missing, and of those the ones started. */
export interface SweepPass {
  scanned: number;
  unsettled: number;
  started: number;
  /** Held pushes still owed past their time, offered to their person's digest again (absent before it did). */
  holdsOffered?: number;
  /** Of those, the holds whose digest refused the offer (Temporal refused its signal): offered again an hour later. */
  holdsRefused?: number;
  /** Questions whose interaction workflow never started, started (absent before interactions had one). */
  interactionsStarted?: number;
  /** Answered interactions whose close never ran, signalled again (absent before). */
  closesReplayed?: number;
  /**
   * Team events recorded in the window that an endpoint is still owed (its delivery released: no claim), raised
   * again (absent before the sweep looked at them).
   */
  teamEventsRaised?: number;
  /**
   * Revisions a transition won and left unfinished (its writer died before the status write or its events, or health
   * was not told), that no caller met since: finished (their outcome went out) or given up (a complete whose answer
   * was never staged). Absent before the sweep looked.
   */
  transitionsFinished?: number;
  /**
   * Starts and signals Temporal answered and refused (its limits): episodes, questions' workflows, answers' closes,
   * team events, endpoint alerts. Each stays owed, asked again next pass (absent when none).
   */
  startsRefused?: number;
  /** Endpoints disabled for failing whose endpoint_disabled alert their disabler did not start: started (or found running). */
  disabledAlertsRaised?: number;
  /**
   * Episodes and team events released past the sweep's reach (their run or event outside the window, their first
   * release too), whose families or deliveries still owed were settled as given up. Absent when none.
   */
  gaveUpReleased?: number;
}

export interface SweepReport extends SweepPass {
  /** Expired rows the pass reaped (claims, deliveries, attempts, rate limits). */
  reaped: number;
}
