// A recover of a team's callbacks that gave up in a window (POST /callbacks/recover): pages through the give-ups
// the attempt log recorded, and runs for each one still given up the same redelivery the per-episode route runs
// (workflows/redeliver.ts, as a child with that route's id: never two redeliveries of one episode at once), a
// few at a time. Its progress goes to its store row after every batch. One per team at a time: its id is the
// team's (contract/workflows.ts).
import { continueAsNew, executeChild, ParentClosePolicy, workflowInfo } from '@temporalio/workflow';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/common';
import type { GaveUpPage } from '../contract/activities';
import { runAttributes } from '../contract/searchAttributes';
import {
  callbackRedeliverWorkflowId,
  type RecoverCounts,
  type RecoverInput,
  type RedeliverResult,
} from '../contract/workflows';
import { localStoreCalls } from './common';
import { callbackRedeliverWorkflow } from './redeliver';

const store = localStoreCalls;

/** Redeliveries in flight at once: each is one outbound POST to the team's receivers. */
export const RECOVER_WIDTH = 8;
/** Give-ups read per page. */
export const RECOVER_PAGE = 100;
/** Pages per execution before it continues as new (a page is a few hundred history events). */
const PAGES_PER_RUN = 10;

export async function callbackRecoverWorkflow(input: RecoverInput): Promise<RecoverCounts> {
  const counts: RecoverCounts = { ...(input.progress ?? { found: 0, sent: 0, delivered: 0, failed: 0 }) };
  let after = input.after;
  const recover: RecoverInput = {
    recoverId: input.recoverId,
    teamId: input.teamId,
    since: input.since,
    until: input.until,
  };
  for (let pages = 1; ; pages++) {
    const page = await store.gaveUpCallbacks({
      teamId: input.teamId,
      since: input.since,
      until: input.until,
      limit: RECOVER_PAGE,
      ...(after ? { after } : {}),
    });
    counts.found += page.callbacks.length;
    if (page.callbacks.length) await store.saveRecoverProgress(recover, counts, false);
    for (let i = 0; i < page.callbacks.length; i += RECOVER_WIDTH) {
      const batch = page.callbacks.slice(i, i + RECOVER_WIDTH);
      const results = await Promise.all(batch.map((callback) => redeliver(input.teamId, callback)));
      for (const result of results) {
        if (result === 'delivered') counts.delivered++;
        else if (result === 'failed') counts.failed++;
        else continue; // nothing sent: another delivery of it ran meanwhile
        counts.sent++;
      }
      await store.saveRecoverProgress(recover, counts, false);
    }
    if (!page.next) break;
    after = page.next;
    if (pages >= PAGES_PER_RUN || workflowInfo().continueAsNewSuggested)
      await continueAsNew<typeof callbackRecoverWorkflow>({ ...input, after, progress: counts });
  }
  await store.saveRecoverProgress(recover, counts, true);
  return counts;
}

/** The episode's redelivery; 'busy' when one of it is running already (the route's, or the episode's own). */
async function redeliver(
  teamId: string,
  callback: GaveUpPage['callbacks'][number],
): Promise<RedeliverResult['result'] | 'busy'> {
  try {
    const { result } = await executeChild(callbackRedeliverWorkflow, {
      workflowId: callbackRedeliverWorkflowId(callback.episodeId),
      args: [{ teamId, ...callback }],
      // A closed redelivery of the episode may be followed by this one; a running one is not doubled. A recover
      // that is terminated leaves the redeliveries it started to finish.
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      parentClosePolicy: ParentClosePolicy.ABANDON,
      typedSearchAttributes: runAttributes(callback.runId, teamId),
    });
    return result;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return 'busy';
    throw err;
  }
}
