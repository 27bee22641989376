// Answering from a notification's action, without a session: the single-use token stands for the person it was
// pushed to and the choice it was minted for, and the answer goes through the studio's transition (answer.ts).
import { ConflictError, ForbiddenError, GoneError, NotFoundError } from '../domain/errors';
import { questionOpen, runWaitsOn, SNOOZE_SECONDS } from '../domain/interaction';
import type { Run } from '../domain/run';
import { hashActionToken, type ActionTokenRow } from '../store/actionTokens';
import { answerInteraction } from './answer';
import type { RunsContext } from './context';

/**
 * Takes the token (once: a replay is a 409), then answers with its choice as its person. An expired token is a
 * 410, an unknown one a 404; none of them changes anything. The token is released again only when the answer
 * failed for a reason of ours (a store write), so the device's retry can finish it: an answer stored before that
 * failure is then completed by answerInteraction's repair instead of being left half done. A request that died
 * there released nothing: the same token finishes its own answer while the run still waits on the question,
 * whether that answer was stored or not yet (the token is taken `untold` until it is).
 */
export type TokenAction = { did: 'answered'; run: Run } | { did: 'snoozed'; until: Date };

/** What the token stands for: an answer with its choice, or a snooze of the question (a push without choices). */
export async function actWithToken(ctx: RunsContext, token: string): Promise<TokenAction> {
  const row = await ctx.actionTokens.get(hashActionToken(token));
  // A token taken before the removal (its request cut short) still finishes what it began.
  const unused = row && !row.usedAt;
  if (unused && (await ctx.teamRemovals.removedSince(row.teamId, row.userId, row.createdAt)))
    throw new ForbiddenError('the person this action was for is no longer in the team');
  if (row?.snooze) return { did: 'snoozed', until: await snoozeWithToken(ctx, row) };
  return { did: 'answered', run: await answerWithToken(ctx, token) };
}

/**
 * Takes the snooze token (once) while the question is still open, then tells the interaction's workflow: the
 * person is pushed again SNOOZE_SECONDS later unless someone answered by then. Answers when. A token taken whose
 * workflow was never told (its request died in between, and the device's retry found it taken) tells it now:
 * the workflow keeps one snooze per token, so a retry racing a slow first request snoozes once.
 */
async function snoozeWithToken(ctx: RunsContext, row: ActionTokenRow): Promise<Date> {
  const leftUntold = row.usedAt !== undefined && row.untold === true;
  if (row.usedAt && !leftUntold) throw new ConflictError('this action was already used');
  const now = ctx.now();
  if (row.expiresAt <= now) throw new GoneError('this action has expired');
  const [run, interaction] = await Promise.all([
    ctx.runs.getForTeam(row.teamId, row.runId),
    ctx.interactions.get(row.runId, row.interactionId),
  ]);
  if (interaction?.status === 'answered') throw new ConflictError('the interaction was already answered');
  if (!run || !interaction || !questionOpen(run, interaction))
    throw new ConflictError('the run no longer waits on this question');
  const at = row.usedAt ?? now;
  if (!leftUntold && !(await ctx.actionTokens.take(row._id, at, { untold: true })))
    throw new ConflictError('this action was already used');
  const ref = { runId: row.runId, teamId: row.teamId, interactionId: row.interactionId };
  try {
    await ctx.interactionSignals?.snoozed(ref, {
      snoozeId: row._id,
      userId: row.userId,
      at: at.toISOString(),
    });
  } catch (err) {
    if (!leftUntold) await ctx.actionTokens.giveBack(row._id, at); // the device's retry can snooze it
    throw err;
  }
  await ctx.actionTokens.told(row._id, ctx.now());
  return new Date(at.getTime() + SNOOZE_SECONDS * 1000);
}

/**
 * The request that took the token died (no release then) while its run still waits on the question, and nothing
 * else finishes its answer: either nothing was stored (the token still `untold`; the device's retry found it taken)
 * or the token's own answer was, and nothing resumes the run while the sweep closes the question on every device as
 * answered. The same token again finishes it; a retry racing a slow first request answers once (recordAnswer).
 */
async function answerLeftHalfDone(ctx: RunsContext, row: ActionTokenRow): Promise<boolean> {
  const [run, interaction] = await Promise.all([
    ctx.runs.getForTeam(row.teamId, row.runId),
    ctx.interactions.get(row.runId, row.interactionId),
  ]);
  if (!interaction || !runWaitsOn(run, row.interactionId)) return false;
  if (interaction.status !== 'answered') {
    if (row.untold !== true) return false;
    // Nothing was stored: the answer is made now, so the token must still be good (a stored one was made in time).
    if (row.expiresAt <= ctx.now()) throw new GoneError('this action has expired');
    return true;
  }
  return interaction.answer === row.choiceId && interaction.answeredBy === row.userId;
}

export async function answerWithToken(ctx: RunsContext, token: string): Promise<Run> {
  const hash = hashActionToken(token);
  const row = await ctx.actionTokens.get(hash);
  if (!row) throw new NotFoundError('unknown action token');
  const caller = { userId: row.userId, teamId: row.teamId };
  if (row.usedAt) {
    if (!(await answerLeftHalfDone(ctx, row))) throw new ConflictError('this action was already used');
    const finished = await answerInteraction(ctx, caller, row.runId, row.interactionId, row.choiceId);
    // Told: the request that took it, if it still runs and fails, can no longer give it back.
    await ctx.actionTokens.told(hash, ctx.now()).catch(() => undefined);
    return finished;
  }
  const at = ctx.now();
  if (row.expiresAt <= at) throw new GoneError('this action has expired');
  const interaction = await ctx.interactions.get(row.runId, row.interactionId);
  const answeredOtherwise =
    interaction?.status === 'answered' &&
    (interaction.answer !== row.choiceId || interaction.answeredBy !== row.userId);
  if (answeredOtherwise) throw new ConflictError('the interaction was already answered');
  if (!(await ctx.actionTokens.take(hash, at, { untold: true }))) {
    // Another request took it, or it expired, since it was read.
    const current = await ctx.actionTokens.get(hash);
    if (current?.usedAt) throw new ConflictError('this action was already used');
    throw new GoneError('this action has expired');
  }
  let answered: Run;
  try {
    answered = await answerInteraction(ctx, caller, row.runId, row.interactionId, row.choiceId);
  } catch (err) {
    const refused = err instanceof ConflictError || err instanceof NotFoundError;
    if (!refused) await ctx.actionTokens.giveBack(hash, at);
    throw err;
  }
  // Left untold, the answered question refuses the token all the same: a failure here fails nothing.
  await ctx.actionTokens.told(hash, ctx.now()).catch(() => undefined);
  return answered;
}
