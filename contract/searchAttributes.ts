// The search attributes every workflow of a run is started with: the names both the starters and the workflows
// (an operator alert started as a child) use, and the ones the namespace must have.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';

/**
 * FlowRunId and FlowTeamId on every workflow of a run (episodes, its health, its operator alerts), FlowOutcomeKind
 * on episodes. Registered by the embedded stack; API and worker refuse a namespace without them
 * (client/searchAttributeCheck.ts).
 */
export const searchAttributes = {
  runId: defineSearchAttributeKey('FlowRunId', SearchAttributeType.KEYWORD),
  teamId: defineSearchAttributeKey('FlowTeamId', SearchAttributeType.KEYWORD),
  outcomeKind: defineSearchAttributeKey('FlowOutcomeKind', SearchAttributeType.KEYWORD),
};

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
