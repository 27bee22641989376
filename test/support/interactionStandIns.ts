// Stand-ins for the activities interaction workflows call, keeping what the real ones keep: the claims (a key held
// or delivered is refused to another holder), and the store's "answered" that a send re-reads before it goes (the
// answer is stored before its signal, as runs/answer.ts does). Several questions share one worker: each send is
// recorded on its own question, in order.
import type { Activities, FollowUpResult } from '../../contract/activities';
import type { InteractionRef } from '../../contract/workflows';
import type { EscalationRung } from '../../domain/interaction';

const DAY = 24 * 3600;

/** A ladder over the longest span allowed (7 days), every kind of rung. */
export const SEVEN_DAY_LADDER: EscalationRung[] = [
  { afterSeconds: 60, to: 'owner', via: 'push' },
  { afterSeconds: 3600, to: 'team', via: 'push' },
  { afterSeconds: DAY, to: ['carol'], via: 'push' },
  { afterSeconds: 3 * DAY, to: 'team', via: 'webhook' },
  { afterSeconds: 7 * DAY, to: 'team', via: 'push' },
];

export interface Question {
  askedAtMs: number;
  rungs: EscalationRung[];
  /** Every delivered send, in order, with the clock's time and its place among the sends and the answer. */
  sends: { what: string; atMs: number; seq: number }[];
  /** The place of the answer's storing among the sends, once stored. */
  answeredSeq?: number;
  closes: number;
  /** Stores the answer (sends from now on find it closed); the caller then signals it. */
  storeAnswer(): void;
}

export class InteractionStandIns {
  private readonly claims = new Map<string, { holder: string; delivered: boolean }>();
  private readonly questions = new Map<
    string,
    { question: Question; send(what: string): Promise<FollowUpResult> }
  >();

  /** `now`: the clock the sends are timed by (the time-skipping server's, or the wall's). */
  constructor(private readonly now: () => Promise<number>) {}

  ask(interactionId: string, askedAtMs: number, rungs: EscalationRung[]): Question {
    let seq = 0;
    const question: Question = {
      askedAtMs,
      rungs,
      sends: [],
      closes: 0,
      storeAnswer: () => void (question.answeredSeq ??= seq++),
    };
    const send = async (what: string): Promise<FollowUpResult> => {
      if (question.answeredSeq !== undefined) return { result: 'closed', delivered: 0 }; // the store's check
      const place = seq++;
      question.sends.push({ what, atMs: await this.now(), seq: place });
      return { result: 'delivered', delivered: 1 };
    };
    this.questions.set(interactionId, { question, send });
    return question;
  }

  private asked(ref: InteractionRef): { question: Question; send(what: string): Promise<FollowUpResult> } {
    const asked = this.questions.get(ref.interactionId);
    if (!asked) throw new Error(`no stand-in question ${ref.interactionId}`);
    return asked;
  }

  activities(): Partial<Activities> {
    return {
      tryMark: async (key, holder) => {
        const claim = this.claims.get(key);
        if (claim && (claim.delivered || claim.holder !== holder)) return false;
        this.claims.set(key, { holder, delivered: false });
        return true;
      },
      markDelivered: async (key, holder) => {
        this.claims.set(key, { holder, delivered: true });
        return true;
      },
      unmark: async (key) => void this.claims.delete(key),
      interactionPlan: async (ref) => {
        const { askedAtMs, rungs, answeredSeq } = this.asked(ref).question;
        return { open: answeredSeq === undefined, askedAtMs, rungs, webhookRetrySeconds: [5, 300] };
      },
      sendRung: (ref, index) => this.asked(ref).send(`rung ${index}`),
      sendSnoozed: (ref, snooze) => this.asked(ref).send(`snooze ${snooze.snoozeId}`),
      closeAnswered: async (ref) => {
        this.asked(ref).question.closes++;
        return { result: 'delivered', delivered: 2 };
      },
    };
  }
}
