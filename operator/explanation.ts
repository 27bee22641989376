// The model flow-notify explain builds (operator/explain.ts) and prints as --json or as text (operator/render.ts).
import type { claimKeys } from '../domain/outcome';
import type { ActionCounts } from './actions';

export interface ClaimView {
  key: string;
  state: 'absent' | 'pending' | 'delivered';
  /** How it ended, once delivered (delivered, not_addressable, gave_up: …). */
  result?: string;
  /** Claimed at while pending, settled at once delivered. */
  at?: string;
  holder?: string;
}

/**
 * What one device's service worker reported of one push, never guessed: `receipt: "none"` when nothing came (a browser
 * showing the declarative form without our worker, a worker that could not reach us), and then no time is given.
 */
export interface DeviceReceiptView {
  receipt: 'reported' | 'none';
  shownAt?: string;
  clickedAt?: string;
  /** The notification action taken on this device, and when. */
  action?: string;
  actedAt?: string;
  /** When this person's answer was taken (from this device, another one, the studio or the API). */
  answeredAt?: string;
}

export interface PushDeliveryView extends DeviceReceiptView {
  userId: string;
  subscriptionId: string;
  /** The push service's origin; null when the subscription was pruned since. */
  pushService: string | null;
  at: string;
}

export interface FollowUpPushView extends PushDeliveryView {
  /** `rung:<n>` (the policy's rung n), `snooze:<id>`, or `answered` (the close). */
  followUp: string;
}

/** One row of the callback attempt log (callback_attempts): what the receiver saw, attempt by attempt. */
export interface CallbackAttemptView {
  /** 1-based, across every delivery of the episode (its schedule, re-runs, redeliveries). */
  attempt: number;
  /** When the request left. */
  at: string;
  /** delivered, retry or stop. */
  result: string;
  status?: number;
  /** Why it did not deliver: http <status>, or the error category (timeout, network error, refused: …). */
  detail?: string;
  retryAfterSeconds?: number;
  durationMs: number;
  /** The wait before the next attempt of the schedule, when one followed. */
  nextWaitSeconds?: number;
  /** When that next attempt is due. */
  nextAttemptAt?: string;
  /** episode (its own schedule) or redeliver. */
  trigger: string;
  /** Temporal's attempts of this one activity (more than 1: a worker was lost mid-attempt). */
  activityAttempts: number;
  workflowId: string;
  workflowRunId: string;
}

export interface EpisodeView {
  episodeId: string;
  kind?: string;
  recordedAt?: string;
  families: Record<keyof typeof claimKeys, ClaimView>;
  /** Each family's branch result, from the newest closed execution of the episode workflow. */
  branches?: Record<string, string>;
  pushDeliveries: PushDeliveryView[];
  pushDeliveriesTruncated: boolean;
  /** An input request's pushes after the question: each rung's and snooze's, and the close's (`answered`). */
  followUpPushes: FollowUpPushView[];
  followUpPushesTruncated: boolean;
  /** Recipients held for their digest instead of pushed, and the digest each went out in. */
  pushHeld: PushHeldView[];
  pushHeldTruncated: boolean;
  callbackAttempts: CallbackAttemptView[];
}

export interface PushHeldView {
  userId: string;
  /** quiet: quiet hours or do-not-disturb; burst: PUSH_BURST_LIMIT reached. */
  reason: string;
  heldAt: string;
  releaseAt: string;
  /** The digest that took it; absent while none has. */
  digestId?: string;
  /** A device took that digest. */
  digestSentAt?: string;
  /** That digest found no device for a day and gave up. */
  digestGaveUpAt?: string;
  /** The person opted out of it before a digest took it (its kind turned off, or own runs only): never told. */
  optedOutAt?: string;
}

export interface AlertSendView {
  at: string;
  /** sent, already_sent, or failed (the webhook refused past the retries). */
  result: string;
  failure?: string;
  activityAttempts: number;
  workflowId: string;
  workflowRunId: string;
}

export interface OperatorAlertView {
  episodeKey: string;
  kind?: string;
  severity?: string;
  summary?: string;
  claim: ClaimView;
  sends: AlertSendView[];
}

export interface ActivityView {
  type: string;
  activityId: string;
  scheduledAt: string;
  closedAt?: string;
  /** completed, failed, timed_out, canceled, or open. */
  outcome: string;
  attempts: number;
  /** The last failure: of the final attempt when it failed, else of the attempt before a success. */
  failure?: string;
}

export interface WorkflowView {
  workflowId: string;
  runId: string;
  type: string;
  status: string;
  startTime: string;
  closeTime?: string;
  uiUrl: string;
  historyEvents: number;
  historyTruncated: boolean;
  activities: ActivityView[];
  /** Activities run inside workflow tasks (claims, store writes): counted, not listed. */
  localActivities: number;
  /**
   * Its Temporal Cloud actions, by kind and in total, counted from the history read (operator/actions.ts): a cut
   * history counts what was read, and heartbeats, which no history holds, are not in it.
   */
  temporalActions: ActionCounts;
  workflowTaskFailures: string[];
  failure?: string;
}

export interface RunExplanation {
  version: 1;
  runId: string;
  run: {
    teamId: string;
    ownerId: string;
    title: string;
    status: string;
    createdAt: string;
    endedAt?: string;
    /** The callback receiver's origin only: a path or query may carry a token. */
    callbackOrigin?: string;
  } | null;
  episodes: EpisodeView[];
  operatorAlerts: OperatorAlertView[];
  workflows: WorkflowView[];
  /** callbackAttempts: the run has more than the limit; the newest are shown. */
  truncated: { episodes: boolean; workflows: boolean; callbackAttempts: boolean };
  temporalUiUrl: string;
}
