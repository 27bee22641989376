// Where a workflow's tasks stand in the shared task queue. Temporal dispatches the lowest priority key first and,
// within one level, shares dispatch round-robin between fairness keys: one per team, so one team's burst of runs
// does not queue every other team's deliveries behind it. Activities and child workflows inherit their
// workflow's priority, so it is set once, where a workflow is started.
import { createHash } from 'node:crypto';
import type { Priority } from '@temporalio/common';
import type { RunOutcome } from '../domain/outcome';

/** Temporal's levels run from 1 (first) to 5; 3 is what a task without one gets. */
export const PRIORITY_KEYS = {
  /** A person is waiting for the question: it goes ahead of everything that only reports. */
  humanInput: 1,
  standard: 3,
} as const;

/** Temporal refuses a longer fairness key; team ids may be up to 256 characters. */
const MAX_FAIRNESS_KEY_BYTES = 64;

/** The team's fairness key: its id, or a digest of an id too long to be one (50 bytes, distinct per team). */
export function teamFairnessKey(teamId: string): string {
  if (Buffer.byteLength(teamId) <= MAX_FAIRNESS_KEY_BYTES) return teamId;
  return `sha256:${createHash('sha256').update(teamId).digest('base64url')}`;
}

/** The priority of a workflow started for a team. */
export function teamPriority(teamId: string, priorityKey: number = PRIORITY_KEYS.standard): Priority {
  return { priorityKey, fairnessKey: teamFairnessKey(teamId) };
}

/** An episode's: its team's share, first when it asks a person for input. */
export function episodePriority(outcome: Pick<RunOutcome, 'teamId' | 'pause'>): Priority {
  const asksAPerson = outcome.pause?.reason === 'human_input';
  return teamPriority(outcome.teamId, asksAPerson ? PRIORITY_KEYS.humanInput : PRIORITY_KEYS.standard);
}
