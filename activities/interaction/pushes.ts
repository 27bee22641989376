// An interaction's pushes besides the question itself and its close (push/closeAnswered.ts): the question again to
// a rung's people or to a person who snoozed it (held for a digest where their quiet hours say so, unless the kind
// breaks through).
import type { FollowUpResult } from '../../contract/activities';
import type { InteractionRef } from '../../contract/workflows';
import { followUpDeliveryId, questionOpen, type EscalationRung } from '../../domain/interaction';
import { buildRunOutcome, type RunOutcome } from '../../domain/outcome';
import type { Run } from '../../domain/run';
import type { Interaction } from '../../store/interactions';
import { payloadsWithActions } from '../push/actionTokens';
import { followUpResult } from '../push/closeAnswered';
import { devicesToPush, render } from '../push/deliverOutcome';
import type { PushActivityDeps } from '../push/pushActivityDeps';
import { configFaultReporter, sendRecorded } from '../push/recordedSends';
import { attemptStartedAt } from '../activityContext';

/** People a `to: team` rung reaches at most. */
export const TEAM_RUNG_MAX_PEOPLE = 1000;

/** The question as it stands while still open: its run paused on it and nobody's answer taken. */
export interface OpenQuestion {
  run: Run;
  interaction: Interaction;
  outcome: RunOutcome;
}

export async function openQuestion(
  deps: Pick<PushActivityDeps, 'runs' | 'interactions'>,
  ref: InteractionRef,
): Promise<OpenQuestion | undefined> {
  const [run, interaction] = await Promise.all([
    deps.runs.getForTeam(ref.teamId, ref.runId),
    deps.interactions.get(ref.runId, ref.interactionId),
  ]);
  if (!run || !interaction || !questionOpen(run, interaction)) return undefined;
  const outcome = buildRunOutcome(run);
  return outcome ? { run, interaction, outcome } : undefined;
}

/**
 * Who a push rung reaches: the run's owner, the team's members with a device, or those of the named people who
 * have a device in the run's team (a name is any id a launcher wrote: the question and its actions are the
 * team's, never pushed to a device registered elsewhere only).
 */
export async function rungRecipients(
  deps: PushActivityDeps,
  open: OpenQuestion,
  rung: EscalationRung,
): Promise<string[]> {
  if (rung.to === 'owner') return [open.run.ownerId];
  if (rung.to === 'team') return deps.pushSubscriptions.usersOfTeam(open.run.teamId, TEAM_RUNG_MAX_PEOPLE);
  const members = await deps.pushSubscriptions.membersAmong(open.run.teamId, rung.to);
  return rung.to.filter((userId) => members.has(userId));
}

/**
 * The open question pushed again to these people (a rung, a snooze), with their own action tokens, recorded under
 * `<episodeId>|<what>` so a retry skips the devices reached and the close finds them. Someone in quiet hours or
 * do-not-disturb is held for their digest unless the kind breaks through for them (it does by default).
 */
export async function pushFollowUp(
  deps: PushActivityDeps,
  open: OpenQuestion,
  userIds: string[],
  what: string,
): Promise<FollowUpResult> {
  attemptStartedAt(); // its fan-out's time is counted from here
  if (!deps.sender) return { result: 'not_addressable', delivered: 0 };
  const kind = 'human_input_requested';
  const { outcome } = open;
  const deliveryId = followUpDeliveryId(outcome.episodeId, what);
  const [recipients, rendered] = await Promise.all([
    deps.notificationPrefs.recipientsAmong(outcome.teamId, [...new Set(userIds)], kind),
    render(deps, outcome, kind, open.interaction),
  ]);
  // The question again, on screen already where it was shown: it must alert again, not replace it silently.
  const payload = { ...rendered.payload, renotify: true as const };
  const { choices } = rendered;
  const devices = await devicesToPush(deps, { ...outcome, episodeId: deliveryId }, kind, recipients);
  if (!devices) return { result: 'not_addressable', delivered: 0 };
  const { pending, reached } = devices;
  if (!pending.length) return { result: 'held', delivered: 0 };
  const sent = await sendRecorded(deps, deliveryId, pending, payload, {
    reached,
    onConfigFault: configFaultReporter(deps, outcome),
    // No pausedAt: pause → first shown is the question's first push, not a rung's or a snooze's.
    receipts: { teamId: outcome.teamId, runId: outcome.runId, kind },
    payloadsFor: (reach) => payloadsWithActions(deps, outcome, choices, payload, reach),
  });
  // Failed while a device is still owed it: the workflow tries the rung or snooze again on its schedule.
  return followUpResult(sent);
}
