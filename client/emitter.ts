// The outcome emitter: reads the persisted run (or takes the one a transition's write returned), builds its
// outcome, and starts the episode workflow.
// Used by the API process and by the runner CLI; the workflow id is the episode id, so however many
// emitters fire for one episode, Temporal runs it once.
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import { interactionClaimKeys } from '../domain/interaction';
import { buildRunOutcome, lapsedRungs, type RunOutcome } from '../domain/outcome';
import type { Run, RunError } from '../domain/run';
import type { ClaimStore } from '../store/claims';
import type { EscalationPolicyStore } from '../store/escalationPolicies';
import type { InteractionStore } from '../store/interactions';
import type { RunStore } from '../store/runs';
import type { Config } from '../config';
import { outcomeKindAttribute, runAttributes, searchAttributes } from '../contract/searchAttributes';
import {
  CALLBACK_ATTEMPT_MARGIN_SECONDS,
  CALLBACK_RETRY_JITTER,
  episodeWorkflowId,
  workflowTypes,
  type EpisodeOptions,
  type InteractionRef,
} from '../contract/workflows';
import type { Emitter, Metrics } from '../platform/metrics';
import { interactionOf, startInteraction } from './interaction';
import { episodePriority } from './priority';
import { startUnlessRunning } from './startUnlessRunning';

export interface EmitResult {
  episodeId: string;
  kind: RunOutcome['kind'];
  /** When it happened, as the run's write says (ISO): the pause's or the end's. */
  occurredAt: string;
  /** False when the episode workflow already existed: this emit was a no-op. */
  started: boolean;
}

/**
 * Starts the episode workflow for an outcome. Emitters refuse a duplicate even of a closed workflow
 * (REJECT_DUPLICATE); the sweep passes ALLOW_DUPLICATE to replay an episode whose claims were released.
 */
export async function startEpisode(
  client: Client,
  taskQueue: string,
  outcome: RunOutcome,
  options: EpisodeOptions,
  reuse: 'REJECT_DUPLICATE' | 'ALLOW_DUPLICATE' = 'REJECT_DUPLICATE',
): Promise<boolean> {
  return startUnlessRunning(
    client,
    workflowTypes.episode,
    {
      workflowId: episodeWorkflowId(outcome.episodeId),
      taskQueue,
      args: [outcome, options],
      priority: episodePriority(outcome),
      typedSearchAttributes: new TypedSearchAttributes([
        ...runAttributes(outcome.runId, outcome.teamId),
        { key: searchAttributes.outcomeKind, value: outcomeKindAttribute(outcome) },
      ]),
    },
    reuse,
  );
}

export type OutcomeEmitter = ReturnType<typeof createOutcomeEmitter>;

/** The episode options a config asks for; every emitter and the sweep pass the same. */
export function episodeOptions(
  config: Pick<Config, 'callbackRetrySeconds' | 'sweepIntervalSeconds' | 'callbackTimeoutSeconds'>,
): EpisodeOptions {
  return {
    callbackRetrySeconds: config.callbackRetrySeconds,
    releasedRetrySeconds: config.sweepIntervalSeconds,
    callbackAttemptSeconds: config.callbackTimeoutSeconds + CALLBACK_ATTEMPT_MARGIN_SECONDS,
    callbackRetryJitter: CALLBACK_RETRY_JITTER,
  };
}

export function createOutcomeEmitter(deps: {
  client: Client;
  taskQueue: string;
  runs: RunStore;
  /** The worker's own (episodeOptions(config)): its callback schedule and timeouts. */
  options: EpisodeOptions;
  metrics?: Metrics;
  /** Who emits, for the episodes-started counter. */
  emitter?: Emitter;
  /**
   * Given, a question's workflow starts with its plan (the ladder read here, beside the episode's start), and the
   * question is noted opened once it started; without, the workflow's first task reads the plan and notes it.
   */
  questions?: {
    claims: Pick<ClaimStore, 'noteOnce'>;
    escalationPolicies: Pick<EscalationPolicyStore, 'ladderFor'>;
    interactions: Pick<InteractionStore, 'keepLadder'>;
  };
}) {
  const { options } = deps;

  /** A question's own workflow (its escalation ladder). */
  async function startQuestion(run: Run, interaction: InteractionRef): Promise<void> {
    const questions = deps.questions;
    if (!questions || !run.pause) {
      await startInteraction(deps.client, deps.taskQueue, interaction);
      return;
    }
    // Kept with the question before any execution climbs it: one emitted again (a watch ended) after the policy
    // changed climbs the ladder it was asked with, or it would skip one rung and send another twice.
    const rungs = await questions.interactions.keepLadder(
      interaction.interactionId,
      await questions.escalationPolicies.ladderFor(run),
    );
    const askedAtMs = run.pause.at.getTime();
    // Emitted again long after (a watch's end): what fell due long ago is not climbed again.
    const lapsed = lapsedRungs(rungs, askedAtMs, Date.now());
    const plan = {
      open: true,
      askedAtMs,
      rungs,
      webhookRetrySeconds: options.callbackRetrySeconds,
      ...(lapsed.length ? { lapsedRungs: lapsed } : {}),
    };
    await startInteraction(deps.client, deps.taskQueue, interaction, plan);
    // After the start: a question noted opened whose workflow never started would never climb its ladder.
    const opened = interactionClaimKeys.opened(interaction.interactionId);
    await questions.claims.noteOnce(opened, `emitter:${deps.emitter ?? 'api'}`, 'opened');
  }

  return {
    /**
     * Emits the run's current outcome, if it owes one (a running run owes none). Given an id, the run is read:
     * with teamId under that tenant's identity (a runner acting for a queue message), otherwise as the system;
     * given the run as a transition's write returned it, it is not read again. ALLOW_DUPLICATE replays an episode
     * whose workflow already closed (a pause whose standby veto ended).
     */
    async emitRunOutcome(
      runOrId: string | Run,
      bodyError?: RunError,
      teamId?: string,
      reuse: 'REJECT_DUPLICATE' | 'ALLOW_DUPLICATE' = 'REJECT_DUPLICATE',
    ): Promise<EmitResult | undefined> {
      const run =
        typeof runOrId !== 'string'
          ? runOrId
          : teamId === undefined
            ? await deps.runs.getById(runOrId)
            : await deps.runs.getForTeam(teamId, runOrId);
      if (!run) return undefined;
      const outcome = buildRunOutcome(run, bodyError);
      if (!outcome) return undefined;
      // A question's own workflow (its escalation ladder) starts beside its episode.
      const interaction = interactionOf(outcome);
      const [started] = await Promise.all([
        startEpisode(deps.client, deps.taskQueue, outcome, options, reuse),
        interaction && startQuestion(run, interaction),
      ]);
      if (started) deps.metrics?.episodeStarted(deps.emitter ?? 'api', outcome.kind);
      return { episodeId: outcome.episodeId, kind: outcome.kind, occurredAt: outcome.occurredAt, started };
    },
  };
}
