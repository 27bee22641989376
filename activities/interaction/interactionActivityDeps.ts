// What an interaction's activities are given: the stores, the push family's sending, the webhook's signed POST,
// and the place where an answer's close and a rung are told to whoever listens.
import type { EscalationRung } from '../../domain/interaction';
import type { ClaimStore } from '../../store/claims';
import type { EscalationPolicyStore } from '../../store/escalationPolicies';
import type { SignedSendDeps } from '../callback';
import type { PushActivityDeps } from '../push';

/** What the interaction workflow learned, for whoever emits team events (interaction.answered / .escalated). */
export type InteractionEvent =
  | {
      type: 'interaction.answered';
      runId: string;
      teamId: string;
      interactionId: string;
      answeredBy: string;
      at: Date;
    }
  | {
      type: 'interaction.escalated';
      runId: string;
      teamId: string;
      interactionId: string;
      rung: number;
      to: EscalationRung['to'];
      via: EscalationRung['via'];
      /** Who the push reached (via push) or the webhook's host (via webhook). */
      reached: number;
      at: Date;
    };

export interface InteractionActivityDeps {
  push: PushActivityDeps;
  claims: ClaimStore;
  escalationPolicies: EscalationPolicyStore;
  /** The signed send of `via: webhook` rungs: the callbacks' guard, deadline, pacing per origin and breaker. */
  webhook: SignedSendDeps;
  /** CALLBACK_RETRY_SECONDS: a failed webhook rung is tried again on the callbacks' schedule. */
  webhookRetrySeconds: number[];
  /**
   * Told once an answer's close or a rung went out (after its claim was won, so once per claim): the team's
   * endpoints hear it (teamAnnounce.ts). Its failure fails the activity's attempt: Temporal tries it again, the
   * sends skipping the devices already reached, and the event's id makes a second raise the same event.
   */
  announce: (event: InteractionEvent) => Promise<void>;
}
