// Names and options shared by workflows, the worker and every client that starts or queries them. Nothing here
// imports workflow code, so a client (the API process) loads no workflow module.
import { defineSearchAttributeKey, SearchAttributeType, type SignalDefinition } from '@temporalio/common';
import type { ObservedEvent } from '../domain/health';

/**
 * The workflow types the worker registers (the functions workflows/index.ts exports). A client names one here
 * and types the call with the function itself (`start<typeof episodeWorkflow>(workflowTypes.episode, …)`), so
 * its arguments are checked without loading workflow code; a unit test holds these names to the exports.
 */
export const workflowTypes = {
  episode: 'episodeWorkflow',
  health: 'runHealthWorkflow',
  operatorAlert: 'operatorAlertWorkflow',
  callbackRedeliver: 'callbackRedeliverWorkflow',
  sweep: 'sweepWorkflow',
} as const;

/**
 * What every process that sees a run's events sends its run-health workflow: the one definition, the object
 * `defineSignal` would build, written out so that clients need not load @temporalio/workflow.
 */
export const observeSignal = { type: 'signal', name: 'observe' } as SignalDefinition<
  [ObservedEvent],
  'observe'
>;

/**
 * Search attributes: FlowRunId and FlowTeamId on every workflow of a run (episodes, its health, its operator
 * alerts), FlowOutcomeKind on episodes. Registered by the embedded stack; API and worker refuse a namespace
 * without them (client/searchAttributes.ts).
 */
export const searchAttributes = {
  runId: defineSearchAttributeKey('FlowRunId', SearchAttributeType.KEYWORD),
  teamId: defineSearchAttributeKey('FlowTeamId', SearchAttributeType.KEYWORD),
  outcomeKind: defineSearchAttributeKey('FlowOutcomeKind', SearchAttributeType.KEYWORD),
};

/** The episode workflow's id is the episode id itself, so a second start of one episode is refused. */
export const episodeWorkflowId = (episodeId: string): string => episodeId;

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

/** FlowOutcomeKind: the outcome kind, with the pause told apart by its reason. */
export function outcomeKindAttribute(outcome: {
  kind: string;
  pause?: { reason: 'human_input' | 'usage_park' | 'operator' };
}): string {
  if (outcome.kind !== 'run_paused') return outcome.kind;
  switch (outcome.pause?.reason) {
    case 'human_input':
      return 'human_input_requested';
    case 'usage_park':
      return 'usage_parked';
    case 'operator':
      return 'soft_paused';
    default:
      return outcome.kind;
  }
}

/** The run and team attributes every workflow of a run carries. */
export const runAttributes = (runId: string, teamId: string) => [
  { key: searchAttributes.runId, value: runId },
  { key: searchAttributes.teamId, value: teamId },
];

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
}

/** What a callback attempt may take beyond the receiver's timeout (the run's read, the resolver, signing). */
export const CALLBACK_ATTEMPT_MARGIN_SECONDS = 20;

export const DEFAULT_EPISODE_OPTIONS: EpisodeOptions = {
  callbackRetrySeconds: [20, 60, 180, 540],
  releasedRetrySeconds: 120,
  callbackAttemptSeconds: 10 + CALLBACK_ATTEMPT_MARGIN_SECONDS,
};
