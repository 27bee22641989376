// Stand-ins for the activities interaction workflows call, keeping what the real ones keep: the claims (a key held
// or delivered is refused to another holder), and the store's "answered" that a send re-reads before it goes (the
// answer is stored before its signal, as runs/answer.ts does). Several questions share one worker: each send is
// recorded on its own question, in order. A question may be given faults: its next sends fail the way a push
// service or a receiver does (or throw, as a send does past its own retries while the store is away).
import { ApplicationFailure } from '@temporalio/common';
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

/**
 * How a send goes wrong: throws (before sending, or after: its push went, then its announce failed), fails
 * transiently, is held by the receiver's breaker, or is refused for good.
 */
export type SendFault = 'throw' | 'throw-after-send' | 'failed' | 'held' | 'refused';

export interface QuestionOptions {
  /** The faults the next sends meet, in order; the sends after them go. */
  faults?: SendFault[];
  /** The schedule a failed send is tried again on (the plan's webhookRetrySeconds). */
  retrySeconds?: number[];
}

export interface Question {
  askedAtMs: number;
  rungs: EscalationRung[];
  /** Every delivered send, in order, with the clock's time and its place among the sends and the answer. */
  sends: { what: string; atMs: number; seq: number }[];
  /** The place of the answer's storing among the sends, once stored. */
  answeredSeq?: number;
  closes: number;
  /** Every send tried, the failed ones too. */
  attempts: number;
  /** Stores the answer (sends from now on find it closed); the caller then signals it. */
  storeAnswer(): void;
}

export class InteractionStandIns {
  private readonly claims = new Map<string, { holder: string; delivered: boolean; result?: string }>();
  /** Every claim let go (unmark), in order. */
  readonly released: string[] = [];
  private readonly retrySeconds = new Map<string, number[]>();
  private readonly questions = new Map<
    string,
    { question: Question; send(what: string): Promise<FollowUpResult> }
  >();

  /** Claims taken (tryMark) that fail first, as a store that is away does; each failure retried at once. */
  private claimsFailing = 0;

  /** `now`: the clock the sends are timed by (the time-skipping server's, or the wall's). */
  constructor(private readonly now: () => Promise<number>) {}

  /** The next `count` claims taken fail (a store outage longer than the workflow's quick retries). */
  failClaims(count: number): void {
    this.claimsFailing = count;
  }

  ask(
    interactionId: string,
    askedAtMs: number,
    rungs: EscalationRung[],
    options: QuestionOptions = {},
  ): Question {
    let seq = 0;
    const faults = [...(options.faults ?? [])];
    this.retrySeconds.set(interactionId, options.retrySeconds ?? [5, 300]);
    const question: Question = {
      askedAtMs,
      rungs,
      sends: [],
      closes: 0,
      attempts: 0,
      storeAnswer: () => void (question.answeredSeq ??= seq++),
    };
    const send = async (what: string): Promise<FollowUpResult> => {
      if (question.answeredSeq !== undefined) return { result: 'closed', delivered: 0 }; // the store's check
      question.attempts++;
      const fault = faults.shift();
      if (fault === 'throw') throw ApplicationFailure.nonRetryable(`${what}: the store is away`);
      if (fault === 'failed') return { result: 'failed', delivered: 0, retry: {} };
      if (fault === 'held') return { result: 'failed', delivered: 0, retry: { held: true } };
      if (fault === 'refused') return { result: 'failed', delivered: 0 };
      const place = seq++;
      question.sends.push({ what, atMs: await this.now(), seq: place });
      if (fault === 'throw-after-send') throw ApplicationFailure.nonRetryable(`${what}: its announce failed`);
      return { result: 'delivered', delivered: 1 };
    };
    this.questions.set(interactionId, { question, send });
    return question;
  }

  /** A claim as the stand-in store holds it. */
  claim(key: string): { holder: string; delivered: boolean; result?: string } | undefined {
    return this.claims.get(key);
  }

  private asked(ref: InteractionRef): { question: Question; send(what: string): Promise<FollowUpResult> } {
    const asked = this.questions.get(ref.interactionId);
    if (!asked) throw new Error(`no stand-in question ${ref.interactionId}`);
    return asked;
  }

  activities(): Partial<Activities> {
    return {
      tryMark: async (key, holder) => {
        if (this.claimsFailing > 0) {
          this.claimsFailing--;
          throw ApplicationFailure.create({ message: 'the store is away', nextRetryDelay: 1 });
        }
        const claim = this.claims.get(key);
        if (claim && (claim.delivered || claim.holder !== holder)) return false;
        this.claims.set(key, { holder, delivered: false });
        return true;
      },
      markDelivered: async (key, holder, result) => {
        if (this.claims.get(key)?.holder !== holder) return false; // as the store's update, filtered on holder
        this.claims.set(key, { holder, delivered: true, result });
        return true;
      },
      unmark: async (key) => {
        this.released.push(key);
        this.claims.delete(key);
      },
      interactionPlan: async (ref) => {
        const { askedAtMs, rungs, answeredSeq } = this.asked(ref).question;
        const webhookRetrySeconds = this.retrySeconds.get(ref.interactionId)!;
        return { open: answeredSeq === undefined, askedAtMs, rungs, webhookRetrySeconds };
      },
      sendRung: (ref, index) => this.asked(ref).send(`rung ${index}`),
      sendSnoozed: (ref, snooze) => this.asked(ref).send(`snooze ${snooze.snoozeId}`),
      // As the store reads it: what earlier tries of the send reached (its deliveries).
      followUpSentBefore: async (ref, due) => {
        const what = due.what === 'rung' ? `rung ${due.index}` : `snooze ${due.snooze.snoozeId}`;
        const delivered = this.asked(ref).question.sends.filter((s) => s.what === what).length;
        return delivered ? { result: 'delivered', delivered } : { result: 'closed', delivered: 0 };
      },
      closeAnswered: async (ref) => {
        this.asked(ref).question.closes++;
        return { result: 'delivered', delivered: 2 };
      },
    };
  }
}
