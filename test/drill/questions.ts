// The drill's questions beyond the answer route: some carry choices and are answered from the notification (the
// action token in the decrypted push), some are snoozed from it (then answered within the hour), and the runs of
// every other index climb their team's escalation ladder before anyone answers. Counted: each rung owed delivered
// once or visibly given up, none after the answer, each close on every device the question or a rung reached, and
// each snooze taken once and never sent (the drill's clock is the wall's: it cannot skip the hour, so a snooze
// answered within it must never come back; that it would is the interaction workflow's own test).
import { interactionSnoozedSignal } from '../../contract/workflows';
import { interactionClaimKeys } from '../../domain/interaction';
import type { PushPayload } from '../../domain/push';
import { adminOf } from '../support/admin';
import type { ApiClient } from '../support/harness';
import { waitUntil } from '../support/waitUntil';
import { claimsOf } from './counts';
import type { Drill, EpisodePlan, RunPlan } from './scenario';

export type AnswerWay = 'choice' | 'snooze' | 'api';

/** The choices a question answered from its notification offers; the drill takes the first. */
export const DRILL_CHOICES = [
  { id: 'approve', label: 'Approve' },
  { id: 'reject', label: 'Reject' },
];

/**
 * The team's ladder: a rung a second after the question and one after two, each to a person of its own (so its
 * push is told apart from the question's), and a third an hour on that an answer always beats.
 */
export const RUNG_SECONDS = [1, 2, 3600];
export const rungUsersOf = (t: number) => RUNG_SECONDS.map((_, n) => `t${t}-rung${n}`);

/** How the question at this input step is answered: the index decides, so a seed of the plan replays it. */
export function answerWay(run: RunPlan, step: number): AnswerWay {
  return (['choice', 'snooze', 'api'] as const)[(run.index + step / 2) % 3];
}

/** Every other run climbs the team's ladder; the rest opt out at launch (a run may override its team's policy). */
export const escalates = (run: RunPlan): boolean => run.index % 2 === 0;

/** Each team's escalation policy, set by a team admin. */
export async function setEscalationPolicies(drill: Drill): Promise<void> {
  for (const team of drill.teams) {
    const admin = adminOf(drill.anonymous, `${team.id}-admin`, team.id);
    const rungs = RUNG_SECONDS.map((afterSeconds, n) => ({
      afterSeconds,
      to: [team.rungUsers[n]],
      via: 'push',
    }));
    const res = await admin.put('/api/v1/teams/current/escalation', { rungs });
    if (res.status !== 200) throw new Error(`escalation policy: ${res.status} ${res.text}`);
  }
}

export const rungKey = (e: EpisodePlan, n: number) => interactionClaimKeys.rung(e.interactionId!, n);

/** Waits until the rungs that fall before the answer are settled (their claims marked delivered, any result). */
export async function rungsSettled(drill: Drill, e: EpisodePlan): Promise<void> {
  const keys = RUNG_SECONDS.slice(0, -1).map((_, n) => rungKey(e, n));
  await waitUntil(
    `the rungs of ${e.episodeId} settled`,
    async () =>
      (await drill.observer.use((d) =>
        claimsOf(d).countDocuments({ _id: { $in: keys }, delivered: true }),
      )) === keys.length,
    { timeoutMs: drill.options.stepTimeoutMs ?? 240_000, intervalMs: 250, errorsMeanNotYet: true },
  ).catch(() => {
    drill.tally.stuckSteps++;
    drill.log(`drill: the rungs of ${e.episodeId} did not settle in time; answering anyway`);
  });
}

/** An action token of the question's push, as the service worker finds it in the decrypted payload. */
function actionToken(drill: Drill, e: EpisodePlan, action: string): string | undefined {
  for (const received of drill.push.received()) {
    const payload = received.payload as PushPayload;
    if (payload.episodeId !== e.episodeId || payload.kind !== 'human_input_requested') continue;
    const token = payload.actions?.find((a) => a.action === action)?.token;
    if (token) return token;
  }
  return undefined;
}

type Call = (
  as: ApiClient,
  method: string,
  route: string,
  body?: unknown,
) => ReturnType<ApiClient['request']>;

/**
 * Answers a question the way its plan says: from the notification's choice, or snoozed from it (the token used
 * once, a replay refused) and then answered through the API; `viaApi` is the studio's answer route.
 */
export async function answerQuestion(
  drill: Drill,
  e: EpisodePlan,
  call: Call,
  viaApi: () => Promise<unknown>,
): Promise<void> {
  const { tally } = drill;
  if (e.answer === 'api') return void (await viaApi());
  const token = actionToken(drill, e, e.answer === 'choice' ? DRILL_CHOICES[0].id : 'snooze');
  if (!token) {
    tally.questions.noToken.push(e.episodeId);
    return void (await viaApi());
  }
  const act = () => call(drill.anonymous, 'POST', '/api/v1/interactions/actions', { token });
  const acted = await act();
  if (e.answer === 'choice') {
    // A retried call whose first try answered finds the token used: the run says whether it went through.
    const run = (
      await call(drill.anonymous.as(e.run.owner, e.run.team.id), 'GET', `/api/v1/runs/${e.run.id}`)
    ).body as { status: string };
    if (acted.status === 200 || (acted.status === 409 && run.status === 'running'))
      tally.questions.byAction++;
    else throw new Error(`action answer of ${e.episodeId}: ${acted.status} ${acted.text}`);
    return;
  }
  if (acted.status === 202) {
    tally.questions.snoozed++;
    if ((await act()).status === 409) tally.questions.snoozeReplaysRefused++;
  } else tally.questions.snoozeRefused.push(`${e.episodeId}: ${acted.status} ${acted.text}`);
  await viaApi();
}

export interface QuestionCounts {
  /** Input pauses by how the plan answers them, and those a notification's choice answered. */
  answeredBy: Record<AnswerWay, number>;
  byAction: number;
  rungs: {
    /** Rungs that fell due before the answer (the drill answers after them). */
    owed: number;
    delivered: number;
    /** Settled with another result (failed, nobody reachable): the claim says so. */
    givenUp: number;
    lost: number;
    lostKeys: string[];
    /** Rung claims or pushes after the answer, or for a run that opted out. */
    afterAnswer: string[];
  };
  closes: {
    /** Devices the question or a rung reached, each owed one close. */
    owed: number;
    delivered: number;
    lost: number;
    lostPairs: string[];
    /** Closes after a choice that do not name it. */
    withoutChoice: number;
  };
  snoozes: {
    taken: number;
    replaysRefused: number;
    /** Snoozes whose token was refused, or whose signal the interaction's history does not hold. */
    lost: string[];
    /** Snoozes sent although answered within their hour. */
    sent: string[];
  };
  /** Questions whose push carried no action token to answer with. */
  noToken: string[];
}

/** What the drive saw of the questions' actions, counted as it went. */
export interface QuestionTally {
  byAction: number;
  snoozed: number;
  snoozeReplaysRefused: number;
  noToken: string[];
  snoozeRefused: string[];
}

export const emptyQuestionTally = (): QuestionTally => ({
  byAction: 0,
  snoozed: 0,
  snoozeReplaysRefused: 0,
  noToken: [],
  snoozeRefused: [],
});

/** The (episode, endpoint) pairs a rung pushed to, by rung: owed once each, told apart by the rung's person. */
export function rungPairs(drill: Drill): Map<string, { e: EpisodePlan; n: number }> {
  const pairs = new Map<string, { e: EpisodePlan; n: number }>();
  for (const e of drill.episodes) {
    if (e.kind !== 'input') continue;
    for (const [n, user] of e.run.team.rungUsers.entries())
      for (const sub of e.run.team.endpoints.get(user) ?? [])
        pairs.set(`${e.episodeId}|${drill.push.idOf(sub)}`, { e, n });
  }
  return pairs;
}

/** Rungs, closes and snoozes, from the claims, the push service and the interactions' histories. */
export async function countQuestions(drill: Drill): Promise<void> {
  const { push, observer, tally } = drill;
  const inputs = drill.episodes.filter((e) => e.kind === 'input');
  const counts: QuestionCounts = {
    answeredBy: { choice: 0, snooze: 0, api: 0 },
    byAction: tally.questions.byAction,
    rungs: { owed: 0, delivered: 0, givenUp: 0, lost: 0, lostKeys: [], afterAnswer: [] },
    closes: { owed: 0, delivered: 0, lost: 0, lostPairs: [], withoutChoice: 0 },
    snoozes: {
      taken: tally.questions.snoozed,
      replaysRefused: tally.questions.snoozeReplaysRefused,
      lost: [...tally.questions.snoozeRefused],
      sent: [],
    },
    noToken: tally.questions.noToken,
  };
  const questionsAt = new Set<string>(); // (episode, endpoint) pairs a question or a rung reached
  const closesAt = new Map<string, PushPayload[]>();
  for (const received of push.received()) {
    const payload = received.payload as PushPayload;
    const pair = `${payload.episodeId}|${received.endpointId}`;
    if (payload.kind === 'answered') closesAt.set(pair, [...(closesAt.get(pair) ?? []), payload]);
    else questionsAt.add(pair);
  }
  const rungPushes = new Map<string, number>(); // `${episodeId}|${n}` → endpoints reached
  for (const [pair, { e, n }] of rungPairs(drill))
    if (questionsAt.has(pair))
      rungPushes.set(`${e.episodeId}|${n}`, (rungPushes.get(`${e.episodeId}|${n}`) ?? 0) + 1);

  for (const e of inputs) {
    counts.answeredBy[e.answer!]++;
    const claims = await observer.use((d) =>
      claimsOf(d)
        .find({ _id: { $regex: `^(rung|snooze)\\|${e.interactionId}\\|` } })
        .toArray(),
    );
    const claimOf = (key: string) => claims.find((c) => c._id === key);
    for (const n of RUNG_SECONDS.keys()) {
      const key = rungKey(e, n);
      const claim = claimOf(key);
      const pushed = rungPushes.get(`${e.episodeId}|${n}`) ?? 0;
      const owed = escalates(e.run) && n < RUNG_SECONDS.length - 1;
      if (!owed) {
        if (claim || pushed)
          counts.rungs.afterAnswer.push(`${key} (claim ${claim?.result ?? 'absent'}, ${pushed} pushes)`);
        continue;
      }
      counts.rungs.owed++;
      if (claim?.delivered && claim.result === 'delivered' && pushed > 0) counts.rungs.delivered++;
      else if (claim?.delivered && claim.result !== 'delivered') counts.rungs.givenUp++;
      else {
        counts.rungs.lost++;
        counts.rungs.lostKeys.push(
          `${key} (claim ${claim ? (claim.result ?? 'pending') : 'absent'}, ${pushed} pushes)`,
        );
      }
    }
    // Every device the question or a rung reached is owed one close (repeats are the push counts' to judge).
    for (const pair of questionsAt) {
      if (!pair.startsWith(`${e.episodeId}|`)) continue;
      counts.closes.owed++;
      const closes = closesAt.get(pair) ?? [];
      if (!closes.length) {
        counts.closes.lost++;
        counts.closes.lostPairs.push(pair);
        continue;
      }
      counts.closes.delivered++;
      if (e.answer === 'choice' && !closes[0].body.includes(`answered: ${DRILL_CHOICES[0].label}`))
        counts.closes.withoutChoice++;
    }
    if (e.answer === 'snooze') {
      const sent = claims.filter((c) => c._id.startsWith('snooze|'));
      if (sent.length) counts.snoozes.sent.push(`${e.episodeId}: ${sent.map((c) => c._id).join(', ')}`);
      if (!(await snoozeRecorded(drill, e)))
        counts.snoozes.lost.push(`${e.episodeId}: no snooze in its history`);
    }
  }
  drill.questionCounts = counts;
}

/** Whether the interaction's workflow holds the snooze (it would send it at its hour were nobody to answer). */
async function snoozeRecorded(drill: Drill, e: EpisodePlan): Promise<boolean> {
  try {
    const history = await drill.client.workflow
      .getHandle(interactionClaimKeys.opened(e.interactionId!))
      .fetchHistory();
    return (history.events ?? []).some(
      (event) => event.workflowExecutionSignaledEventAttributes?.signalName === interactionSnoozedSignal.name,
    );
  } catch {
    return false;
  }
}

export function questionViolations(q: QuestionCounts): string[] {
  const v: string[] = [];
  if (q.rungs.lost) v.push(`${q.rungs.lost} rungs owed and not delivered: ${q.rungs.lostKeys.join(', ')}`);
  if (q.rungs.afterAnswer.length)
    v.push(`rungs after an answer or opt-out: ${q.rungs.afterAnswer.join(', ')}`);
  if (q.closes.lost) v.push(`${q.closes.lost} closes lost: ${q.closes.lostPairs.join(', ')}`);
  if (q.closes.withoutChoice) v.push(`${q.closes.withoutChoice} closes did not name the choice`);
  if (q.snoozes.lost.length) v.push(`snoozes lost: ${q.snoozes.lost.join(', ')}`);
  if (q.snoozes.sent.length)
    v.push(`snoozes sent although answered within the hour: ${q.snoozes.sent.join(', ')}`);
  if (q.snoozes.replaysRefused !== q.snoozes.taken) {
    v.push(`${q.snoozes.taken - q.snoozes.replaysRefused} replayed snooze tokens were not refused`);
  }
  if (q.noToken.length) v.push(`questions whose push carried no action token: ${q.noToken.join(', ')}`);
  return v;
}

export const formatQuestions = (q: QuestionCounts): string =>
  `  questions: answered ${JSON.stringify(q.answeredBy)} (${q.byAction} by a notification's action); rungs owed ${q.rungs.owed}, delivered ${q.rungs.delivered}, ` +
  `given up ${q.rungs.givenUp}, lost ${q.rungs.lost}, after an answer ${q.rungs.afterAnswer.length}; closes owed ` +
  `${q.closes.owed}, delivered ${q.closes.delivered}, lost ${q.closes.lost}; snoozes taken ${q.snoozes.taken} ` +
  `(replays refused ${q.snoozes.replaysRefused}), sent ${q.snoozes.sent.length}, lost ${q.snoozes.lost.length}`;
