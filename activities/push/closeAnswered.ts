// The close of an answered question: one `answered` push, with the question's tag and Topic, to every device the
// question, its rungs and its snoozes reached. Safe to run again and again: recorded under the close's own id, so
// a device already closed is skipped and only one reached since is sent it.
import type { FollowUpResult } from '../../contract/activities';
import type { InteractionAnswer, InteractionRef } from '../../contract/workflows';
import { interactionClaimKeys } from '../../domain/interaction';
import { inputEpisodeId } from '../../domain/outcome';
import { renderAnswered } from '../../domain/push';
import type { PushActivityDeps } from './pushActivityDeps';
import { configFaultReporter, sendRecorded } from './recordedSends';
import { attemptStartedAt } from '../activityContext';

/** Devices a close reaches at most: a question is pushed to a team's devices, and each is closed. */
const CLOSE_MAX_DEVICES = 10_000;

/**
 * How a send to devices went, in the follow-up's terms. A device whose push service failed transiently is still
 * owed it, however many others took it: failed, worth another try (the devices reached are skipped then).
 */
export function followUpResult(sent: {
  delivered: number;
  alreadyDelivered: number;
  failed: number;
  retryable: number;
}): FollowUpResult {
  const delivered = sent.delivered + sent.alreadyDelivered;
  if (sent.retryable > 0) return { result: 'failed', delivered, retry: {} };
  if (delivered > 0) return { result: 'delivered', delivered };
  if (sent.failed === 0) return { result: 'not_addressable', delivered: 0 };
  return { result: 'failed', delivered: 0 };
}

/** The `answered` push to every device the question, its rungs and its snoozes reached. */
export async function closeAnswered(
  deps: PushActivityDeps,
  ref: InteractionRef,
  answer: InteractionAnswer,
): Promise<FollowUpResult> {
  attemptStartedAt(); // its fan-out's time is counted from here
  if (!deps.sender) return { result: 'not_addressable', delivered: 0 };
  const episodeId = inputEpisodeId(ref.runId, ref.interactionId);
  const [run, interaction, reached] = await Promise.all([
    deps.runs.getForTeam(ref.teamId, ref.runId),
    deps.interactions.get(ref.runId, ref.interactionId),
    deps.pushDeliveries.reachedWithFollowUps(episodeId),
  ]);
  if (!run || !reached.length) return { result: 'not_addressable', delivered: 0 };
  const wanted = new Set(reached.slice(0, CLOSE_MAX_DEVICES).map((d) => d.subscriptionId));
  const users = [...new Set(reached.map((d) => d.userId))];
  // Devices pruned since are gone; a device that moved to another person is no longer theirs to close.
  const subs = (await deps.pushSubscriptions.listForUsers(users)).filter((sub) => wanted.has(sub._id));
  if (!subs.length) return { result: 'not_addressable', delivered: 0 };
  const payload = renderAnswered({
    runId: run._id,
    runTitle: run.title,
    episodeId,
    answeredBy: answer.answeredBy,
    choiceLabel: interaction?.choices?.find((choice) => choice.id === interaction.answer)?.label,
    studioUrl: deps.studioUrl,
  });
  const sent = await sendRecorded(deps, interactionClaimKeys.answered(ref.interactionId), subs, payload, {
    onConfigFault: configFaultReporter(deps, { ...ref, episodeId }),
    receipts: { teamId: run.teamId, runId: run._id, kind: 'answered' },
  });
  // A device whose push service is down is still owed its close: failed, the claim is released, and the sweep
  // replays the close (the devices closed already are skipped) until it reaches that one too. The message refused
  // as such by every device's push service (400, 413: never taken however often sent), nothing is left to close: a
  // claim released would have every sweep pass of its window replay it. Any other failure (our key refused, a
  // store write lost) may pass later, and is replayed.
  const result = followUpResult(sent);
  const refusedForGood = result.result === 'failed' && sent.failed > 0 && sent.rejected === sent.failed;
  return refusedForGood ? { result: 'not_addressable', delivered: 0 } : result;
}
