// The action tokens of a human-input push: minted at fan-out, one per choice for each person about to be pushed
// (without choices, one that snoozes the question for an hour), stored hashed before any push carries them. A retried fan-out mints a fresh set for the people it still has to
// reach; the sets sent before keep working (each token once), and the interaction takes one answer whichever is used.
import type { RunOutcome } from '../../domain/outcome';
import { SNOOZE_ACTION } from '../../domain/interaction';
import { withActions, type InteractionChoice, type PushPayload } from '../../domain/push';
import { hashActionToken, newActionToken, type ActionTokenRow } from '../../store/actionTokens';
import type { PushSubscriptionRow } from '../../store/push/subscriptions';
import type { PushActivityDeps } from './pushActivityDeps';

const SNOOZE_CHOICE: InteractionChoice = { id: SNOOZE_ACTION, label: 'Snooze 1 h' };

/**
 * Each pending device's payload: the base one with its person's tokens, one set per person. A question without
 * choices offers a snooze instead; other kinds carry no actions.
 */
export async function payloadsWithActions(
  deps: Pick<PushActivityDeps, 'actionTokens' | 'actionTokenTtlSeconds' | 'now'>,
  outcome: RunOutcome,
  choices: InteractionChoice[],
  payload: PushPayload,
  pending: PushSubscriptionRow[],
): Promise<(sub: PushSubscriptionRow) => PushPayload> {
  const interactionId = outcome.pause?.interactionId;
  if (!interactionId) return () => payload;
  const snooze = !choices.length;
  const offered = snooze ? [SNOOZE_CHOICE] : choices;
  const createdAt = deps.now();
  const expiresAt = new Date(createdAt.getTime() + deps.actionTokenTtlSeconds * 1000);
  const rows: ActionTokenRow[] = [];
  const byUser = new Map<string, PushPayload>();
  for (const userId of new Set(pending.map((sub) => sub.userId))) {
    const tokens = new Map<string, string>();
    for (const choice of offered) {
      const token = newActionToken();
      tokens.set(choice.id, token);
      rows.push({
        _id: hashActionToken(token),
        teamId: outcome.teamId,
        runId: outcome.runId,
        interactionId,
        userId,
        choiceId: choice.id,
        episodeId: outcome.episodeId,
        ...(snooze ? { snooze: true as const } : {}),
        createdAt,
        expiresAt,
      });
    }
    byUser.set(userId, withActions(payload, offered, tokens));
  }
  // Stored before any push carries them: a token on a device always has its row.
  await deps.actionTokens.insertMany(rows);
  return (sub) => byUser.get(sub.userId) ?? payload;
}
