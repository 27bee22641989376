// The interaction workflow's activities: its plan (when the question was asked, its ladder), the close once
// answered, each rung, each snooze's re-push. Every send re-reads whether the interaction is still open first:
// the workflow's own check covers the signal, this one an answer whose signal has not arrived yet.
import type { FollowUpResult } from '../../contract/activities';
import type {
  FollowUpSend,
  InteractionAnswer,
  InteractionPlan,
  InteractionRef,
  InteractionSnooze,
} from '../../contract/workflows';
import { followUpDeliveryId, interactionClaimKeys, type EscalationRung } from '../../domain/interaction';
import { inputEpisodeId, lapsedRungs } from '../../domain/outcome';
import { keptAlive } from '../activityContext';
import type { InteractionActivityDeps } from './interactionActivityDeps';
import { closeAnswered } from '../push/closeAnswered';
import { standbyVetoes } from '../push';
import { openQuestion, pushFollowUp, rungRecipients, type OpenQuestion } from './pushes';
import { postEscalation } from './webhook';

export type { InteractionActivityDeps, InteractionEvent } from './interactionActivityDeps';

export function createInteractionActivities(deps: InteractionActivityDeps) {
  /**
   * A send that finds the question closed: closed, unless an earlier try of it reached someone (its announce
   * failed after, or its worker was lost before its answer reached Temporal): then it was sent, and a rung's
   * escalation is announced as it would have been. Read only when the question is closed.
   */
  async function sentBefore(
    ref: InteractionRef,
    earlier: { what: string } | { posted: string },
  ): Promise<FollowUpResult> {
    const delivered =
      'posted' in earlier
        ? Number(await deps.claims.wasDelivered(earlier.posted))
        : await deps.push.pushDeliveries.countForEpisode(
            followUpDeliveryId(inputEpisodeId(ref.runId, ref.interactionId), earlier.what),
          );
    return delivered ? { result: 'delivered', delivered } : { result: 'closed', delivered: 0 };
  }

  const rungSentBefore = (
    ref: InteractionRef,
    index: number,
    rung: EscalationRung,
  ): Promise<FollowUpResult> =>
    sentBefore(
      ref,
      rung.via === 'webhook'
        ? { posted: interactionClaimKeys.rungPosted(ref.interactionId, index) }
        : { what: `rung:${index}` },
    );

  /**
   * A rung that reached anyone escalated the question, even while another device is owed it (the event's id is the
   * rung's: the announce of a later try is the same event).
   */
  async function announced(
    ref: InteractionRef,
    index: number,
    rung: EscalationRung,
    sent: FollowUpResult,
  ): Promise<FollowUpResult> {
    if (sent.delivered > 0)
      await deps.announce({
        type: 'interaction.escalated',
        ...ref,
        rung: index,
        to: rung.to,
        via: rung.via,
        reached: sent.delivered,
        at: deps.push.now(),
      });
    return sent;
  }

  /** A rung of a question still open, unless an assistant stands by on its run (its question's push is vetoed). */
  async function sendOpenRung(
    open: OpenQuestion,
    index: number,
    rung: EscalationRung,
    activityStarted: number,
  ): Promise<FollowUpResult> {
    if (await standbyVetoes(deps.push, open.run)) return { result: 'vetoed', delivered: 0 };
    if (rung.via === 'webhook') return postEscalation(deps, open, index, rung, activityStarted);
    return pushFollowUp(deps.push, open, await rungRecipients(deps.push, open, rung), `rung:${index}`);
  }

  return {
    async interactionPlan(ref: InteractionRef, holder: string): Promise<InteractionPlan> {
      const [open] = await Promise.all([
        openQuestion(deps.push, ref),
        deps.claims.noteOnce(interactionClaimKeys.opened(ref.interactionId), holder, 'opened'),
      ]);
      const none = { open: false, askedAtMs: 0, rungs: [], webhookRetrySeconds: deps.webhookRetrySeconds };
      if (!open) return none;
      const rungs =
        open.interaction.ladder ??
        (await deps.push.interactions.keepLadder(
          ref.interactionId,
          await deps.escalationPolicies.ladderFor(open.run),
        ));
      const askedAtMs = open.interaction.createdAt.getTime();
      const lapsed = lapsedRungs(rungs, askedAtMs, deps.push.now().getTime());
      return { ...none, open: true, askedAtMs, rungs, ...(lapsed.length ? { lapsedRungs: lapsed } : {}) };
    },

    closeAnswered: (ref: InteractionRef, answer: InteractionAnswer): Promise<FollowUpResult> =>
      keptAlive(async () => {
        const closed = await closeAnswered(deps.push, ref, answer);
        if (closed.result !== 'closed')
          await deps.announce({
            type: 'interaction.answered',
            ...ref,
            answeredBy: answer.answeredBy,
            at: new Date(answer.at),
          });
        return closed;
      }),

    sendRung: (ref: InteractionRef, index: number, rung: EscalationRung): Promise<FollowUpResult> =>
      keptAlive(async () => {
        const activityStarted = Date.now();
        const open = await openQuestion(deps.push, ref);
        return announced(
          ref,
          index,
          rung,
          open
            ? await sendOpenRung(open, index, rung, activityStarted)
            : await rungSentBefore(ref, index, rung),
        );
      }),

    sendSnoozed: (ref: InteractionRef, snooze: InteractionSnooze): Promise<FollowUpResult> =>
      keptAlive(async () => {
        const what = `snooze:${snooze.snoozeId}`;
        const open = await openQuestion(deps.push, ref);
        if (!open) return sentBefore(ref, { what });
        return pushFollowUp(deps.push, open, [snooze.userId], what);
      }),

    followUpSentBefore: (ref: InteractionRef, due: FollowUpSend): Promise<FollowUpResult> =>
      keptAlive(async () => {
        if (due.what === 'snooze') return sentBefore(ref, { what: `snooze:${due.snooze.snoozeId}` });
        const sent = await rungSentBefore(ref, due.index, due.rung);
        // The announce is what failed the try: still failing, the rung is still sent (its count and its claim).
        return announced(ref, due.index, due.rung, sent).catch((err: unknown) => {
          deps.push.log(
            `interaction ${ref.interactionId}: rung ${due.index}'s escalation not announced: ${String(err)}`,
          );
          return sent;
        });
      }),
  };
}
