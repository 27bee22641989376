// What happens around an open interaction besides its answer: the push that closes it on every device once it is
// answered, the escalation ladder while nobody answers, and the person's snoozes. Pure: the interaction workflow
// and the activities share these rules and keys.

/** A team's (or a run's) escalation: at most ESCALATION_MAX_RUNGS rungs within ESCALATION_MAX_SECONDS. */
export interface EscalationPolicy {
  rungs: EscalationRung[];
  /** Where `via: webhook` rungs post `interaction.escalated` (signed like callbacks). */
  webhookUrl?: string;
}

/** Who a rung reaches: the team's members with a device, the run's owner, or named users. */
export type EscalationTarget = 'team' | 'owner' | string[];

export interface EscalationRung {
  /** After the pause, in seconds. */
  afterSeconds: number;
  to: EscalationTarget;
  via: 'push' | 'webhook';
}

export const ESCALATION_MAX_RUNGS = 5;
export const ESCALATION_MAX_SECONDS = 7 * 24 * 3600;
/** Named users one rung may reach. */
export const ESCALATION_MAX_USERS = 50;

/** A snooze pushes the person again this much later, unless the interaction was answered. */
export const SNOOZE_SECONDS = 3600;
/** The notification action that snoozes (a choice id may not take it). */
export const SNOOZE_ACTION = 'snooze';
/**
 * Snoozes one execution of an interaction's workflow takes before it continues as new with what it still owes:
 * each re-push offers another snooze, so a person may keep snoozing for as long as the question stays open.
 */
export const SNOOZES_PER_EXECUTION = 24;

/**
 * Whether a question is still waiting for its answer: its run is paused on it and nobody answered. A question
 * marked abandoned counts too: its pause marks it so when the transition's write seemed to fail, and when that
 * write landed after all the run waits on it (the answer takes it, as recordAnswer does).
 */
export function questionOpen(run: PausableRun, interaction: { _id: string; status: string }): boolean {
  return interaction.status !== 'answered' && runWaitsOn(run, interaction._id);
}

type PausableRun = { status: string; pause?: { reason: string; interactionId?: string } };

/** Whether the run is paused on this question (answered or not: an answer stored resumes it only after). */
export function runWaitsOn(run: PausableRun | null | undefined, interactionId: string): boolean {
  return (
    run?.status === 'paused' &&
    run.pause?.reason === 'human_input' &&
    run.pause.interactionId === interactionId
  );
}

/**
 * The claims of an interaction's own sends, beside the episodes' (one collection, keys never collide): the
 * workflow opened (what the sweep checks), the answered close, each rung, each snooze's re-push.
 */
export const interactionClaimKeys = {
  opened: (interactionId: string) => `interaction|${interactionId}`,
  answered: (interactionId: string) => `answered|${interactionId}`,
  rung: (interactionId: string, index: number) => `rung|${interactionId}|${index}`,
  snooze: (interactionId: string, snoozeId: string) => `snooze|${interactionId}|${snoozeId}`,
  /** A webhook rung's POST was answered 2xx: a try after it (its announce failed) does not post it again. */
  rungPosted: (interactionId: string, index: number) => `posted|${interactionId}|${index}`,
};

/** The interaction whose answered close this key claims; undefined for any other key. */
export function closeOfClaimKey(key: string): string | undefined {
  const prefix = interactionClaimKeys.answered('');
  return key.startsWith(prefix) ? key.slice(prefix.length) : undefined;
}

/** The prefixes of interactionClaimKeys, for reading a key's family back. */
export const INTERACTION_CLAIM_PREFIXES = [
  'interaction|',
  'answered|',
  'rung|',
  'snooze|',
  'posted|',
] as const;

/**
 * The deliveries of a rung's or a snooze's push are recorded under the input request's episode id and a suffix, so
 * the close finds every device the question reached in one indexed range from that episode id.
 */
export const followUpDeliveryId = (episodeId: string, what: string): string => `${episodeId}|${what}`;

/** The episode a delivery id is of: the episode's own push, or a follow-up's (followUpDeliveryId read backwards). */
export const episodeOfDelivery = (deliveryId: string): string => deliveryId.split('|')[0];

/** The ids of an episode's follow-ups (followUpDeliveryId), as one range of an index on the episode id. */
export const followUpIdRange = (episodeId: string) => ({
  $gte: `${episodeId}|`,
  $lte: `${episodeId}|\uffff`,
});

/** The rungs in the order they fall due (a policy lists them in any order), each with its index in the policy. */
export function rungsInOrder(rungs: EscalationRung[]): { index: number; rung: EscalationRung }[] {
  return rungs
    .map((rung, index) => ({ index, rung }))
    .sort((a, b) => a.rung.afterSeconds - b.rung.afterSeconds || a.index - b.index);
}

/** The `interaction.escalated` event a webhook rung posts (a team endpoint event's shape). */
export function escalatedEvent(input: {
  id: string;
  run: { _id: string; teamId: string; status: string; title: string };
  interaction: { _id: string; prompt: string; createdAt: Date };
  index: number;
  rung: EscalationRung;
  at: Date;
}) {
  const { run, interaction, rung } = input;
  return {
    version: '1' as const,
    type: 'interaction.escalated' as const,
    id: input.id,
    teamId: run.teamId,
    run: { id: run._id, status: run.status, title: run.title },
    data: {
      interactionId: interaction._id,
      prompt: interaction.prompt,
      askedAt: interaction.createdAt.toISOString(),
      rung: input.index,
      afterSeconds: rung.afterSeconds,
      to: rung.to,
      at: input.at.toISOString(),
    },
  };
}
