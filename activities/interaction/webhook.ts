// A `via: webhook` rung: one signed `interaction.escalated` event to the team policy's webhook URL, through the
// callbacks' outbound guard and deadline, with the rung's claim key as its webhook-id (the same on every attempt).
// The workflow tries a failed one again on the callbacks' schedule.
import type { FollowUpResult } from '../../contract/activities';
import { postSignedCallback, classifyCallbackStatus } from '../../delivery/callback/send';
import { TargetRefusedError } from '../../delivery/ssrfGuard';
import { escalatedEvent, interactionClaimKeys, type EscalationRung } from '../../domain/interaction';
import { retryAfterMs } from '../../platform/retryAfter';
import type { InteractionActivityDeps } from './interactionActivityDeps';
import type { OpenQuestion } from './pushes';

export async function postEscalation(
  deps: InteractionActivityDeps,
  open: OpenQuestion,
  index: number,
  rung: EscalationRung,
): Promise<FollowUpResult> {
  const policy = await deps.escalationPolicies.get(open.run.teamId);
  if (!policy?.webhookUrl || !policy.webhookSecret) return { result: 'not_addressable', delivered: 0 };
  const id = interactionClaimKeys.rung(open.interaction._id, index);
  const body = escalatedEvent({
    id,
    run: open.run,
    interaction: open.interaction,
    index,
    rung,
    at: deps.push.now(),
  });
  try {
    const res = await postSignedCallback(
      deps.webhook,
      { url: policy.webhookUrl, secret: policy.webhookSecret },
      id,
      JSON.stringify(body),
    );
    const result = classifyCallbackStatus(res.status);
    if (result === 'delivered') return { result: 'delivered', delivered: 1 };
    if (result === 'stop') return { result: 'failed', delivered: 0 };
    const afterMs = retryAfterMs(res.headers['retry-after'], deps.push.now().getTime());
    return {
      result: 'failed',
      delivered: 0,
      retry: afterMs === undefined ? {} : { afterSeconds: Math.ceil(afterMs / 1000) },
    };
  } catch (err) {
    // A refused target stays refused (a name that does not resolve now may later); anything else is worth a retry.
    if (err instanceof TargetRefusedError && err.category !== 'refused: dns')
      return { result: 'failed', delivered: 0 };
    deps.push.log(`interaction: the escalation webhook failed: ${String(err)}`);
    return { result: 'failed', delivered: 0, retry: {} };
  }
}
