// A `via: webhook` rung: one signed `interaction.escalated` event to the team policy's webhook URL, sent as a
// callback attempt is (guard, deadline, pacing per receiver origin, breaker, the answer's classification), with
// the rung's claim key as its webhook-id (the same on every attempt). The workflow tries a failed one again on
// the callbacks' schedule; an attempt the worker held back (the breaker open, no slot) does not spend it. A POST
// answered 2xx is noted (best effort), so a try after it (its announce to the team's endpoints failed) does not
// post again.
import type { FollowUpResult } from '../../contract/activities';
import { escalatedEvent, interactionClaimKeys, type EscalationRung } from '../../domain/interaction';
import { sendSigned, writtenInTime } from '../callback';
import type { InteractionActivityDeps } from './interactionActivityDeps';
import { openQuestion, type OpenQuestion } from './pushes';

export async function postEscalation(
  deps: InteractionActivityDeps,
  open: OpenQuestion,
  index: number,
  rung: EscalationRung,
  activityStarted: number,
): Promise<FollowUpResult> {
  const policy = await deps.escalationPolicies.get(open.run.teamId);
  if (!policy?.webhookUrl || !policy.webhookSecret) return { result: 'not_addressable', delivered: 0 };
  const id = interactionClaimKeys.rung(open.interaction._id, index);
  const posted = interactionClaimKeys.rungPosted(open.interaction._id, index);
  if (await deps.claims.wasDelivered(posted)) return { result: 'delivered', delivered: 1 };
  const ref = { runId: open.run._id, teamId: open.run.teamId, interactionId: open.interaction._id };
  const body = escalatedEvent({
    id,
    run: open.run,
    interaction: open.interaction,
    index,
    rung,
    at: deps.push.now(),
  });
  const attempt = await sendSigned(deps.webhook, {
    target: { url: policy.webhookUrl, secret: policy.webhookSecret, previousSecret: policy.previousSecret },
    webhookId: id,
    json: JSON.stringify(body),
    teamId: open.run.teamId,
    // A breaker of its own at the origin: the team's failing run callbacks there never hold its escalations.
    breakerKey: `escalation:${open.run.teamId}`,
    about: `run ${open.run._id} escalation ${id}`,
    place: undefined,
    activityStarted,
    // Answered while it waited for its origin's slot: a rung after the answer would page someone for nothing.
    notOwed: async () =>
      (await openQuestion(deps.push, ref))
        ? undefined
        : { result: 'stop', detail: 'the question was answered' },
  });
  // Not sent: only the question found closed after the wait stops a send before its request.
  if (!attempt.sent) return { result: 'closed', delivered: 0 };
  const { outcome } = attempt;
  if (outcome.result === 'delivered') {
    // Within a deadline or not at all: failing the activity here would have its retry POST the rung again.
    await writtenInTime(deps.claims.noteOnce(posted, 'rung', 'delivered'));
    return { result: 'delivered', delivered: 1 };
  }
  if (outcome.result === 'stop') return { result: 'failed', delivered: 0 };
  const afterSeconds = outcome.retryAfterSeconds;
  const held = outcome.result === 'retry' && outcome.held !== undefined;
  const retry = { ...(afterSeconds === undefined ? {} : { afterSeconds }), ...(held ? { held } : {}) };
  return { result: 'failed', delivered: 0, retry };
}
